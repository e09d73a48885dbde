"""Where a sweep's simulations run: a local process pool (the default) or a Ray cluster (`--backend ray`,
an optional extra). Each yields (task, row) as simulations finish; rows do not depend on the backend."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from kvsim.errors import KvsimError, excerpt
from kvsim.sweep.grid import Task, run_task

BACKENDS = ("process", "ray")
RAY_HINT = "pip install 'kvsim[ray]' (or pip install ray)"
CONNECT_TIMEOUT_S = 5.0


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


def check_address(address: str) -> None:
    """A one-line error, within CONNECT_TIMEOUT_S, unless something listens at the Ray address
    (HOST:PORT, or ray://HOST:PORT for Ray Client); `auto` is left to Ray."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise KvsimError(f"--address {excerpt(address)}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        why = exc.strerror or exc
        raise KvsimError(f"--address {excerpt(address)}: no Ray cluster answers there ({why})") from None


def _ray(scenario: str | None, tasks: list[Task], jobs: int,
         address: str | None) -> Iterator[tuple[Task, dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise KvsimError(f"--backend ray needs Ray, which is not installed: {RAY_HINT}") from None
    if address is not None:
        check_address(address)
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": max(1, jobs)}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **kw)
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
