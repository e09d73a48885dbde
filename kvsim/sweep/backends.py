"""Where a sweep's simulations run: a local process pool (the default) or a Ray cluster (`--backend ray`,
an optional extra). Each yields (task, row) as simulations finish; rows do not depend on the backend."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.sweep.grid import Task, run_task

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


def _process(scenario: str | None, tasks: list[Task], jobs: int) -> Iterator[tuple[Task, dict[str, Any]]]:
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield t, run_task(scenario, t)
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        pending = {pool.submit(run_task, scenario, t): t for t in tasks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=lambda f: (pending[f].point, pending[f].repeat)):
                yield pending.pop(f), f.result()


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
    try:
        remote = ray.remote(num_cpus=1)(run_task)
        refs = {remote.remote(scenario, t): t for t in tasks}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                yield refs.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()
