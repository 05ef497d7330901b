"""What makes a scikit-learn estimator of :mod:`spherelab.estimators` one step to every thread: its
``fit`` on a shadow committed in one store under its lock (:func:`all_or_nothing`), predictions
under the lock's read side (:func:`serving`), and the checks of the arguments every estimator shares
(:func:`seed_of`, :func:`scale_of`)."""

from __future__ import annotations

import functools
from typing import Any

from ._validation import check_int, scale_of
from .concurrency import lock_of

__all__ = ["all_or_nothing", "serving", "seed_of", "scale_of"]


def seed_of(random_state: Any) -> int:
    """``random_state`` as a seed: None is 0, else an integer >= 0 (a ``RandomState`` is not
    taken: the models draw from their own generators, seeded)."""
    return 0 if random_state is None else check_int(random_state, "random_state", minimum=0)


def all_or_nothing(fit):
    """An estimator's ``fit`` as one step, seen whole by every thread: the fit runs on a shadow of
    the estimator, and what it set (``X_mean_``, ``n_features_in_``, ``model_``, ...) replaces
    the estimator's state at once, under the write side of its lock. If it raises anything — an
    invalid argument, a failed fit, ``MemoryError``, Ctrl-C — the estimator is untouched (an
    interrupt that arrives after the one store finds the new state whole); a
    prediction made meanwhile on another thread (under the read side, :func:`serving`) sees the
    estimator before or after the fit, never a mix of the two."""

    @functools.wraps(fit)
    def run(self, X, y):
        lock = lock_of(self)  # the estimator's own: the shadow gets none
        shadow = object.__new__(type(self))
        shadow.__dict__.update({k: v for k, v in vars(self).items() if k != _LOCK})
        fit(shadow, X, y)
        state = {**vars(shadow), _LOCK: lock}
        with lock.write():
            self.__dict__ = state  # one store: the old state or the new, whatever interrupts
        return self

    return run


_LOCK = "_parameter_lock"


def serving(method):
    """A prediction under the read side of the estimator's lock: one fit's state throughout."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with lock_of(self).read():
            return method(self, *args, **kwargs)

    return run
