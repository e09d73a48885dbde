"""Where a sweep's simulations run: a local process pool (the default) or a Ray cluster (`--backend ray`,
an optional extra). Each yields (task, row) as simulations finish; rows do not depend on the backend.

A task that fails fails the sweep with one line naming its point, whatever the backend: a worker hands
back what it raised as plain text (Failure) instead of raising it, since a process pool or Ray would wrap
the exception in their own (Ray's message is its coloured traceback). A KvsimError stays one (bad input,
exit 2); anything else is a WorkerError (a kvsim bug, exit 3)."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from kvsim.errors import KvsimError, RemoteTraceback, WorkerError, excerpt
from kvsim.interrupts import interrupt_behind
from kvsim.sweep.grid import Task, point_label, run_task

BACKENDS = ("process", "ray")
RAY_HINT = "pip install 'kvsim[ray]' (or pip install ray)"
CONNECT_TIMEOUT_S = 5.0
"""Seconds at most for an --address to accept a connection and answer the gRPC handshake."""
RAY_INIT_TIMEOUT_S = 60.0
"""Seconds at most for ray.init to connect to an --address that passed the handshake."""


def run_tasks(scenario: str | None, tasks: list[Task], backend: str = "process", jobs: int = 1,
              address: str | None = None) -> Iterator[tuple[Task, dict[str, Any]]]:
    """Run every task on `backend`, yielding (task, row) in the order they finish."""
    if backend == "process":
        yield from _process(scenario, tasks, jobs)
    elif backend == "ray":
        yield from _ray(scenario, tasks, jobs, address)
    else:
        raise KvsimError(f"--backend {excerpt(backend)}: choose one of {', '.join(BACKENDS)}")


@dataclass(frozen=True, slots=True)
class Failure:
    """What a task raised in its worker, as text: `kind` None for a KvsimError (bad input), else the
    exception's class name; `trace` the worker's traceback (for KVSIM_DEBUG)."""

    kind: str | None
    message: str
    trace: str = ""


def attempt(scenario: str | None, task: Task) -> dict[str, Any] | Failure:
    """run_task, with what it raises handed back as a Failure (what a worker runs)."""
    try:
        return run_task(scenario, task)
    except KvsimError as exc:
        return Failure(None, str(exc))
    except Exception as exc:  # (a kvsim bug: the driver reports it as an internal error naming the point)
        if (interrupt := interrupt_behind(exc)) is not None:
            raise interrupt from None
        return Failure(type(exc).__name__, str(exc), traceback.format_exc())


def where(task: Task) -> str:
    """A task as error lines name it: `sweep point 3 (kv.block_size=7)`, with its repeat past the first."""
    repeat = f" repeat {task.repeat}" if task.repeat else ""
    return f"sweep point {task.point}{repeat} ({point_label(dict(task.values))})"


def row_of(task: Task, got: dict[str, Any] | Failure) -> dict[str, Any]:
    """The task's row, or its Failure raised as one line naming the task."""
    if not isinstance(got, Failure):
        return got
    message = one_line(got.message)
    if got.kind is None:
        raise KvsimError(f"{where(task)}: {message}")
    err = WorkerError(f"{where(task)}: {got.kind}: {excerpt(message, 200)}")
    err.__cause__ = RemoteTraceback(got.trace) if got.trace else None
    raise err


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""A terminal escape sequence (Ray colours its tracebacks)."""


def one_line(text: str) -> str:
    """text without terminal escapes, its whitespace (newlines included) collapsed."""
    return " ".join(ANSI.sub("", text).split())


def _process(scenario: str | None, tasks: list[Task], jobs: int) -> Iterator[tuple[Task, dict[str, Any]]]:
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield t, row_of(t, attempt(scenario, t))
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        pending = {pool.submit(attempt, scenario, t): t for t in tasks}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=lambda f: (pending[f].point, pending[f].repeat)):
                    task = pending.pop(f)
                    try:
                        got = f.result()
                    except Exception as exc:  # (the pool's own failure: a worker killed, BrokenProcessPool)
                        raise WorkerError(f"{where(task)}: its worker process failed: {type(exc).__name__}: "
                                          f"{excerpt(one_line(str(exc)), 200)}") from None
                    yield task, row_of(task, got)
        except BaseException:  # a point failed (or the caller stopped): drop the queued runs, whose rows
            pool.shutdown(wait=False, cancel_futures=True)  # would be discarded, instead of running them all
            raise


def check_backend(backend: object, address: object) -> None:
    """The backend and address checks that come before a sweep's grid is read: `backend` one of BACKENDS,
    Ray importable for `ray`, `address` only with `ray`, and answering as Ray (check_address)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise KvsimError(f"--backend {excerpt(backend)}: choose one of {', '.join(BACKENDS)}")
    if address is not None and backend != "ray":
        raise KvsimError(f"--address {excerpt(address)}: only --backend ray connects to a cluster (this "
                         f"sweep runs on --backend {backend}); drop --address or add --backend ray")
    if backend == "ray":
        _import_ray()
        if address is not None:
            check_address(address)


def check_address(address: object) -> None:
    """A one-line error, within CONNECT_TIMEOUT_S in all, unless the address answers as Ray: a TCP
    connection, then the gRPC handshake Ray's GCS and Ray Client servers speak (HTTP/2: the client's
    preface and an empty SETTINGS frame, answered by the server's SETTINGS frame; RFC 9113 section 3.4).
    HOST:PORT or ray://HOST:PORT; `auto` is left to Ray."""
    if not isinstance(address, str):
        raise KvsimError(f"--address {excerpt(address)}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise KvsimError(f"--address {excerpt(address)}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        why = exc.strerror or exc
        raise KvsimError(f"--address {excerpt(address)}: no Ray cluster answers there ({why})") from None
    with sock:
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            sock.sendall(H2_PREFACE)
            head = _read(sock, 9, deadline)
        except TimeoutError:
            raise KvsimError(f"--address {excerpt(address)}: something accepts connections there but does "
                             f"not answer as Ray (no gRPC handshake within {CONNECT_TIMEOUT_S:g} s)"
                             ) from None
        except OSError as exc:
            head = b""
            if not isinstance(exc, ConnectionError):
                raise KvsimError(f"--address {excerpt(address)}: no Ray cluster answers there "
                                 f"({exc.strerror or exc})") from None
    if len(head) < 9 or head[3] != SETTINGS_FRAME:
        raise KvsimError(f"--address {excerpt(address)}: something answers there but not as Ray (no gRPC "
                         "handshake; a Ray address is the head's GCS port, 6379 by default, or "
                         "ray://HOST:10001)")


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's client connection preface, then an empty SETTINGS frame (length 0, type 4, flags 0, stream 0)."""
SETTINGS_FRAME = 0x04
"""The frame type of HTTP/2's SETTINGS (the 4th byte of a frame header)."""


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Up to n bytes (fewer if the peer closes), raising TimeoutError at the deadline."""
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _import_ray():
    try:
        import ray
    except ImportError:
        raise KvsimError(f"--backend ray needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


class _NotMainThreadNote(logging.Filter):
    """Drops Ray's note that it set no SIGTERM handler off the main thread (kvsim handles SIGTERM itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _init(ray, address: str | None, kw: dict[str, Any]) -> None:
    """ray.init. Connecting to --address runs in a daemon thread given RAY_INIT_TIMEOUT_S (a server that
    passes the handshake but is no Ray keeps Ray's own init waiting for minutes); a local instance starts
    on the calling thread, since Ray ties the processes it starts to the life of the thread starting them."""
    options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False, **kw}
    if address is None:
        ray.init(**options)
        return
    failed: list[BaseException] = []

    def connect() -> None:
        try:
            ray.init(**options)
        except BaseException as exc:  # (handed to the caller's thread)
            failed.append(exc)

    worker_log = logging.getLogger("ray._private.worker")
    quiet = _NotMainThreadNote()
    worker_log.addFilter(quiet)
    th = threading.Thread(target=connect, name="kvsim-ray-init", daemon=True)
    th.start()
    th.join(RAY_INIT_TIMEOUT_S)
    worker_log.removeFilter(quiet)
    if th.is_alive():
        raise KvsimError(f"--address {excerpt(address)}: Ray did not connect within {RAY_INIT_TIMEOUT_S:g} s "
                         "(the address answers gRPC but no Ray cluster came up there)")
    if failed:
        raise failed[0]


def _ray(scenario: str | None, tasks: list[Task], jobs: int,
         address: str | None) -> Iterator[tuple[Task, dict[str, Any]]]:
    ray = _import_ray()
    if address is not None:
        check_address(address)
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": max(1, jobs)}
        try:
            _init(ray, address, kw)
        except KvsimError:
            raise
        except Exception as exc:  # (Ray's own connection and start-up errors: ConnectionError, RuntimeError)
            where = f"--address {excerpt(address)}" if address else "--backend ray"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KvsimError(f"{where}: Ray did not start: {first}") from None
    refs: dict[Any, Task] = {}
    try:
        remote = ray.remote(num_cpus=1)(attempt)
        refs = {remote.remote(scenario, t): t for t in tasks}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                task = refs.pop(ref)
                try:
                    got = ray.get(ref)
                except Exception as exc:  # (Ray's own: a worker died, kvsim missing on a cluster's nodes)
                    raise ray_failure(task, exc) from None
                yield task, row_of(task, got)
    finally:
        _cancel(ray, refs)  # a failed point or an interrupt: the runs not yet done stop on the cluster too
        if started:
            ray.shutdown()


def _cancel(ray, refs: dict[Any, Task]) -> None:
    """Cancel the Ray tasks still pending (best effort: a task that already finished ignores it)."""
    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:  # noqa: BLE001 - a ref Ray no longer knows, or a connection already gone
            pass


def ray_failure(task: Task, exc: BaseException) -> KvsimError:
    """One line for an exception ray.get raised (Ray could not run the task: its worker died, the cluster's
    nodes lack kvsim, ...): the underlying exception's class and message (a RayTaskError's `cause`), Ray's
    traceback and colours left out."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        kind, text = type(cause).__name__, str(cause)
    else:
        kind, lines = type(exc).__name__, [ln for ln in ANSI.sub("", str(exc)).splitlines() if ln.strip()]
        text = lines[0] if lines else ""
    return KvsimError(f"{where(task)}: Ray could not run it: {kind}: {excerpt(one_line(text), 200)}")
