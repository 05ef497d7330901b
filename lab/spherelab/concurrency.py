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

**Ctrl-C.** Taking and giving back the locks are critical functions (:mod:`spherelab.critical`): a
``KeyboardInterrupt`` that arrives while one runs is held back until the locks' counts are
consistent again, then raised: a Ctrl-C while waiting for a lock abandons the wait with nothing
taken, one while giving locks back is raised once all are free.

**fork.** A child forked while other threads hold locks (a fit in another thread, a prediction)
would inherit locks whose owners do not exist in it. After ``fork`` the child resets every lock to
the forking thread's own holds, and every fit in flight in another thread is rolled back there
(:mod:`spherelab.transaction`), so the child sees each model as it was before that fit.
"""

from __future__ import annotations

import copy
import copyreg
import functools
import os
import threading
import weakref
from typing import Any, Callable

from .critical import critical, install_handler, main_thread_ident, on_main_thread, region

__all__ = ["Locked", "ParameterLock", "lock_of", "publish", "holding", "reachable", "reading", "writing"]

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
        self._waiting: set[int] = set()  # the threads waiting for the write side
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
            self._waiting.add(me)
            try:  # (cannot fail: a no-op)
                while self._writer is not None or self._readers:
                    self._wait()
                self._writer, self._depth = me, 1
            finally:
                self._waiting.discard(me)
                self._cond.notify_all()  # readers queued behind this writer may go, if it gave up

    def holds(self, write: bool) -> int:
        """This thread's holds of one side (its count: the lock is re-entrant)."""
        me = threading.get_ident()
        if write:
            return self._depth if self._writer == me else 0
        return self._readers.get(me, 0)

    def abandon(self) -> None:
        """Forget this thread's wait for the write side (after an exception cut it short): readers
        queued behind it may go. Harmless when it was not waiting."""
        with self._cond:
            self._waiting.discard(threading.get_ident())
            self._cond.notify_all()

    def _wait(self) -> None:
        if not on_main_thread():
            self._cond.wait()
            return
        self._cond.wait(0.05)  # short waits: a Ctrl-C held back meanwhile ends the wait
        if region.pending:
            region.pending = False
            raise KeyboardInterrupt

    def release(self, write: bool) -> None:
        """Give back one hold of one side."""
        me = threading.get_ident()
        with self._cond:
            if write:
                depth = self._depth - 1
                self._writer, self._depth = (self._writer, depth) if depth else (None, 0)  # one line: one step
                if not depth:
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
        self._waiting = set()


class _Held:
    """The held sides of a list of locks, taken in order and given back in reverse: a context
    manager whose ``__enter__`` either returns with every lock taken or raises with none.

    What it holds is read from the locks themselves — each lock's holds by this thread, against
    their count before it took them (``before``) — not kept in a tally beside them, so an exception
    of any kind at any point where one can arise (a Ctrl-C, a ``MemoryError`` between taking a lock
    and counting it; the lines marked "cannot fail" run no instruction that can raise) leaves
    nothing taken: the clean-up gives back exactly what is above ``before``, and running it twice
    is harmless."""

    __slots__ = ("locks", "write", "before")

    def __init__(self, locks: list, write: bool) -> None:
        self.locks, self.write, self.before = locks, write, None

    @critical
    def __enter__(self) -> None:
        region.depth += 1
        try:  # (cannot fail: a no-op)
            install_handler()
            self.before = [lock.holds(self.write) for lock in self.locks]  # one store: nothing taken yet
            for lock in self.locks:
                lock.acquire(self.write)
            if region.pending and region.depth == 1:  # a Ctrl-C while taking them: nothing stays taken
                raise KeyboardInterrupt
            region.depth -= 1  # (cannot fail: an int) the last statement: nothing after it can fail
        except BaseException:
            self._give_back(failed=True)
            region.depth -= 1  # (cannot fail: an int on this thread's record)
            if region.pending and not region.depth:  # held back meanwhile: it outranks the failure
                region.pending = False
                raise KeyboardInterrupt from None
            raise

    @critical
    def __exit__(self, *exc) -> None:
        region.depth += 1  # (cannot fail: a small int on this thread's record; a Ctrl-C is held back)
        try:  # (cannot fail: a no-op)
            self._give_back()
        except BaseException:  # not a Ctrl-C (held back): a MemoryError, say, half-way through
            self._give_back(failed=True)  # the locks' own counts say what is left
            raise
        finally:
            region.depth -= 1  # (cannot fail: an int on this thread's record)
        if region.pending and not region.depth:
            region.pending = False
            raise KeyboardInterrupt

    def _give_back(self, failed: bool = False) -> None:
        """Give back, in reverse order, every hold above ``before`` (none before it was recorded);
        after a failure also any wait for a write side that the failure cut short."""
        if failed:
            for lock in self.locks:
                lock.abandon()
        if self.before is None:
            return
        for lock, count in zip(reversed(self.locks), reversed(self.before)):
            while lock.holds(self.write) > count:
                lock.release(self.write)


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
        held = None
        region.depth += 1
        try:  # (cannot fail: a no-op)
            while self.held is None:
                parts = sorted((o for o in reachable(self.root) if o is not self.root), key=id)
                held = _Held([lock_of(self.root)] + [lock_of(p) for p in parts], self.write)
                held.__enter__()
                if [id(o) for o in parts] == sorted(id(o) for o in reachable(self.root) if o is not self.root):
                    self.held = held
                else:
                    held.__exit__(None, None, None)
            if region.pending and region.depth == 1:  # a Ctrl-C while taking them: nothing stays taken
                raise KeyboardInterrupt
            region.depth -= 1  # (cannot fail: an int) the last statement: nothing after it can fail
        except BaseException:
            if held is not None:  # taken, or partly: the locks' own counts say what to give back
                held._give_back(failed=True)
            self.held = None
            region.depth -= 1  # (cannot fail: an int on this thread's record)
            if region.pending and not region.depth:
                region.pending = False
                raise KeyboardInterrupt from None
            raise

    @critical
    def __exit__(self, *exc) -> None:
        try:  # (cannot fail: a no-op)
            self.held.__exit__(*exc)
        except BaseException:
            if self.held is not None:
                self.held._give_back(failed=True)  # harmless when __exit__ finished
            raise
        finally:
            self.held = None


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
    for lock in list(_LOCKS):  # (spherelab.critical's own handler, registered first, moved the main thread)
        lock._after_fork(main_thread_ident())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
