"""The long-lived worker subprocess that runs cases in-process (see harness.py's docstring), and its
limits. The parent side (`Worker`) starts it, hands it one command at a time and restarts it after a
hang, a death or RESTART_EVERY cases; the worker side (`worker_main`) runs `kvsim.cli.main()` with a
patched sys.argv, the case folder as working directory, fd 1 and 2 redirected to capture files, a
per-case wall-clock alarm and an address-space limit.

API mode (a case with `call`): the worker executes the case's Python source instead of `main()`, under
the same limits, and reports it as the command line would: a `kvsim.KvsimError` as its message on one
stderr line after "error: " (written as is: a newline in the message shows as a second line) and exit 2,
a return as exit 0 with "returned TYPE" on stdout, any other exception (SystemExit included) as a
traceback. A `KvsimWarning` (kvsim's own "nothing completed" warning) is output, written to stdout; any
other Python warning goes to stderr, where it fails a valid call as it fails a command.

Started as `python tests/fuzz/worker.py --worker MEMORY_BYTES` (harness.py --worker does the same).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("KVSIM_FUZZ_TARGET") or REPO)
"""The checkout whose kvsim the worker runs (KVSIM_FUZZ_TARGET: e.g. a `git worktree` of an older commit,
to count what a change fixed); cases are always drawn from this checkout's schema."""
TIME_LIMIT_S = float(os.environ.get("KVSIM_FUZZ_TIME_LIMIT", "10"))
"""Per-case wall-clock limit: a hang detector with a generous bound, not a speed assertion."""
MEMORY_LIMIT_BYTES = int(float(os.environ.get("KVSIM_FUZZ_MEMORY_GIB", "3")) * 2**30)
DEBUG = os.environ.get("KVSIM_FUZZ_DEBUG", "1") not in ("", "0")
"""Run kvsim with KVSIM_DEBUG=1, so a bug shows as its traceback (not an "internal error" line, exit 3).
KVSIM_FUZZ_DEBUG=0 fuzzes exactly what a user sees."""
RESTART_EVERY = 300
"""Cases per worker before it is replaced (bounds leaks: open figures, caches)."""


# ---------------------------------------------------------------------------------------------------
# The parent side: hand a command to the worker


class Worker:
    """A long-lived subprocess that runs cases in-process (see the module docstring)."""

    def __init__(self, time_limit_s: float = TIME_LIMIT_S, memory_bytes: int = MEMORY_LIMIT_BYTES):
        self.time_limit_s = time_limit_s
        self.memory_bytes = memory_bytes
        self.proc: subprocess.Popen | None = None
        self.cases = 0
        self._buf = b""
        self.home = Path(tempfile.mkdtemp(prefix="kvsim-fuzz-worker-"))

    # -- process management ----------------------------------------------------------------------
    def start(self) -> None:
        env = dict(os.environ)
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   MPLBACKEND="Agg", MPLCONFIGDIR=str(self.home / "mpl"), PYTHONHASHSEED="0",
                   COLUMNS="250", TERM="dumb", NO_COLOR="1", PYTHONPATH=str(TARGET))
        if DEBUG:
            env["KVSIM_DEBUG"] = "1"  # an escaped exception is re-raised: we see its traceback
        env.pop("KVSIM_HARDWARE_DIR", None)
        log = open(self.home / "worker.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(self.memory_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.home, env=env,
            start_new_session=True)
        log.close()
        self._buf = b""
        self.cases = 0
        ready = self._read_line(120.0)
        if ready is None or json.loads(ready).get("ready") is not True:
            self.stop()
            raise RuntimeError(f"fuzz worker did not start; see {self.home / 'worker.log'}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    def _read_line(self, timeout: float) -> bytes | None:
        """One reply line, or None when the worker is silent for `timeout` s or has exited."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    # -- one command -----------------------------------------------------------------------------
    def execute(self, argv: list[str], cwd: Path, capture: Path, env: dict[str, str],
                call: str = "") -> dict[str, Any]:
        """Run `kvsim argv` (or, given `call`, that Python source: API mode) in cwd; the reply dict has rc,
        kind (None, "hang", "memory", "died"), elapsed and tb (a traceback the worker caught)."""
        if any("\x00" in a for a in argv):
            raise ValueError("an argument list cannot hold a NUL byte (execve refuses it)")
        if self.proc is None or self.proc.poll() is not None or self.cases >= RESTART_EVERY:
            self.stop()
            self.start()
        self.cases += 1
        request = {"argv": argv, "call": call, "cwd": str(cwd), "stdout": str(capture / "stdout.txt"),
                   "stderr": str(capture / "stderr.txt"), "env": env, "timeout": self.time_limit_s}
        t0 = time.monotonic()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._read_line(self.time_limit_s + 15.0)
        elapsed = time.monotonic() - t0
        if line is None:
            alive = self.proc.poll() is None
            self.stop()
            if alive:
                return {"rc": None, "kind": "hang", "elapsed": elapsed, "tb": ""}
            return {"rc": None, "kind": "died", "elapsed": elapsed, "tb": ""}
        reply = json.loads(line)
        if reply.get("restart"):
            self.stop()
        return reply


# ---------------------------------------------------------------------------------------------------
# The worker side


class _CaseTimeout(BaseException):
    """Raised by the SIGALRM handler: the case ran past its limit (not an Exception, so kvsim's
    `except Exception` cannot swallow it)."""


def _on_alarm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise _CaseTimeout()


def worker_main(memory_bytes: int) -> None:
    """Serve cases: one JSON request per line on stdin, one JSON reply per line on stdout."""
    import resource

    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _warm_imports()
    signal.signal(signal.SIGALRM, _on_alarm)
    home = os.getcwd()
    proto_out.write(b'{"ready": true}\n')
    proto_out.flush()
    for line in proto_in:
        reply = _serve(json.loads(line), home)
        proto_out.write((json.dumps(reply) + "\n").encode())
        proto_out.flush()


def _warm_imports() -> None:
    """Import what most cases need once, so each case costs only its own work."""
    import kvsim.cli  # noqa: F401
    for name in ("kvsim.engine.simulation", "kvsim.metrics.report", "kvsim.metrics.summary",
                 "kvsim.sweep.compare", "kvsim.sweep.hitrate_report", "kvsim.api", "kvsim.sweep.plan",
                 "kvsim.sweep.run", "matplotlib.pyplot"):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module under repair must not stop the worker
            pass


def _serve(req: dict[str, Any], home: str) -> dict[str, Any]:
    import traceback
    import warnings

    import kvsim.cli

    saved_env = dict(os.environ)
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    saved_argv = sys.argv
    saved_mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    out_fd = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err_fd = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    keep_err = os.dup(2)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    rc: int | None = None
    kind = None
    tb = ""
    restart = False
    t0 = time.monotonic()
    try:
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.argv = ["kvsim", *req["argv"]]
        signal.setitimer(signal.ITIMER_REAL, float(req["timeout"]))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                if req.get("call"):
                    rc = _call_api(req["call"])
                else:
                    kvsim.cli.main()
                    rc = 0
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except SystemExit as exc:
        rc = _exit_code(exc.code)
    except _CaseTimeout:
        kind, restart = "hang", True
    except MemoryError:
        kind, restart = "memory", True
    except BaseException:  # noqa: BLE001 - what escapes main() is exactly what we are looking for
        tb = traceback.format_exc()
        rc = 1
        try:
            sys.stderr.write(tb)
        except Exception:  # noqa: BLE001
            pass
        restart = isinstance(sys.exc_info()[1], RecursionError)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.monotonic() - t0
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream: nothing to flush
                pass
        os.dup2(keep_err, 2)
        os.close(keep_err)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            if handler is not None:
                signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, saved_mask)
        os.chdir(home)
        _close_figures()
    return {"rc": rc, "kind": kind, "tb": tb, "elapsed": elapsed, "restart": restart}


def _call_api(source: str) -> int:
    """API mode: execute `source` (it assigns `result`); 2 after a KvsimError (its message written as
    the error line), 0 after a return. Any other exception propagates (a traceback); so does a SystemExit,
    as a RuntimeError: the API must never exit the interpreter."""
    import math
    import warnings
    from pathlib import Path, PosixPath

    import kvsim

    scope: dict[str, Any] = {"kvsim": kvsim, "math": math, "Path": Path, "PosixPath": PosixPath,
                             "nan": math.nan, "inf": math.inf}
    error: kvsim.KvsimError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(source, "<fuzz-call>", "exec"), scope)  # noqa: S102 - the case's own source
        except kvsim.KvsimError as exc:
            error = exc
        except SystemExit as exc:
            raise RuntimeError(f"the Python API raised SystemExit({exc.code!r})") from exc
    for w in caught:  # (shown once the recording is over: showing one records it again)
        if issubclass(w.category, kvsim.KvsimWarning):  # kvsim's own (nothing completed): output, not noise
            sys.stdout.write(f"kvsim warning: {w.message}\n")
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    if error is not None:
        sys.stderr.write(f"error: {error}\n")
        return 2
    sys.stdout.write(f"returned {type(scope.get('result')).__name__}\n")
    return 0


def _exit_code(code: Any) -> int:
    """The exit status Python would give for SystemExit(code); a non-int code is printed, as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:  # noqa: BLE001
        pass
    return 1


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        worker_main(int(sys.argv[2]))
    else:
        sys.exit("usage: worker.py --worker MEMORY_BYTES (started by Worker; run cases with harness.py)")
