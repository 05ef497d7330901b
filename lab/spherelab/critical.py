r"""Critical regions: a Ctrl-C held back while code that must not stop halfway runs.

Python delivers a ``KeyboardInterrupt`` between bytecodes of whatever the main thread executes:
at a function's entry, after a call returns and at a backward jump (CPython 3.11+ checks nowhere
else). Code that changes several counts that must agree — the parameter locks
(:mod:`spherelab.concurrency`), a fit's rollback (:mod:`spherelab.transaction`) — marks its
functions :func:`critical` and opens a region first thing (:func:`enter_region`, or the counter
:data:`region` itself where no call may follow the closing). A Ctrl-C arriving at the entry of a
critical function, or anywhere while a region is open on the main thread, is held back; the
outermost region raises it once everything is consistent (:func:`leave_region`).

This works with Python's default SIGINT handler in place (the usual case: spherelab then installs
a handler, :func:`install_handler`, that behaves identically outside critical functions); a program
that installs its own handler keeps it and its own semantics. After ``fork`` the forking thread is
the child's main thread.
"""

from __future__ import annotations

import dis
import os
import signal
import threading
from typing import Callable

from ._listing import own_names

__all__ = ["Region", "region", "critical", "enter_region", "leave_region", "install_handler", "on_main_thread",
           "main_thread_ident"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


class Region(threading.local):
    """This thread's critical regions: ``depth`` open ones, and whether a Ctrl-C is ``pending``
    (held back, raised when the outermost closes)."""

    depth = 0
    pending = False


#: the regions of the running thread
region = Region()
_main = [threading.main_thread().ident]
#: code of each critical function -> the offset of its first statement (Python checks for signals
#: at a function's entry, before that statement can open the region)
_ENTRY: dict = {}


def main_thread_ident() -> int:
    """The main thread's identifier (after ``fork``, the forking thread's)."""
    return _main[0]


def on_main_thread() -> bool:
    """Whether the caller runs on the main thread, the one Python delivers a Ctrl-C to."""
    return threading.get_ident() == _main[0]


def critical(func: Callable) -> Callable:
    """Mark ``func`` as opening a critical region (module docstring). A critical function opens
    its region first (:func:`enter_region`, or the counter itself where no call may follow the
    closing) and closes it last."""
    code = list(dis.get_instructions(func))
    resume = next((n for n, i in enumerate(code) if i.opname == "RESUME"), -1)
    _ENTRY[func.__code__] = code[resume + 1].offset  # up to the start of its first statement
    return func


def _on_sigint(signum, frame) -> None:
    if region.depth or (frame is not None and _ENTRY.get(frame.f_code, -1) >= frame.f_lasti):
        region.pending = True  # the handler runs on the main thread: its own region
        return
    signal.default_int_handler(signum, frame)


def install_handler() -> None:
    """On the main thread, put the holding-back SIGINT handler in place of Python's default one
    (a handler the program installed itself is left alone)."""
    if threading.get_ident() == _main[0] and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:  # (cannot fail: a no-op)
            signal.signal(signal.SIGINT, _on_sigint)
        except (ValueError, OSError):  # not the main interpreter
            pass


@critical
def enter_region() -> None:
    """Open a critical region on this thread (for code outside this module: a model's restore).
    Call it first thing in a :func:`critical` function, then ``try: ... finally: leave_region()``."""
    region.depth += 1
    install_handler()


@critical
def leave_region() -> None:
    """Close it; the outermost raises the Ctrl-C held back inside it, if any."""
    region.depth -= 1  # (cannot fail: an int on this thread's record)
    if region.pending and not region.depth:
        region.pending = False
        raise KeyboardInterrupt


def _after_fork_in_child() -> None:
    _main[0] = threading.get_ident()  # the forking thread is the child's main thread


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
