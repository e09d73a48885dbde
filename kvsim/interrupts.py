"""SIGINT and SIGTERM while kvsim writes output: each becomes one exception that unwinds the command, so the
temporary folders are removed (kvsim/output_folder.py) and the CLI exits 130 / 143 with one line.

Python runs a signal's handler in the main thread at the next bytecode boundary, wherever that is. Four
places make a raising handler print a traceback, lose the interrupt or disguise it, and each is handled here:

- **A second signal while the first unwinds** (Ctrl-C pressed twice; `kill` after Ctrl-C) would raise
  inside the first's cleanup or the CLI's exit path. Once an interrupt has been raised, or the command has
  finished (drop_interrupts), the next is dropped: the process is already on its way out (a third ends
  it at once).
- **A handler running inside a weakref callback or a `__del__`** (an import's module-lock cleanup): Python
  cannot propagate the exception, prints "Exception ignored in ..." and goes on. The unraisable hook keeps
  it (_swallowed) and SIGALRM raises it again a millisecond later, or raise_swallowed() at the latest.
- **A handler running inside an extension's call** (pandas' import): C code turns the interrupt into
  another error (a SystemError "returned a result with an exception set", numpy's ImportError), not always
  chained to it. interrupt_behind finds it (in the chain, or by raised_by), so the CLI exits as
  interrupted and a sweep point raises it.
- **A signal during the interpreter's shutdown**, after the CLI returned: `restore_signals(before,
  default=True)` (the `kvsim` program) leaves both signals to their default action, not to Python's
  SIGINT handler, which would raise inside `threading._shutdown`.

signals_held() defers both signals across a step that must not be cut (a folder made and recorded, the
old output swapped for the new one).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives while kvsim's handlers are in force."""


raised_by: list[int] = []
"""The signals whose handler raised an interrupt under the outermost catch_signals. An error that escapes
the command after one is its consequence, whatever C code made of it (interrupt_behind)."""

_quiet = False
"""True once an interrupt has been raised (it is unwinding the command) or the command has finished: a
signal then adds nothing and is dropped, up to DROPPED_MOST of them; the next ends the process at once by
its default action (a cleanup that hangs can still be stopped). Reset by the outermost restore_signals."""
_dropped = 0
DROPPED_MOST = 1
_swallowed: list[int] = []
"""SIGINTs and SIGTERMs whose exception Python swallowed (see the module's doc), to be raised again."""
REDELIVER_S = 0.001
"""Seconds from a swallowed interrupt to the SIGALRM that raises it again."""
_before: dict[str, Any] = {}
"""What the outermost catch_signals replaced: "hook" (sys.unraisablehook), "alarm" (SIGALRM's handler,
once an interrupt has been swallowed)."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int, frame: Any) -> None:
    global _quiet, _dropped
    if _quiet:
        _dropped += 1
        if _dropped > DROPPED_MOST:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        return
    _quiet = True
    raised_by.append(signum)
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt()


def catch_signals() -> Any:
    """Put kvsim's handlers in force: SIGTERM (and SIGINT, where Python's own handler has it) raise one
    interrupt, and one that Python would swallow is kept. Returns what restore_signals puts back."""
    if not _in_main_thread():
        return None
    if sys.unraisablehook is not _hold_swallowed:  # (the outermost call)
        _before["hook"] = sys.unraisablehook
        sys.unraisablehook = _hold_swallowed
        raised_by.clear()
    sigint = signal.getsignal(signal.SIGINT)
    if sigint is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    return signal.signal(signal.SIGTERM, _interrupt), sigint


def restore_signals(before: Any, default: bool = False) -> None:
    """Put back what catch_signals found (with default, both signals' default action instead: the process
    is ending). The outermost call (before is not kvsim's) puts back the unraisable hook and SIGALRM's
    handler as well, and forgets a swallowed interrupt not raised by then, as Python would have."""
    if before is None or not _in_main_thread():
        return
    sigterm, sigint = before
    if sigterm is not _interrupt and "hook" in _before:
        _swallowed.clear()
        if "alarm" in _before:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, _before.pop("alarm"))
        sys.unraisablehook = _before.pop("hook")
    for sig, handler in ((signal.SIGTERM, sigterm), (signal.SIGINT, sigint)):
        if default:
            signal.signal(sig, signal.SIG_DFL)
        elif handler is not None and signal.getsignal(sig) is _interrupt:  # (None: set outside Python)
            signal.signal(sig, handler)
    if sigterm is not _interrupt:
        _set_quiet(False)
        raised_by.clear()


def terminated() -> bool:
    """Whether a SIGTERM raised an interrupt (the CLI exits 143, not 130)."""
    return signal.SIGTERM in raised_by


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt an error stands for, if any: one in its cause / context chain (a SystemError
    "... returned a result with an exception set" is caused by it), or else, once kvsim's handler has raised
    one under catch_signals, that one: C code does not always chain it (numpy's ImportError)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    if raised_by:
        return Terminated() if raised_by[0] == signal.SIGTERM else KeyboardInterrupt()
    return None


def drop_interrupts() -> None:
    """The command is over: a SIGINT or SIGTERM from now until restore_signals is dropped."""
    _set_quiet(True)


def _set_quiet(quiet: bool) -> None:
    global _quiet, _dropped
    _quiet, _dropped = quiet, 0


def _hold_swallowed(unraisable: Any) -> None:
    """sys.unraisablehook while catch_signals is in force: an interrupt is kept to be raised again, not
    printed; anything else goes to the hook there was before."""
    if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _in_main_thread()):
        _before["hook"](unraisable)
        return
    _set_quiet(False)  # (it never reached the code it interrupted)
    _swallowed.append(signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT)
    if hasattr(signal, "setitimer"):
        if "alarm" not in _before:
            _before["alarm"] = signal.signal(signal.SIGALRM, _redeliver)
        signal.setitimer(signal.ITIMER_REAL, REDELIVER_S)


def _redeliver(signum: int, frame: Any) -> None:
    if frame is not None and frame.f_code is _hold_swallowed.__code__:  # (still inside the hook: later)
        signal.setitimer(signal.ITIMER_REAL, REDELIVER_S)
        return
    raise_swallowed()


def raise_swallowed() -> None:
    """Deliver a swallowed interrupt, if there is one, to its signal's handler now (held back inside
    signals_held, raised otherwise)."""
    if _swallowed:
        signal.raise_signal(_swallowed.pop(0))


@contextmanager
def signals_held(default_after: bool = False) -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the duration, then deliver them to the handlers they had (with
    default_after, to their default action: the process ends by the signal). Python runs signal handlers
    in the main thread only, so swapping the handlers defers a signal whichever thread (pyarrow's, BLAS's)
    the kernel hands it to; blocking it in the main thread would not."""
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []
    previous: dict[int, Any] = {}
    try:  # (a signal arriving between the two swaps restores the first)
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if default_after and sig in pending else handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)
