r"""The concurrency contract: a model serves predictions from many threads at once, each seeing one
complete parameter set.

Every saveable object (a model and its kernel, likelihood, features, groups, statistics) has a
re-entrant, writer-preferring readers–writer lock (:func:`lock_of`):

* **readers**, any number at once: ``predict_f``, ``predict_y``, ``elbo`` and ``get_params`` hold
  the read side of the model's lock and of every part it reaches (a Dask prediction, per block);
* **writers**, one at a time and never beside a reader: a fit (``fit``, ``fit_svi``,
  ``optimal_q``, for its whole duration), ``set_params`` and ``set_parameter_vector`` hold the write
  side of the model and all its parts; assigning a validated hyper-parameter
  (``kernel.lengthscale = ...``, ``likelihood.variance = ...``) holds its object's write side (a
  constructor's first assignments need none: nobody else can see the object yet).

So a prediction made while another thread calls ``set_params`` equals the prediction of the
parameters before or after that call, never a mix; predictions never see a fit's trial points; a
kernel shared by two models is never changed under either's prediction; and models that share
nothing are fitted and used concurrently. Locks are taken model first, then its parts in a fixed
order, which rules out deadlocks between these operations. A thread that changes a parameter
inside its own prediction gets a ``RuntimeError`` instead of a deadlock.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator

from ._state import Saveable

__all__ = ["ParameterLock", "lock_of", "publish", "holding", "reachable", "reading", "writing"]


class ParameterLock:
    """A re-entrant, writer-preferring readers–writer lock (module docstring)."""

    def __reduce__(self):  # copies and pickles of an object get a lock of their own, unheld
        return (ParameterLock, ())

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, int] = {}
        self._writer: int | None = None
        self._depth = 0
        self._waiting = 0

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer != me and me not in self._readers:
                while self._writer is not None or self._waiting:
                    self._cond.wait()
            self._readers[me] = self._readers.get(me, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._readers[me] -= 1
                if not self._readers[me]:
                    del self._readers[me]
                    self._cond.notify_all()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                if me in self._readers:
                    raise RuntimeError("a model's parameters were changed inside a prediction on the same thread "
                                       "(spherelab.concurrency): change them before or after predicting")
                self._waiting += 1
                try:
                    while self._writer is not None or self._readers:
                        self._cond.wait()
                finally:
                    self._waiting -= 1
                self._writer, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()


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


def reachable(root: Any) -> list:
    """``root`` and every saveable object its attributes reach (through lists, tuples, dicts)."""
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
            elif isinstance(v, Saveable) and id(v) not in seen:
                stack.append(v)
    return list(seen.values())


@contextlib.contextmanager
def holding(root: Any, write: bool = False) -> Iterator[None]:
    """Hold the read (or write) side of ``root``'s lock and of every part it reaches: the root's
    first, then the parts' by ``id``. A part replaced while waiting (a fit that built new
    features) is noticed and the locks taken again."""
    while True:
        with contextlib.ExitStack() as stack:
            stack.enter_context(lock_of(root).write() if write else lock_of(root).read())
            parts = sorted((o for o in reachable(root) if o is not root), key=id)
            for part in parts:
                stack.enter_context(lock_of(part).write() if write else lock_of(part).read())
            if [id(o) for o in parts] == sorted(id(o) for o in reachable(root) if o is not root):
                yield
                return


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
