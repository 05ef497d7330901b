r"""All-or-nothing fits: a fit either completes or leaves the model exactly as it was.

:func:`transactional` wraps a model's fitting methods. Before the method runs it records the
attributes of the model and of every part it reaches (kernel, likelihood, features, groups,
statistics, shared ones included: :class:`~spherelab._state.Saveable` objects) — its declared
fields (:class:`~spherelab._state.Fields`) and any attribute a user set of their own (kept, and
restored like the rest) — copying every array, list and dict one level down so that in-place
changes are undone too. If the method raises
anything — ``KeyboardInterrupt``, a failed Dask block, ``NumericalFailure``, ``MemoryError`` —
every recorded object gets its attributes back (the same objects: a kernel the user holds is
restored, not replaced), so the model predicts bit for bit as before the fit or stays unfitted;
``fit_report_["interrupted"]`` then says what stopped it, and the exception is raised again.
The fit holds the write side of the model's locks throughout (:mod:`spherelab.concurrency`); a
Ctrl-C during the restore itself is held back until every object is whole again, then raised.

A process forked while another thread fits (a fork-started ``multiprocessing`` pool, say) gets the
model in that thread's abandoned state; the child rolls back every fit in flight in other threads
to its record, so it sees the model as before that fit.

Training data and what a fit holds of them (a model's ``data`` and ``held`` fields,
:class:`~spherelab._state.Fields`) are only ever replaced, never written in place, so they are
kept by reference rather than copied: the record costs the size of the parameters and statistics,
not of the data.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable

import numpy as np

from .concurrency import holding, reachable
from .critical import critical, enter_region, leave_region

__all__ = ["transactional", "Snapshot"]


def _by_reference(obj: Any) -> frozenset:
    fields = getattr(obj, "fields", None)
    if fields is None:
        return frozenset()
    return frozenset(fields.attribute(e) for e in fields.entries("data", "held"))


def _copy(value: Any, depth: int = 0) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if depth < 4 and isinstance(value, list):
        return [_copy(v, depth + 1) for v in value]
    if depth < 4 and isinstance(value, tuple):
        return tuple(_copy(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return {k: _copy(v, depth + 1) for k, v in value.items()}
    return value


class Snapshot:
    """The attributes of ``root`` and of every part it reaches, restorable in place: the fields
    its table declares (:class:`~spherelab._state.Fields`) and a user's own attributes alike."""

    def __init__(self, root: Any) -> None:
        self.states = [(obj, {k: v if k in keep else _copy(v) for k, v in vars(obj).items()})
                       for obj in reachable(root) for keep in (_by_reference(obj),)]

    @critical
    def restore(self) -> None:
        enter_region()  # a Ctrl-C during the restore is raised once every object is whole
        try:
            for obj, state in self.states:
                current = vars(obj)
                current.clear()
                current.update(state)
        finally:
            leave_region()


#: thread ident -> the records of the transactions running on it, outermost first
_IN_FLIGHT: dict[int, list[Snapshot]] = {}


@critical
def _begin(snapshot: Snapshot) -> None:
    enter_region()
    try:
        _IN_FLIGHT.setdefault(threading.get_ident(), []).append(snapshot)
    finally:
        leave_region()


@critical
def _end(snapshot: Snapshot) -> None:
    enter_region()
    try:
        mine = _IN_FLIGHT.get(threading.get_ident(), [])
        if snapshot in mine:
            mine.remove(snapshot)
    finally:
        leave_region()


def transactional(method: Callable) -> Callable:
    """Run ``method(model, ...)`` as a transaction (module docstring)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with holding(self, write=True):  # no prediction sees the fit's trial points (spherelab.concurrency)
            snapshot = Snapshot(self)
            try:
                _begin(snapshot)
                return method(self, *args, **kwargs)
            except BaseException as exc:
                snapshot.restore()
                report = dict(getattr(self, "fit_report_", None) or {})
                report["interrupted"] = f"{method.__name__} stopped by {type(exc).__name__}: {exc}"[:500]
                self.fit_report_ = report
                raise
            finally:
                _end(snapshot)

    return run


def _roll_back_in_child() -> None:
    """After ``fork``: the fits of other threads do not exist in the child; their models go back
    to their records (innermost first, so the outermost record is what remains)."""
    me = threading.get_ident()
    for ident, records in list(_IN_FLIGHT.items()):
        if ident != me:
            for snapshot in reversed(records):
                snapshot.restore()
            del _IN_FLIGHT[ident]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_roll_back_in_child)
