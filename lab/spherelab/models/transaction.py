r"""All-or-nothing fits: a fit either completes or leaves the model exactly as it was.

:func:`transactional` wraps a model's fitting methods. Before the method runs it records the
attributes of the model and of every part it reaches (kernel, likelihood, features, groups,
statistics, shared ones included: :class:`~spherelab._state.Saveable` objects), copying every
array, list and dict one level down so that in-place changes are undone too. If the method raises
anything — ``KeyboardInterrupt``, a failed Dask block, ``NumericalFailure``, ``MemoryError`` —
every recorded object gets its attributes back (the same objects: a kernel the user holds is
restored, not replaced), so the model predicts bit for bit as before the fit or stays unfitted;
``fit_report_["interrupted"]`` then says what stopped it, and the exception is raised again.
The fit holds the write side of the model's locks throughout (:mod:`spherelab.concurrency`).

Training data (``_X``, ``_y``) are only ever replaced, never written in place, so they are kept
by reference rather than copied: the record costs the size of the parameters and statistics, not
of the data.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..concurrency import holding, reachable

__all__ = ["transactional", "Snapshot"]

_BY_REFERENCE = ("_X", "_y")


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
    """The attributes of ``root`` and of every part it reaches, restorable in place."""

    def __init__(self, root: Any) -> None:
        self.states = [(obj, {k: v if k in _BY_REFERENCE else _copy(v) for k, v in vars(obj).items()})
                       for obj in reachable(root)]

    def restore(self) -> None:
        for obj, state in self.states:
            current = vars(obj)
            current.clear()
            current.update(state)


def transactional(method: Callable) -> Callable:
    """Run ``method(model, ...)`` as a transaction (module docstring)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with holding(self, write=True):  # no prediction sees the fit's trial points (spherelab.concurrency)
            snapshot = Snapshot(self)
            try:
                return method(self, *args, **kwargs)
            except BaseException as exc:
                snapshot.restore()
                report = dict(getattr(self, "fit_report_", None) or {})
                report["interrupted"] = f"{method.__name__} stopped by {type(exc).__name__}: {exc}"[:500]
                self.fit_report_ = report
                raise

    return run
