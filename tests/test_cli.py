"""The `kvsim` command line through typer's CliRunner: outputs of `run`, determinism, one-line errors that
leave no output folder behind, and the small reference commands (validate, models, hardware, footprint)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim import __version__, cli
from kvsim.cli import app

TINY = ["--set", "simulation.requests=30"]
OUTPUT_FILES = ("summary.json", "requests.parquet", "timeline.parquet", "report.md", "run.json",
                "kv_usage.png", "concurrency.png", "latency_cdf.png")
DETERMINISTIC_FILES = ("summary.json", "requests.parquet", "timeline.parquet")
SUMMARY_KEYS = (
    "requests.completed", "throughput.requests_per_s", "throughput.output_tokens_per_s",
    *(f"latency.{m}.{s}" for m in ("ttft_s", "tpot_s", "e2e_s") for s in ("mean", "p50", "p90", "p99")),
    "concurrency.mean", "concurrency.p50", "concurrency.p99", "concurrency.max",
    "kv.capacity_blocks", "kv.block_size", "kv.utilization_mean", "kv.internal_fragmentation_mean",
    "preemptions", "scenario", "kvsim_version",
)

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def wide_console():
    """Rich sizes tables to the terminal (80 columns under CliRunner, or $COLUMNS): pin a wide console so
    that cells are never truncated or wrapped."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli.console, "_width", 200)
        yield


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def dig(data: dict, dotted: str):
    for key in dotted.split("."):
        assert isinstance(data, dict) and key in data, f"summary.json lacks {dotted}"
        data = data[key]
    return data


def assert_one_line_error(result, out: Path | None = None) -> str:
    """A user error: non-zero exit, no exception escaped, one line on stderr starting with 'error:', and
    (when out is given) no output folder or temporary sibling left behind."""
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.output
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith("error: "), text
    assert result.stdout == ""
    if out is not None:
        assert not out.exists()
        assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []
    return lines[0]


# ---- kvsim run: outputs and determinism ----

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three tiny runs of the default scenario: seed 0 twice (a, b) and seed 1 (c)."""
    base = tmp_path_factory.mktemp("runs")
    results = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        out = base / name
        results[name] = (runner.invoke(app, ["run", *TINY, "--seed", str(seed), "--out", str(out)]), out)
    return results


def test_run_writes_every_output(runs):
    result, out = runs["a"]
    assert result.exit_code == 0, result.output
    assert result.exception is None
    for name in OUTPUT_FILES:
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0, name
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []
    assert "30 requests" in result.stdout
    assert "outputs in" in result.stdout


def test_run_summary_keys(runs):
    _, out = runs["a"]
    summary = json.loads((out / "summary.json").read_text())
    for key in SUMMARY_KEYS:
        dig(summary, key)
    assert summary["requests"]["completed"] == 30
    assert summary["kv"]["block_size"] == 16
    assert summary["kvsim_version"] == __version__
    assert summary["scenario"]["simulation"]["requests"] == 30
    assert summary["scenario"]["simulation"]["seed"] == 0
    assert summary["throughput"]["requests_per_s"] > 0
    assert summary["latency"]["ttft_s"]["p50"] <= summary["latency"]["ttft_s"]["p99"]


def test_run_json_and_report(runs):
    _, out = runs["a"]
    info = json.loads((out / "run.json").read_text())
    assert info["kvsim_version"] == __version__
    assert info["wall_s"] >= 0
    report = (out / "report.md").read_text()
    assert report.startswith("# kvsim report: default")
    for png in ("kv_usage.png", "concurrency.png", "latency_cdf.png"):
        assert f"({png})" in report
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_seed_is_byte_identical(runs):
    (_, a), (_, b) = runs["a"], runs["b"]
    for name in DETERMINISTIC_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_different_seed_differs(runs):
    (_, a), (result, c) = runs["a"], runs["c"]
    assert result.exit_code == 0, result.output
    for name in DETERMINISTIC_FILES:
        assert (a / name).read_bytes() != (c / name).read_bytes(), name


def test_rerun_replaces_earlier_output(tmp_path):
    out = tmp_path / "out"
    first = invoke("run", *TINY, "--out", out)
    assert first.exit_code == 0, first.output
    second = invoke("run", *TINY, "--seed", 3, "--out", out)
    assert second.exit_code == 0, second.output
    assert json.loads((out / "summary.json").read_text())["scenario"]["simulation"]["seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_rerun_never_deletes_files_the_user_added(tmp_path):
    out = tmp_path / "out"
    assert invoke("run", *TINY, "--out", out).exit_code == 0
    (out / "notes.md").write_text("my notes")
    (out / "analysis").mkdir()
    result = invoke("run", *TINY, "--seed", 3, "--out", out)
    assert "which kvsim did not write" in assert_one_line_error(result)
    assert (out / "notes.md").read_text() == "my notes" and (out / "analysis").is_dir()
    assert json.loads((out / "summary.json").read_text())["scenario"]["simulation"]["seed"] == 0


def test_run_refuses_to_replace_unrelated_folder(tmp_path):
    out = tmp_path / "mine"
    (out / ".git").mkdir(parents=True)
    (out / "notes.txt").write_text("keep me")
    (out / "summary.json").write_text("{}")
    result = invoke("run", *TINY, "--out", out)
    assert "not a kvsim output folder" in assert_one_line_error(result)
    assert (out / "notes.txt").read_text() == "keep me" and (out / ".git").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_run_never_writes_into_the_working_directory_or_the_scenarios_folder(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    exp.mkdir()
    scenario = exp / "scenario.yaml"
    scenario.write_text("name: mine\nsimulation: {requests: 5}\n")
    monkeypatch.chdir(exp)
    for out in (".", "..", str(exp)):
        result = invoke("run", "scenario.yaml", "--out", out)
        assert "working directory or a parent" in assert_one_line_error(result)
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "exp/scenario.yaml", "--out", "exp")
    assert "would contain the input scenario.yaml" in assert_one_line_error(result)
    assert sorted(p.name for p in exp.iterdir()) == ["scenario.yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_run_without_plots_writes_the_same_tables_and_no_png(runs, tmp_path):
    _, with_plots = runs["a"]
    out = tmp_path / "out"
    result = invoke("run", *TINY, "--seed", "0", "--no-plots", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        ["summary.json", "requests.parquet", "timeline.parquet", "report.md", "report.html", "run.json"])
    for name in ("summary.json", "requests.parquet", "timeline.parquet"):
        assert (out / name).read_bytes() == (with_plots / name).read_bytes(), name
    report = (out / "report.md").read_text()
    assert ".png" not in report and "None drawn (`kvsim run --no-plots`)" in report


def test_run_with_slo_marks_requests_and_reports_goodput(tmp_path):
    out = tmp_path / "out"
    result = invoke("run", *TINY, "--slo", "ttft_s.p99=0.05", "--slo", "tpot_s.p99.9=1", "--out", out)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["slo"] == {"ttft_s": {"p99": 0.05}, "tpot_s": {"p99.9": 1.0}}
    requests = pd.read_parquet(out / "requests.parquet")
    met = int(requests["meets_slo"].sum())
    assert summary["goodput"]["requests"] == met
    assert summary["goodput"]["requests_per_s"] == pytest.approx(met / summary["throughput"]["makespan_s"])
    assert summary["slo"]["ttft_s"]["value_s"] == summary["latency"]["ttft_s"]["p99"]
    assert summary["slo"]["tpot_s"]["attained"] is True
    assert "SLO TTFT p99 <= 0.05 s" in result.stdout
    plain = invoke("run", *TINY, "--no-plots", "--out", tmp_path / "plain")
    assert plain.exit_code == 0
    assert "slo" not in json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert "meets_slo" not in pd.read_parquet(tmp_path / "plain" / "requests.parquet").columns


def test_run_with_progress_bar(tmp_path):
    result = invoke("run", "--set", "simulation.requests=5", "--progress", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "summary.json").is_file()


# ---- kvsim run: one-line errors, no output folder ----

SCENARIO_FILES = {
    "bad.yaml": "kv:\n  block_size: [16\n",
    "unknown.yaml": "kv:\n  blok_size: 16\n",
    "trace.yaml": "workload:\n  kind: trace\n  trace:\n    path: no_such_trace.csv\n",
}

RUN_ERRORS = [
    pytest.param(["bad.yaml"], "bad.yaml:3: ", id="bad-yaml"),
    pytest.param(["unknown.yaml"], "kv.blok_size: unknown key", id="unknown-key"),
    pytest.param(["--set", "workload.arrival.rate=-1"], "workload.arrival.rate", id="negative-rate"),
    pytest.param(["trace.yaml"], "no_such_trace.csv", id="missing-trace"),
    pytest.param(["missing.yaml"], "missing.yaml: scenario file not found", id="missing-scenario"),
    pytest.param(["--set", "kv.block_size"], "expected KEY=VALUE", id="bad-set-syntax"),
    pytest.param(["--set", "model=no-such-model"], "unknown model 'no-such-model'", id="unknown-model"),
    pytest.param(["--set", "hardware=no-such-gpu"], "unknown hardware 'no-such-gpu'", id="unknown-hardware"),
    pytest.param(["--set", "model=llama-3.1-405b", "--set", "hardware=l40s"], "exceed", id="weights-too-big"),
    pytest.param(["--set", "parallelism.tensor_parallel_size=3"], "tensor_parallel_size 3", id="bad-tp"),
    pytest.param(["--set", "scheduler.max_num_seqs=64", "--set", "scheduler.max_num_batched_tokens=8"],
                 "max_num_batched_tokens", id="batched-below-seqs"),
    pytest.param(["latin1.yaml"], "latin1.yaml", id="non-utf8-scenario"),
    pytest.param(["--seed", "-1"], "seed", id="negative-seed"),
    pytest.param(["--slo", "ttft_s=2"], "--slo 'ttft_s=2': expected METRIC.PNN=SECONDS", id="slo-syntax"),
    pytest.param(["--slo", "ttfx_s.p99=2"], "slo: unknown metric 'ttfx_s'", id="slo-unknown-metric"),
    pytest.param(["--slo", "ttft_s.p99=-2"], "slo: ttft_s.p99: the threshold must be", id="slo-threshold"),
]


@pytest.fixture
def scenario_dir(tmp_path, monkeypatch):
    for name, text in SCENARIO_FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("args", "needle"), RUN_ERRORS)
def test_run_error_is_one_line_and_writes_nothing(scenario_dir, args, needle):
    out = scenario_dir / "out"
    result = invoke("run", *args, *TINY, "--out", out)
    assert needle in assert_one_line_error(result, out)


def test_run_usage_error_has_no_traceback(tmp_path):
    out = tmp_path / "out"
    result = invoke("run", "--seed", "abc", "--out", out)
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "--seed" in result.output
    assert not out.exists()


# ---- kvsim validate ----

def test_validate_ok(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("kv:\n  block_size: 32\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert f"{path}: ok" in result.stdout
    assert "llama-3-8b on h100-sxm (tp=1)" in result.stdout
    assert "KV blocks of 32 tokens" in result.stdout


def test_validate_applies_set(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("")
    result = invoke("validate", path, "--set", "kv.block_size=64")
    assert result.exit_code == 0, result.output
    assert "KV blocks of 64 tokens" in result.stdout


@pytest.mark.parametrize(("text", "needle"), [
    ("kv:\n  blok_size: 16\n", "kv.blok_size: unknown key"),
    ("model: llama-3.1-405b\nhardware: l40s\n", "exceed"),
    ("workload:\n  kind: trace\n  trace:\n    path: no_such_trace.csv\n", "file not found"),
])
def test_validate_errors(tmp_path, monkeypatch, text, needle):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert needle in assert_one_line_error(invoke("validate", path))


# ---- reference commands ----

def test_models_lists_catalog():
    result = invoke("models")
    assert result.exit_code == 0, result.output
    assert "llama-3-8b" in result.stdout
    assert "opt-13b" in result.stdout


def test_hardware_lists_profiles():
    result = invoke("hardware")
    assert result.exit_code == 0, result.output
    assert "h200" in result.stdout
    assert "h100-sxm" in result.stdout


def test_version():
    result = invoke("version")
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def per_token_bytes(stdout: str) -> int:
    match = re.search(r"KV bytes per token \(per GPU\)\s*│\s*([\d,]+) B \(", stdout)
    assert match, stdout
    return int(match.group(1).replace(",", ""))


def test_footprint_opt13b_fp16():
    # OPT-13B: 40 layers x 40 heads x 128 head dim x 2 (K and V) x 2 bytes = 819,200 B = 800 KiB per token.
    result = invoke("footprint", "opt-13b", "--tokens", 1000, "--kv-dtype", "fp16")
    assert result.exit_code == 0, result.output
    assert "819,200 B (800.0 KiB)" in result.stdout
    assert per_token_bytes(result.stdout) == 819_200


def test_footprint_tp2_halves_per_gpu_bytes():
    result = invoke("footprint", "opt-13b", "--tokens", 1000, "--kv-dtype", "fp16", "--tp", 2)
    assert result.exit_code == 0, result.output
    assert per_token_bytes(result.stdout) == 409_600


@pytest.mark.parametrize(("args", "needle"), [
    (["opt-13b", "--tokens", "1000", "--kv-dtype", "fp9"], "fp9"),
    (["no-such-model", "--tokens", "1000"], "unknown model"),
    (["opt-13b", "--tokens", "1000", "--hardware", "no-such-gpu"], "unknown hardware"),
])
def test_footprint_errors(args, needle):
    assert needle in assert_one_line_error(invoke("footprint", *args))


@pytest.mark.parametrize("argv", [["run", "--seed", "abc"], ["bogus"], ["footprint"],
                                  ["footprint", "opt-13b", "--tokens", "0"]])
def test_console_entry_point_turns_usage_errors_into_one_line(argv, monkeypatch, capsys):
    from kvsim.cli import main

    monkeypatch.setattr("sys.argv", ["kvsim", *argv])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: kvsim") and "\n" not in err and "Traceback" not in err


def test_console_entry_point_passes_kvsim_errors_through(monkeypatch, capsys):
    from kvsim.cli import main

    monkeypatch.setattr("sys.argv", ["kvsim", "run", "no-such-scenario.yaml"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == "error: no-such-scenario.yaml: scenario file not found"


def test_sigterm_while_writing_exits_143_and_keeps_the_old_output(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    assert invoke("run", "--set", "simulation.requests=5", "--out", out).exit_code == 0
    before = (out / "summary.json").read_bytes()
    code = ("import os, signal, sys\n"
            "from kvsim.metrics import plots\n"
            "def killed(*a, **k):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "plots.write_plots = killed\n"
            "from kvsim.cli import main\n"
            f"sys.argv = ['kvsim', 'run', '--set', 'simulation.requests=6', '--out', {str(out)!r}]\n"
            "main()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 143, res.stderr
    assert res.stderr.strip() == "error: terminated" and "Traceback" not in res.stderr
    assert (out / "summary.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_broken_hardware_profile_is_one_error_line_and_no_table(tmp_path, monkeypatch):
    (tmp_path / "h200.yaml").write_text((Path(__file__).parents[1] / "hardware_profiles" / "h200.yaml")
                                        .read_text())
    (tmp_path / "bad.yaml").write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    monkeypatch.setenv("KVSIM_HARDWARE_DIR", str(tmp_path))
    result = invoke("hardware")
    assert result.exit_code == 2
    assert result.stdout == ""
    bad = tmp_path / "bad.yaml"
    assert result.stderr.strip().splitlines() == [f"error: {bad}:1: not UTF-8 text (byte 8)"]
    (tmp_path / "worse.yaml").write_text("name: [")
    result = invoke("hardware")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"error: {bad}:1: not UTF-8 text (byte 8) (and 1 more broken profile files)"]


def test_a_run_with_nothing_completed_says_so_on_its_first_line(tmp_path):
    res = runner.invoke(app, ["run", "--set", "simulation.requests=5", "--set", "scheduler.max_model_len=64",
                              "--out", str(tmp_path / "out"), "--no-plots"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == (
        "warning: 0 of 5 requests completed: 5 refused (5 prompt longer than max_model_len); the latency "
        "figures below are empty (scheduler.max_model_len, kv.gpu_memory_utilization and "
        "kv.num_gpu_blocks_override set the limits)")


def test_a_second_slo_on_one_metric_is_refused_not_silently_replacing_the_first(tmp_path):
    res = runner.invoke(app, ["run", "--set", "simulation.requests=5", "--slo", "ttft_s.p99=2", "--slo",
                              "ttft_s.p50=1", "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert res.output.strip() == ("error: --slo 'ttft_s.p50=1': ttft_s already has an objective (p99=2); "
                                  "one percentile per metric")
    assert not (tmp_path / "out").exists()
    assert cli.slo_overrides(["ttft_s.p99.9=2", "tpot_s.p50=0.1"]) == ["slo.ttft_s={p99.9: 2}",
                                                                        "slo.tpot_s={p50: 0.1}"]


def test_an_slo_flag_replacing_the_scenarios_objective_says_so(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("simulation: {requests: 5}\nslo: {ttft_s: {p99: 2.0}}\n")
    res = invoke("run", scenario, "--slo", "ttft_s.p50=1", "--slo", "tpot_s.p90=0.05", "--out",
                 tmp_path / "o", "--no-plots")
    assert res.exit_code == 0 and res.stderr == ""
    assert res.stdout.splitlines()[0] == (
        "note: --slo ttft_s.p50=1 replaces the scenario's ttft_s objective (p99=2)")
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["slo"]["ttft_s"]["percentile"] == "p50"
    same = invoke("run", scenario, "--slo", "ttft_s.p99=2", "--out", tmp_path / "o", "--no-plots")
    assert same.exit_code == 0 and same.stderr == "" and "note:" not in same.stdout
    failed = invoke("run", scenario, "--slo", "ttft_s.p50=1", "--out", scenario)  # --out is a file
    assert failed.exit_code == 2 and len(failed.stderr.splitlines()) == 1
    assert failed.stderr.startswith("error: ")


def test_the_command_line_runs_one_blas_thread_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("GOTO_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cli.one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    cli.one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    for name in ("GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.setenv(name, "3")
        cli.one_blas_thread()
        assert "OPENBLAS_NUM_THREADS" not in os.environ
        monkeypatch.delenv(name)


def test_the_command_line_gives_arrow_the_system_allocator_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    cli.system_arrow_allocator()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    cli.system_arrow_allocator()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"


def _after_main(before: str, shown: str) -> str:
    """What `shown` (an expression) is after `kvsim --version` ran through main() in a fresh interpreter,
    `before` run (and asserted) first, after `import kvsim.cli`."""
    code = ("import gc, os, sys\n"
            "for name in ('OPENBLAS_NUM_THREADS', 'GOTO_NUM_THREADS', 'OMP_NUM_THREADS',\n"
            "             'ARROW_DEFAULT_MEMORY_POOL'):\n"
            "    os.environ.pop(name, None)\n"
            f"import kvsim.cli\n{before}\n"
            "sys.argv = ['kvsim', '--version']\n"
            "try:\n    kvsim.cli.main()\nexcept SystemExit:\n    pass\n"
            f"print({shown})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_the_command_line_sets_its_blas_threads_before_numpy_loads():
    assert _after_main("assert 'numpy' not in sys.modules", "os.environ['OPENBLAS_NUM_THREADS']") == "1"


def test_the_command_line_chooses_arrows_pool_before_pyarrow_loads():
    shown = "__import__('pyarrow').default_memory_pool().backend_name"
    assert _after_main("assert 'pyarrow' not in sys.modules", shown) == "system"


def test_the_program_collects_its_youngest_generation_every_program_gc_threshold_allocations():
    assert _after_main("assert gc.get_threshold()[0] == 700",
                       "gc.get_threshold()[0] == kvsim.cli.PROGRAM_GC_THRESHOLD") == "True"


def test_an_interrupt_that_c_code_turned_into_a_systemerror_exits_as_terminated(monkeypatch, capsys):
    """A SIGTERM landing inside an extension's call (CI: during pandas' import) surfaces as a SystemError
    caused by the Terminated: exit 143 with 'error: terminated', not an internal error (exit 3)."""
    from kvsim import interrupts

    def command(**_kwargs):
        try:
            interrupts.raised_by.append(15)  # (as kvsim's handler records it)
            raise interrupts.Terminated()
        except KeyboardInterrupt as exc:
            raise SystemError("<class 'x'> returned a result with an exception set") from exc

    monkeypatch.setattr(interrupts, "raised_by", [])
    monkeypatch.setattr(cli, "app_for", lambda _args: command)
    assert cli._main() == 143
    assert capsys.readouterr().err.strip() == "error: terminated"


def test_an_error_after_an_interrupt_was_raised_exits_as_interrupted(monkeypatch, capsys):
    """numpy's import_array turns the interrupt into ImportError('numpy._core.multiarray failed to import')
    with no chain back to it (seen under pandas' import in a signalled run): whatever escapes the command
    after kvsim's handler raised an interrupt is its consequence."""
    from kvsim import interrupts

    def command(**_kwargs):
        raise ImportError("numpy._core.multiarray failed to import")

    monkeypatch.setattr(interrupts, "raised_by", [2])
    monkeypatch.setattr(cli, "app_for", lambda _args: command)
    assert cli._main() == 130
    assert capsys.readouterr().err.strip() == "error: interrupted"
    monkeypatch.setattr(interrupts, "raised_by", [])
    assert cli._main() == 3
    assert "internal error" in capsys.readouterr().err
