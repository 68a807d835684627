"""SIGTERM and SIGINT during a command that writes (the command line's handlers, cli.py):
the exception a handler raises, and the record that keeps it from being lost.

Python runs a signal handler between two bytecodes of the main thread, wherever that
is. Inside a weakref callback, a ``__del__`` or the garbage collector (importlib's
module locks are released by one), an exception cannot propagate: Python passes it to
``sys.unraisablehook`` and carries on, and the run would complete and replace the
outputs it was told to leave. So the handler records the signal before raising, and
the points that must not be passed once interrupted (each block scanned, an output put
in place) raise it again (:func:`raise_pending`).

Inside native code that calls back into Python (Icechunk's Rust writer importing
numpy's C API), an exception raised by the handler is not Python's to propagate: the
extension panics and prints its own traceback. Such calls run in :func:`deferred`, where
the handler only records the signal, raised when the block ends."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, NoReturn


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT, raised where the program is, so that the cleanup the library
    does on any exception (temporaries deleted, staging removed, uploads withdrawn)
    runs before the process ends."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_pending: int | None = None
_deferring = 0  # nested deferred() blocks the main thread is in


def interrupt(signum: int) -> NoReturn:
    """Record ``signum`` as the run's interruption, then raise it."""
    global _pending
    _pending = signum
    raise Interrupted(signum)


def defer(signum: int) -> bool:
    """Whether a handler must not raise now (inside :func:`deferred`): the signal is then
    recorded, and raised as the block ends."""
    global _pending
    if _deferring:
        _pending = signum
        return True
    return False


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A block during which the handlers record SIGTERM and SIGINT without raising (native
    code calling back into Python); a signal that arrived is raised when it ends."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring:
        raise_pending()


def raise_pending() -> None:
    """Raise the recorded interruption again: one whose first raise Python swallowed
    reaches the caller here (a no-op when none was recorded: one global read)."""
    if _pending is not None:
        raise Interrupted(_pending)


def clear() -> None:
    """Forget the recorded interruption (the command that handled it has ended)."""
    global _pending
    _pending = None


def quiet_unraisable(unraisable: Any) -> None:
    """A ``sys.unraisablehook`` that says nothing of a swallowed :class:`Interrupted`
    (it is raised again, and reported once, by :func:`raise_pending`) and passes
    anything else to Python's own hook."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    sys.__unraisablehook__(unraisable)
