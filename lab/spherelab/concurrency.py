r"""The concurrency contract: a model serves predictions from many threads at once, each seeing one
complete parameter set.

Every saveable object (a model and its kernel, likelihood, features, groups, statistics) has a
re-entrant, writer-preferring readers–writer lock (:func:`lock_of`):

* **readers**, any number at once: ``predict_f``, ``predict_y``, ``elbo``, ``get_params``,
  :func:`spherelab.save`, ``copy.deepcopy`` and pickling hold the read side of the model's lock and
  of every part it reaches (a Dask prediction, per block);
* **writers**, one at a time and never beside a reader: a fit (``fit``, ``fit_svi``,
  ``optimal_q``, for its whole duration), ``set_params`` and ``set_parameter_vector`` hold the write
  side of the model and all its parts; assigning a validated hyper-parameter
  (``kernel.lengthscale = ...``, ``likelihood.variance = ...``) holds its object's write side (a
  constructor's first assignments need none: nobody else can see the object yet).

So a prediction made while another thread calls ``set_params`` equals the prediction of the
parameters before or after that call, never a mix; predictions, saves and copies never see a fit's
trial points; a kernel shared by two models is never changed under either's prediction; and models
that share nothing are fitted and used concurrently. Locks are taken model first, then its parts in
a fixed order, which rules out deadlocks between these operations. A thread that changes a parameter
inside its own prediction gets a ``RuntimeError`` instead of a deadlock.

**Ctrl-C.** Taking and giving back the locks are *critical* functions (:func:`critical`): a
``KeyboardInterrupt`` that arrives while one runs — Python delivers it between bytecodes of
whatever the main thread executes — is held back until the locks' counts are consistent again, then
raised: a Ctrl-C while waiting for a lock abandons the wait with nothing taken, one while giving
locks back is raised once all are free. This works with Python's default SIGINT handler in place
(the usual case; spherelab then installs a handler that behaves identically outside critical
functions); a program that installs its own handler keeps it and its own semantics.

**fork.** A child forked while other threads hold locks (a fit in another thread, a prediction)
would inherit locks whose owners do not exist in it. After ``fork`` the child resets every lock to
the forking thread's own holds, and every fit in flight in another thread is rolled back there
(:mod:`spherelab.models.transaction`), so the child sees each model as it was before that fit.
"""

from __future__ import annotations

import copy
import copyreg
import dis
import functools
import os
import signal
import threading
import weakref
from typing import Any, Callable

__all__ = ["Locked", "ParameterLock", "lock_of", "publish", "holding", "reachable", "reading", "writing",
           "critical", "enter_region", "leave_region"]

# ---- KeyboardInterrupt held back inside critical regions -------------------------------------------
class _Region(threading.local):
    depth = 0  # critical functions running on this thread
    pending = False  # a Ctrl-C held back


_region = _Region()
_main = [threading.main_thread().ident]
#: code of each critical function -> the offset of its first statement (Python checks for signals
#: at a function's entry, before that statement can open the region)
_ENTRY: dict = {}


def critical(func: Callable) -> Callable:
    """Mark ``func`` as opening a critical region. Python checks for signals at a function's entry,
    after calls and at backward jumps; a Ctrl-C arriving at the entry of a critical function, or
    anywhere while a region is open on the main thread, is held back, and the outermost region
    raises it once everything is consistent. A critical function opens its region first
    (:func:`enter_region`, or the counter itself where no call may follow the closing) and closes
    it last."""
    code = list(dis.get_instructions(func))
    resume = next((n for n, i in enumerate(code) if i.opname == "RESUME"), -1)
    _ENTRY[func.__code__] = code[resume + 1].offset  # up to the start of its first statement
    return func


def _on_sigint(signum, frame) -> None:
    if _region.depth or (frame is not None and _ENTRY.get(frame.f_code, -1) >= frame.f_lasti):
        _region.pending = True  # the handler runs on the main thread: its own region
        return
    signal.default_int_handler(signum, frame)


def _install_handler() -> None:
    """On the main thread, put :func:`_on_sigint` in place of Python's default SIGINT handler."""
    if threading.get_ident() == _main[0] and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _on_sigint)
        except (ValueError, OSError):  # not the main interpreter
            pass


@critical
def enter_region() -> None:
    """Open a critical region on this thread (for code outside this module: a model's restore).
    Call it first thing in a :func:`critical` function, then ``try: ... finally: leave_region()``."""
    _region.depth += 1
    _install_handler()


@critical
def leave_region() -> None:
    """Close it; the outermost raises the Ctrl-C held back inside it, if any."""
    _region.depth -= 1
    if _region.pending and not _region.depth:
        _region.pending = False
        raise KeyboardInterrupt


# ---- the lock ---------------------------------------------------------------------------------------
_LOCKS: "weakref.WeakSet[ParameterLock]" = weakref.WeakSet()


class ParameterLock:
    """A re-entrant, writer-preferring readers–writer lock (module docstring). Use it through
    :meth:`read` / :meth:`write` or :func:`holding`."""

    def __reduce__(self):  # copies and pickles of an object get a lock of their own, unheld
        return (ParameterLock, ())

    def __init__(self) -> None:
        self._mutex = threading.Lock()  # guards the counts below
        self._cond = threading.Condition(self._mutex)
        self._readers: dict[int, int] = {}
        self._writer: int | None = None
        self._depth = 0
        self._waiting = 0
        _LOCKS.add(self)

    def read(self) -> "_Held":
        """``with lock.read():`` the read side."""
        return _Held([self], False)

    def write(self) -> "_Held":
        """``with lock.write():`` the write side."""
        return _Held([self], True)

    def free(self) -> bool:
        """Whether no thread holds or waits for either side (and nobody is changing the counts)."""
        return self._writer is None and not self._readers and not self._waiting and not self._mutex.locked()

    def acquire(self, write: bool) -> None:
        """Take one side (re-entrantly). On the main thread a held-back Ctrl-C ends a wait with
        nothing taken (``KeyboardInterrupt``)."""
        me = threading.get_ident()
        with self._cond:
            if not write:
                if self._writer != me and me not in self._readers:
                    while self._writer is not None or self._waiting:
                        self._wait()
                self._readers[me] = self._readers.get(me, 0) + 1
                return
            if self._writer == me:
                self._depth += 1
                return
            if me in self._readers:
                raise RuntimeError("a model's parameters were changed inside a prediction on the same thread "
                                   "(spherelab.concurrency): change them before or after predicting")
            self._waiting += 1
            try:
                while self._writer is not None or self._readers:
                    self._wait()
            except BaseException:
                self._cond.notify_all()  # readers queued behind this writer may go
                raise
            finally:
                self._waiting -= 1
            self._writer, self._depth = me, 1

    def _wait(self) -> None:
        if threading.get_ident() != _main[0]:
            self._cond.wait()
            return
        self._cond.wait(0.05)  # short waits: a Ctrl-C held back meanwhile ends the wait
        if _region.pending:
            _region.pending = False
            raise KeyboardInterrupt

    def release(self, write: bool) -> None:
        """Give back one hold of one side."""
        me = threading.get_ident()
        with self._cond:
            if write:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()
                return
            left = self._readers[me] - 1
            if left:
                self._readers[me] = left
            else:
                del self._readers[me]
                self._cond.notify_all()

    def _after_fork(self, me: int) -> None:
        """In a forked child: only the forking thread's holds remain (nobody else exists there)."""
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._readers = {k: v for k, v in self._readers.items() if k == me}
        if self._writer != me:
            self._writer, self._depth = None, 0
        self._waiting = 0


class _Held:
    """The held sides of a list of locks, taken in order and given back in reverse: a context
    manager whose ``__enter__`` either returns with every lock taken or raises with none."""

    __slots__ = ("locks", "write", "taken")

    def __init__(self, locks: list, write: bool) -> None:
        self.locks, self.write, self.taken = locks, write, 0

    @critical
    def __enter__(self) -> None:
        _region.depth += 1
        try:
            _install_handler()
            for lock in self.locks:
                lock.acquire(self.write)
                self.taken += 1
        except BaseException:
            self._give_back()
            _region.depth -= 1
            if _region.pending and not _region.depth:  # held back meanwhile: it outranks the failure
                _region.pending = False
                raise KeyboardInterrupt from None
            raise
        if _region.pending and _region.depth == 1:  # a Ctrl-C while taking them: nothing stays taken
            self._give_back()
            _region.pending, _region.depth = False, 0
            raise KeyboardInterrupt
        _region.depth -= 1

    @critical
    def __exit__(self, *exc) -> None:
        _region.depth += 1
        try:
            self._give_back()
        finally:
            _region.depth -= 1
        if _region.pending and not _region.depth:
            _region.pending = False
            raise KeyboardInterrupt

    def _give_back(self) -> None:
        while self.taken:
            self.locks[self.taken - 1].release(self.write)
            self.taken -= 1


_CREATE = threading.Lock()


def lock_of(obj: Any) -> ParameterLock:
    """The lock of ``obj``'s parameters (created on first use)."""
    lock = obj.__dict__.get("_parameter_lock")
    if lock is None:
        with _CREATE:
            lock = obj.__dict__.setdefault("_parameter_lock", ParameterLock())
    return lock


def publish(obj: Any, slot: str, value: Any) -> None:
    """``obj.__dict__[slot] = value``: under ``obj``'s write lock once the object is built (the slot
    set before), directly while its constructor runs (nobody else can see it yet)."""
    if slot in obj.__dict__:
        with lock_of(obj).write():
            obj.__dict__[slot] = value
    else:
        obj.__dict__[slot] = value


class Locked:
    """Base of the objects with a parameter lock (every :class:`~spherelab._state.Saveable`):
    copies and pickles read the object as a prediction does, under the read side of its lock and
    of every part it reaches, so none captures a fit's trial parameters. A copy gets a lock of its
    own on first use."""

    def __deepcopy__(self, memo: dict):
        with holding(self):
            new = copyreg.__newobj__(type(self))
            memo[id(self)] = new
            for name, value in list(vars(self).items()):
                if name != "_parameter_lock":
                    new.__dict__[name] = copy.deepcopy(value, memo)
        return new

    def __copy__(self):
        with holding(self):
            new = copyreg.__newobj__(type(self))
            new.__dict__.update({k: v for k, v in vars(self).items() if k != "_parameter_lock"})
        return new

    def __reduce_ex__(self, protocol):
        # the state deep-copied under the lock: pickle reads the parts later, outside it
        with holding(self):
            state = {k: v for k, v in vars(self).items() if k != "_parameter_lock"}
            state = copy.deepcopy(self._pickled(state))
        return copyreg.__newobj__, (type(self),), state

    def _pickled(self, state: dict) -> dict:
        """The attributes a pickle holds (a copy's are all of them): by default every one."""
        return state


def reachable(root: Any) -> list:
    """``root`` and every locked object its attributes reach (through lists, tuples, dicts)."""
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        pending = list(vars(obj).values())
        while pending:
            v = pending.pop()
            if isinstance(v, (list, tuple)):
                pending.extend(v)
            elif isinstance(v, dict):
                pending.extend(v.values())
            elif isinstance(v, Locked) and id(v) not in seen:
                stack.append(v)
    return list(seen.values())


class holding:  # noqa: N801 - used as a function: ``with holding(model):``
    """Hold the read (or write) side of ``root``'s lock and of every part it reaches: the root's
    first, then the parts' by ``id``. A part replaced while waiting (a fit that built new
    features) is noticed and the locks taken again. Entering either takes every lock or raises
    with none taken; leaving gives all back, whatever interrupts it."""

    __slots__ = ("root", "write", "held")

    def __init__(self, root: Any, write: bool = False) -> None:
        self.root, self.write, self.held = root, write, None

    @critical
    def __enter__(self) -> None:
        _region.depth += 1
        try:
            while self.held is None:
                parts = sorted((o for o in reachable(self.root) if o is not self.root), key=id)
                held = _Held([lock_of(self.root)] + [lock_of(p) for p in parts], self.write)
                held.__enter__()
                if [id(o) for o in parts] == sorted(id(o) for o in reachable(self.root) if o is not self.root):
                    self.held = held
                else:
                    held.__exit__(None, None, None)
        except BaseException:
            _region.depth -= 1
            if _region.pending and not _region.depth:
                _region.pending = False
                raise KeyboardInterrupt from None
            raise
        if _region.pending and _region.depth == 1:
            self.held.__exit__(None, None, None)  # gives every lock back (the region still open)
            self.held = None
            _region.pending, _region.depth = False, 0
            raise KeyboardInterrupt
        _region.depth -= 1

    @critical
    def __exit__(self, *exc) -> None:
        # no region of its own: its entry is critical, and nothing before the call can take a signal
        held, self.held = self.held, None
        held.__exit__(*exc)


def reading(method: Callable) -> Callable:
    """Decorator of a model's method: run it holding the read side of the model and its parts."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with holding(self):
            return method(self, *args, **kwargs)

    return run


def writing(method: Callable) -> Callable:
    """Decorator of a model's method: run it holding the write side of the model and its parts."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with holding(self, write=True):
            return method(self, *args, **kwargs)

    return run


def _after_fork_in_child() -> None:
    global _CREATE
    _CREATE = threading.Lock()
    _main[0] = threading.get_ident()  # the forking thread is the child's main thread
    for lock in list(_LOCKS):
        lock._after_fork(_main[0])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
