"""`kvsim footprint` rows (always an answer for a valid model) and `kvsim models`."""

import re

from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.specs.catalog import get_model
from kvsim.specs.footprint_report import footprint_rows, groups_summary
from kvsim.specs.hardware import load_hardware


def rows(name, tokens, **kw):
    args = {"kv_dtype": "bf16", "tp": 1, "gpu_memory_utilization": 0.9, "block_size": 16, **kw}
    return dict(footprint_rows(get_model(name), load_hardware("h100-sxm"), args["kv_dtype"], args["tp"],
                               args["gpu_memory_utilization"], args["block_size"], tokens))


def test_llama_3_70b_weights_that_do_not_fit_are_a_row():
    r = rows("llama-3-70b", 8192)
    assert r["KV for 8,192 tokens (per GPU)"] == "2.50 GiB"
    assert r["weights on h100-sxm"].startswith("do not fit at TP 1 (141.1 GB > 76.4 GB")
    assert r["TP 2 on h100-sxm"].startswith("fits 1 sequence of 8,192 tokens (628 pages of 16 tokens")


def test_mistral_rows_use_the_page_plan():
    r = rows("mistral-7b", 32768)
    assert r["pages one sequence of 32,768 tokens holds"].startswith("256 = 512.0 MiB")
    assert r["  if every layer kept every token"] == "2,048 pages"
    assert r["sequences of 32,768 tokens that fit"] == "107"


def test_groups_are_reported_apart():
    r = rows("nemotron-h-8b", 8192)
    assert r["layer groups"] == "4 full + 24 state(mamba2)"
    assert r["  24 state(mamba2)"] == "49.4 MiB"  # the last row of that label: bytes for 8,192 tokens
    v4 = rows("deepseek-v4-pro", 1 << 20, kv_dtype={"rope": "bf16", "rest": "fp8"}, tp=8)
    assert v4["  block cache (compressed entries)"] == "5.29 GiB"
    assert v4["  state cache (window + tail)"] == "6.5 MiB"
    assert v4["weights on h100-sxm"].startswith("do not fit at TP 8")  # 1,573B x 4.25 bits / 8 = 104.5 GB
    assert v4["TP 16 on h100-sxm"].startswith("fits ")


def test_groups_summary():
    assert groups_summary(get_model("llama-3-8b")) == "32 full"
    assert groups_summary(get_model("gemma-2-9b")) == "21 full + 21 sliding(4096)"
    assert groups_summary(get_model("deepseek-v4-flash")) == "43 compressed(csa/4, hca/128; window 128)"


runner = CliRunner()


def test_cli_footprint_answers_when_weights_do_not_fit():
    result = runner.invoke(app, ["footprint", "llama-3-70b", "--tokens", "8192"])
    assert result.exit_code == 0, result.output
    assert "do not fit at TP 1" in result.stdout and "TP 2 on h100-sxm" in result.stdout


def test_cli_footprint_takes_a_mapping_dtype_and_errors_stay_one_line():
    result = runner.invoke(app, ["footprint", "deepseek-v3", "--tokens", "1000", "--kv-dtype",
                                 "{rope: bf16, rest: fp8}", "--tp", "8", "--hardware", "h200"])
    assert result.exit_code == 0, result.output
    assert re.search(r"KV bytes per token \(per GPU\)\s*│\s*39,040 B", result.stdout)
    bad = runner.invoke(app, ["footprint", "deepseek-v3", "--tokens", "10", "--kv-dtype", "{bits: 0}"])
    assert bad.exit_code == 2 and "bits must be a number" in bad.output


def test_cli_models_lists_groups():
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    assert "nemotron-h-8b" in result.stdout and "mamba2" in result.stdout and "4096)" in result.stdout
