"""Command-line conventions: --version / -V, -h, shell completion, bare `kvsim` one error line,
every command's help within 80 columns with whole option names, and `kvsim schema`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvsim import __version__

COMMANDS = ("run", "compare", "plan", "sweep", "validate", "models", "hardware", "footprint", "calibrate",
            "hitrate", "policies", "schema", "version")


def kvsim(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"}
    return subprocess.run([sys.executable, "-m", "kvsim.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_version_flags():
    for flag in ("--version", "-V"):
        res = kvsim(flag)
        assert res.returncode == 0 and res.stdout.strip() == f"kvsim {__version__}" and not res.stderr


def test_bare_kvsim_is_one_error_line_not_the_help():
    res = kvsim()
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == ("error: kvsim: missing command (kvsim run simulates the default scenario; kvsim -h "
                          "lists the commands)\n")


def test_completion_is_on():
    assert "--install-completion" in kvsim("-h").stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns_with_whole_option_names(command):
    res = kvsim(command, "-h")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in res.stdout
    assert "-h, --help" in res.stdout


def test_footprint_help_names_every_option_whole():
    out = kvsim("footprint", "-h").stdout
    assert "--gpu-memory-utilization" in out and "--block-size" in out


def test_schema_is_json_with_units_defaults_and_vllm_names():
    res = kvsim("schema")
    assert res.returncode == 0
    doc = json.loads(res.stdout)
    kv = doc["$defs"]["KVConfig"]["properties"]
    assert kv["block_size"]["default"] == 16 and kv["block_size"]["x-unit"] == "tokens per KV block"
    assert kv["swap_space_gb"]["x-unit"].startswith("GiB")
    assert doc["$defs"]["Arrival"]["properties"]["rate"]["x-unit"].startswith("arrivals per second")
    assert doc["properties"]["kv"]["default"]["block_size"] == 16  # a section's default, from its factory
    assert doc["x-vllm-aliases"]["kv.dtype"] == ["kv_cache_dtype"]
    assert "description" in kv["gpu_memory_utilization"] or "default" in kv["gpu_memory_utilization"]
