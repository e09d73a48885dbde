"""kvsim/sweep/backends.py and `kvsim sweep`: the process pool and a local Ray instance give the same
rows; resuming skips what a folder holds; a Ray address that does not answer is a one-line error."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.errors import KvsimError
from kvsim.sweep.backends import check_address, run_tasks
from kvsim.sweep.grid import load_sweep

SWEEP = """
set: {simulation.requests: 20}
grid: {kv.block_size: [16, 32], workload.arrival.rate: [2, 8]}
repeats: 2
"""


def _sweep(tmp_path, text=SWEEP):
    p = tmp_path / "sweep.yaml"
    p.write_text(text)
    return p


def test_process_pool_rows_equal_serial(tmp_path):
    sw = load_sweep(_sweep(tmp_path))
    serial = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 1)}
    pooled = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 2)}
    assert serial == pooled and len(serial) == 8


def test_sweep_command_resumes(tmp_path):
    path, out = _sweep(tmp_path), tmp_path / "out"
    first = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert first.exit_code == 0, first.output
    df = pd.read_parquet(out / "sweep.parquet")
    assert len(df) == 8 and list(df.columns[:4]) == ["point", "repeat", "seed", "scenario_hash"]
    assert {"point.kv.block_size", "point.workload.arrival.rate", "latency.ttft_s.p99"} <= set(df.columns)
    again = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert "8 already in" in again.output and "0 to run" in again.output
    assert pd.read_parquet(out / "sweep.parquet").equals(df)
    _sweep(tmp_path, SWEEP.replace("[2, 8]", "[2, 8, 16]"))  # extend the grid: only the new points run
    more = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert "8 already in" in more.output and "4 to run" in more.output
    grown = pd.read_parquet(out / "sweep.parquet")
    assert len(grown) == 12
    old = grown[grown["point.workload.arrival.rate"] != 16].drop(columns=["point"]).reset_index(drop=True)
    assert old.equals(df.drop(columns=["point"]).reset_index(drop=True))


def test_unreachable_ray_address_is_one_line_within_seconds(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(KvsimError, match="no Ray cluster answers there"):
        check_address("127.0.0.1:1")
    assert time.monotonic() - t0 < 10
    with pytest.raises(KvsimError, match="expected HOST:PORT"):
        check_address("nowhere")
    res = CliRunner().invoke(app, ["sweep", str(_sweep(tmp_path)), "--backend", "ray", "--address",
                                   "127.0.0.1:1", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "error: --address '127.0.0.1:1': no Ray cluster answers" in res.output
    assert not (tmp_path / "o").exists()


def test_unknown_backend(tmp_path):
    res = CliRunner().invoke(app, ["sweep", str(_sweep(tmp_path)), "--backend", "dask", "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code != 0 and "--backend 'dask': choose one of process, ray" in res.output


def test_local_ray_gives_the_process_pool_rows(tmp_path):
    ray = pytest.importorskip("ray")
    sw = load_sweep(_sweep(tmp_path))
    pooled = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "process", 2)}
    (tmp_path / "bad").mkdir()
    failing = load_sweep(_sweep(tmp_path / "bad", FAILING))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        on_ray = {t.scenario_hash: row for t, row in run_tasks(sw.scenario, sw.tasks, "ray", 2)}
        with pytest.raises(KvsimError) as exc:  # (one Ray start for both: it takes seconds)
            list(run_tasks(failing.scenario, failing.tasks, "ray", 2))
    finally:
        ray.shutdown()
    assert on_ray == pooled
    assert str(exc.value) == FAILING_LINE  # the worker's own message, no Ray traceback or colours


FAILING = """
set: {simulation.requests: 5}
grid: {model: [llama-3-8b, llama-3-70b]}
"""
FAILING_LINE = ("sweep point 1 (model=llama-3-70b): llama-3-70b weights (141.1 GB per GPU) exceed the 76.4 "
                "GB budget of h100-sxm (memory x gpu_memory_utilization 0.9) at tensor_parallel_size 1; try "
                "tensor_parallel_size 2, fp8 weights or a larger GPU")
"""A point that passes the sweep's checks and fails in its worker (the weights do not fit the GPU)."""


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failing_point_is_one_line_naming_it(tmp_path, jobs):
    sw = load_sweep(_sweep(tmp_path, FAILING))
    with pytest.raises(KvsimError) as exc:
        list(run_tasks(sw.scenario, sw.tasks, "process", jobs))
    assert str(exc.value) == FAILING_LINE


def test_the_sweep_command_keeps_the_runs_done_before_a_failing_point(tmp_path):
    path, out = _sweep(tmp_path, FAILING), tmp_path / "out"
    res = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), "--jobs", "1"])
    assert res.exit_code == 2
    assert res.output.splitlines()[-1] == (f"error: {FAILING_LINE}; the 1 run done before it kept in {out}/ "
                                           "(a rerun skips it)")
    assert pd.read_parquet(out / "sweep.parquet")["point"].tolist() == [0]


def test_an_unexpected_exception_in_a_worker_is_an_internal_error_naming_the_point(tmp_path, monkeypatch,
                                                                                   capsys):
    from kvsim.cli import main
    from kvsim.errors import RemoteTraceback, WorkerError
    from kvsim.sweep import backends

    def broken(scenario, task):
        return 1 / 0

    monkeypatch.setattr(backends, "run_task", broken)
    sw = load_sweep(_sweep(tmp_path, FAILING))
    with pytest.raises(WorkerError) as exc:
        list(run_tasks(sw.scenario, sw.tasks, "process", 1))
    assert str(exc.value) == "sweep point 0 (model=llama-3-8b): ZeroDivisionError: 'division by zero'"
    assert isinstance(exc.value.__cause__, RemoteTraceback) and "1 / 0" in str(exc.value.__cause__)
    monkeypatch.setattr("sys.argv", ["kvsim", "sweep", str(tmp_path / "sweep.yaml"), "--jobs", "1", "--out",
                                     str(tmp_path / "o")])
    monkeypatch.delenv("KVSIM_DEBUG", raising=False)
    with pytest.raises(SystemExit) as code:
        main()
    assert code.value.code == 3
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: internal error, please report it: sweep point 0 (model=llama-3-8b): ZeroDivisionError: "
        "'division by zero' (KVSIM_DEBUG=1 shows the traceback)")


def test_rays_own_failures_are_one_line_without_its_traceback_or_colours(tmp_path):
    """What ray.get raises when Ray could not run a task: a RayTaskError (the exception class it makes
    from the cause, its message Ray's coloured traceback), or a Ray error of its own with a multi-line
    message."""
    ray_exceptions = pytest.importorskip("ray.exceptions")
    from kvsim.sweep.backends import ray_failure

    task = load_sweep(_sweep(tmp_path)).tasks[5]
    traceback = ("\x1b[36mray::attempt()\x1b[39m (pid=1, ip=127.0.0.1)\n  File \"x.py\", line 1, in attempt\n"
                 "ModuleNotFoundError: No module named 'kvsim'")
    cause = ModuleNotFoundError("No module named 'kvsim'")
    wrapped = ray_exceptions.RayTaskError("attempt", traceback, cause, proctitle="ray::attempt", pid=1,
                                          ip="127.0.0.1").as_instanceof_cause()
    assert "\x1b[36m" in str(wrapped)
    assert str(ray_failure(task, wrapped)) == (
        "sweep point 2 repeat 1 (kv.block_size=32, workload.arrival.rate=2): Ray could not run it: "
        "ModuleNotFoundError: \"No module named 'kvsim'\"")
    crashed = ray_exceptions.WorkerCrashedError()
    line = str(ray_failure(task, crashed))
    assert line.startswith("sweep point 2 repeat 1 (kv.block_size=32, workload.arrival.rate=2): Ray could "
                           "not run it: WorkerCrashedError: ")
    assert "\n" not in line and "\x1b" not in line


def test_ray_missing_says_how_to_install(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    sw = load_sweep(_sweep(tmp_path))
    with pytest.raises(KvsimError, match=r"needs Ray, which is not installed: pip install 'kvsim\[ray\]'"):
        list(run_tasks(sw.scenario, sw.tasks, "ray"))


def test_ray_start_failure_is_one_line(tmp_path, monkeypatch):
    """A cluster that accepts the connection but is no Ray (or Ray failing to start) is a KvsimError."""
    ray = pytest.importorskip("ray")

    def refuse(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379\nmore detail")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr("kvsim.sweep.backends.check_address", lambda address: None)
    sw = load_sweep(_sweep(tmp_path))
    with pytest.raises(KvsimError, match=r"^--address '10.0.0.1:6379': Ray did not start: Failed to connect "
                                         r"to Ray cluster at 10.0.0.1:6379$"):
        list(run_tasks(sw.scenario, sw.tasks, "ray", 2, "10.0.0.1:6379"))


def _server(tmp_path, answer: bytes | None):
    """A local TCP server on a free port that accepts every connection and then sends `answer` (None:
    nothing, ever); returns (address, stop)."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)
    held, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

    th = threading.Thread(target=serve, daemon=True)
    th.start()

    def close():
        stop.set()
        th.join(2)
        for c in held:
            c.close()
        srv.close()

    return f"127.0.0.1:{srv.getsockname()[1]}", close


def test_an_address_that_accepts_but_never_answers_is_one_line_within_the_timeout(tmp_path):
    address, close = _server(tmp_path, None)
    try:
        t0 = time.monotonic()
        with pytest.raises(KvsimError) as exc:
            check_address(address)
        took = time.monotonic() - t0
    finally:
        close()
    assert 4.5 < took < 7
    assert str(exc.value) == (f"--address '{address}': something accepts connections there but does not "
                              "answer as Ray (no gRPC handshake within 5 s)")


def test_silent_address_on_the_command_line_exits_2_before_the_grid(tmp_path, monkeypatch):
    monkeypatch.setattr("kvsim.sweep.backends.CONNECT_TIMEOUT_S", 1.0)
    address, close = _server(tmp_path, None)
    try:
        sweep_file = str(_sweep(tmp_path, "grid: {kv.block_size: [0]}"))
        res = CliRunner().invoke(app, ["sweep", sweep_file, "--backend", "ray", "--address", address, "--out",
                                       str(tmp_path / "o")])
    finally:
        close()
    assert res.exit_code == 2
    assert res.output == (f"error: --address '{address}': something accepts connections there but does not "
                          "answer as Ray (no gRPC handshake within 1 s)\n")
    assert not (tmp_path / "o").exists()


def test_an_address_that_answers_but_not_http2_is_not_ray(tmp_path):
    address, close = _server(tmp_path, b"SSH-2.0-OpenSSH_9.6\r\n")
    try:
        with pytest.raises(KvsimError) as exc:
            check_address("ray://" + address)
    finally:
        close()
    assert str(exc.value) == (f"--address 'ray://{address}': something answers there but not as Ray (no gRPC "
                              "handshake; a Ray address is the head's GCS port, 6379 by default, or "
                              "ray://HOST:10001)")


def test_an_address_that_answers_the_grpc_handshake_passes(tmp_path):
    """A server whose first frame is HTTP/2 SETTINGS (what Ray's GCS sends: checked against a ray 2.60
    head node) passes the probe; whether it is a Ray cluster is then Ray's to say."""
    address, close = _server(tmp_path, b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64")
    try:
        check_address(address)
    finally:
        close()


def test_address_without_ray_backend_is_an_error(tmp_path):
    bad_point = _sweep(tmp_path, "grid: {kv.block_size: [0]}")  # (would fail later: the flags come first)
    res = CliRunner().invoke(app, ["sweep", str(bad_point), "--address", "127.0.0.1:6379", "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output == ("error: --address '127.0.0.1:6379': only --backend ray connects to a cluster (this "
                          "sweep runs on --backend process); drop --address or add --backend ray\n")
    import kvsim

    with pytest.raises(KvsimError, match=r"^--address '127.0.0.1:6379': only --backend ray"):
        kvsim.sweep({"grid": {"kv.block_size": [16]}}, address="127.0.0.1:6379")


def test_bad_backend_is_refused_before_a_20000_point_grid_is_checked(tmp_path):
    rates = ", ".join(str(1 + i / 1000) for i in range(20_000))
    path = _sweep(tmp_path, f"grid: {{workload.arrival.rate: [{rates}]}}")
    t0 = time.monotonic()
    res = CliRunner().invoke(app, ["sweep", str(path), "--backend", "dask", "--out", str(tmp_path / "o")])
    assert time.monotonic() - t0 < 5
    assert res.exit_code == 2 and res.output == "error: --backend 'dask': choose one of process, ray\n"
    with pytest.raises(KvsimError, match=r"^--backend 'dask': choose one of process, ray$"):
        import kvsim

        kvsim.sweep(str(path), backend="dask")


def test_ray_init_that_never_returns_is_bounded(tmp_path, monkeypatch):
    """A server that passes the handshake but is no Ray keeps ray.init waiting (minutes, ray 2.60):
    connecting to --address runs under RAY_INIT_TIMEOUT_S."""
    import threading

    ray = pytest.importorskip("ray")
    never = threading.Event()
    monkeypatch.setattr(ray, "init", lambda **kw: never.wait())
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr("kvsim.sweep.backends.check_address", lambda address: None)
    monkeypatch.setattr("kvsim.sweep.backends.RAY_INIT_TIMEOUT_S", 0.5)
    sw = load_sweep(_sweep(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(KvsimError) as exc:
        list(run_tasks(sw.scenario, sw.tasks, "ray", 2, "10.0.0.1:6379"))
    never.set()
    assert time.monotonic() - t0 < 3
    assert str(exc.value) == ("--address '10.0.0.1:6379': Ray did not connect within 0.5 s (the address "
                              "answers gRPC but no Ray cluster came up there)")


def test_connecting_off_the_main_thread_keeps_rays_thread_note_quiet(tmp_path, monkeypatch, caplog):
    """ray.init on the helper thread logs that it set no SIGTERM handler; kvsim drops that one line."""
    import logging

    ray = pytest.importorskip("ray")
    from kvsim.sweep import backends

    def init(**kw):
        logging.getLogger("ray._private.worker").warning("SIGTERM handler is not set because current thread "
                                                         "is not the main thread.")
        logging.getLogger("ray._private.worker").warning("another note")

    monkeypatch.setattr(ray, "init", init)
    with caplog.at_level(logging.WARNING, logger="ray._private.worker"):
        backends._init(ray, "10.0.0.1:6379", {"address": "10.0.0.1:6379"})
    assert [r.getMessage() for r in caplog.records] == ["another note"]


def test_a_failing_point_cancels_the_runs_still_queued(tmp_path, monkeypatch):
    """The pool's `with` waited for every queued run before the error surfaced (a long sweep ran to its end
    to report its first failure, and the rows were thrown away): the queued ones are cancelled."""
    from kvsim.sweep import backends

    cancelled = []

    class Recording(backends.ProcessPoolExecutor):
        def shutdown(self, wait=True, *, cancel_futures=False):
            cancelled.append(cancel_futures)
            super().shutdown(wait=wait, cancel_futures=cancel_futures)

    monkeypatch.setattr(backends, "ProcessPoolExecutor", Recording)
    grid = "set: {simulation.requests: 5}\ngrid: {model: [llama-3-70b, llama-3-8b], kv.block_size: [16, 32]}"
    sw = load_sweep(_sweep(tmp_path, grid))
    with pytest.raises(KvsimError, match=r"^sweep point [01] \(model=llama-3-70b, kv.block_size=(16|32)\): "
                                         "llama-3-70b weights"):
        list(run_tasks(sw.scenario, sw.tasks, "process", 2))
    assert cancelled[0] is True


def test_a_failed_ray_task_cancels_the_tasks_still_pending(tmp_path, monkeypatch):
    """When one point fails, the runs Ray has not finished are cancelled (on a cluster they would go on)."""
    from types import SimpleNamespace

    cancelled, submitted = [], []

    def remote(fn):
        def submit(scenario, task):
            submitted.append(object())
            return submitted[-1]
        return SimpleNamespace(remote=submit)

    def get(ref):
        raise RuntimeError("worker died")

    fake = SimpleNamespace(is_initialized=lambda: True, remote=lambda **kw: remote,
                           wait=lambda refs, num_returns: (refs[:num_returns], refs[num_returns:]),
                           get=get, cancel=cancelled.append, shutdown=lambda: None)
    monkeypatch.setattr("kvsim.sweep.backends._import_ray", lambda: fake)
    sw = load_sweep(_sweep(tmp_path))
    with pytest.raises(KvsimError, match="Ray could not run it: RuntimeError: 'worker died'"):
        list(run_tasks(sw.scenario, sw.tasks, "ray", 2))
    assert len(submitted) == 8 and cancelled == submitted[1:]
