"""`kvsim footprint --max-loras N --max-lora-rank R`: the LoRA slots' bytes taken from the KV memory."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvsim import cli
from kvsim.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setattr(cli.console, "_width", 200)


def test_footprint_shows_the_slots_and_the_smaller_pool():
    plain = runner.invoke(app, ["footprint", "llama-3.1-8b", "--tokens", "4096"])
    lora = runner.invoke(app, ["footprint", "llama-3.1-8b", "--tokens", "4096", "--max-loras", "8"])
    assert plain.exit_code == 0 and lora.exit_code == 0
    # 8 slots x 80 MiB (rank 16) = 640 MiB = 320 pages of 2 MiB: 26,770 -> 26,450 on h100-sxm
    assert "640.0 MiB" in lora.output and "26,450 pages" in lora.output and "26,770 pages" in plain.output


def test_footprint_refuses_a_model_whose_modules_are_not_sized():
    res = runner.invoke(app, ["footprint", "deepseek-v2-lite", "--tokens", "16", "--max-loras", "1"])
    assert res.exit_code == 2 and "drop --max-loras" in res.output
