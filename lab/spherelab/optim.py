"""Optimisers without an autodiff framework: the gradients come from the bounds.

:func:`minimize_lbfgsb` is the one full-batch optimiser of the package (SciPy's L-BFGS-B); the
objectives it is given (:meth:`spherelab.models.base.Model.objective`) return (1e300, 0) for a
trial point that raised :class:`~spherelab.linalg.NumericalFailure`, so the line search steps back.
:class:`Adam` serves the minibatch fits; :func:`natural_step` the natural-gradient update of a
Gaussian q in its natural parameters (Hensman, Fusi & Lawrence 2013).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
from scipy.optimize import OptimizeResult, minimize

from ._listing import own_names

__all__ = ["Adam", "Deadline", "minimize_lbfgsb", "natural_step"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


class Deadline:
    """A time limit shared by a fit's stages: ``max_time`` seconds from its creation (None: none)."""

    def __init__(self, max_time: float | None) -> None:
        self.max_time = max_time
        self.end = None if max_time is None else time.perf_counter() + float(max_time)

    def left(self) -> float | None:
        """Seconds left (at least a millisecond, so a stage still takes its first step), or None."""
        return None if self.end is None else max(self.end - time.perf_counter(), 1e-3)

    def share(self, fraction: float) -> float | None:
        """``fraction`` of the whole limit, capped by what is left (None without a limit)."""
        return None if self.end is None else min(fraction * float(self.max_time), self.left())


def minimize_lbfgsb(fun: Callable, x0: np.ndarray, maxiter: int, args: tuple = (),
                    ftol: float | None = None, max_time: float | None = None,
                    callback: Callable[[np.ndarray], Any] | None = None,
                    progress: Callable[[float], Any] | None = None) -> OptimizeResult:
    """Minimise ``fun(x, *args) -> (value, gradient)`` by L-BFGS-B from ``x0`` for at most
    ``maxiter`` iterations (SciPy's result: ``x``, ``fun``, ``nit``, ``message``, ...); ``ftol``:
    stop when an iteration improves the objective by less than this fraction of its size
    (SciPy's default 2.2e-9 when None); ``max_time``: stop at the first iterate reached after this
    many seconds; ``callback(x)``: called with a copy of each iterate, a true return stops there.
    Either stop gives ``status`` 99 and a message that says which. ``progress(value)``: told each
    iterate's objective (a :class:`~spherelab.progress.FitProgress` shows it)."""
    options = {"maxiter": int(maxiter)}
    if ftol is not None:
        options["ftol"] = float(ftol)
    deadline = None if max_time is None else time.perf_counter() + float(max_time)
    stopped: list[str] = []

    def each(intermediate_result):
        if progress is not None:
            progress(float(intermediate_result.fun))
        if callback is not None and callback(np.array(intermediate_result.x)):
            stopped.append("stopped by the callback")
        elif deadline is not None and time.perf_counter() > deadline:
            stopped.append(f"stopped at the time limit: max_time = {max_time:g} s")
        if stopped:
            raise StopIteration  # SciPy ends the run at this iterate and returns it

    hooked = callback is not None or deadline is not None or progress is not None
    res = minimize(fun, np.asarray(x0, dtype=np.float64), args=args, jac=True, method="L-BFGS-B",
                   options=options, callback=each if hooked else None)
    if stopped:
        res.message = f"{stopped[0]} after {res.nit} iterations"
    return res


def natural_step(theta1: np.ndarray, precision: np.ndarray, target1: np.ndarray, target_precision: np.ndarray,
                 gamma: float) -> tuple[np.ndarray, np.ndarray]:
    r"""One natural-gradient step of size ``gamma`` for a Gaussian :math:`q = N(m, S)` in its
    natural parameters :math:`(\theta_1, \Theta) = (S^{-1}m, S^{-1})`: both move a fraction
    ``gamma`` towards the (minibatch estimate of the) optimum ``(target1, target_precision)``."""
    return ((1 - gamma) * theta1 + gamma * target1, (1 - gamma) * precision + gamma * target_precision)


class Adam:
    """Adam (Kingma & Ba 2015) on a flat parameter vector; :meth:`step` *ascends* the
    objective (an ELBO) and returns the new parameters. ``xp`` (default NumPy) is the arrays'
    module: with a device's, the vector and the moments stay on the device and a step is
    elementwise arithmetic launched there (nothing read back)."""

    def __init__(
        self, x0: np.ndarray, lr: float = 0.01, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
        xp: Any = np,
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.xp = xp
        self.x = xp.array(x0, dtype=xp.float64)
        self.lr, self.beta1, self.beta2, self.eps = float(lr), beta1, beta2, eps
        self.m = xp.zeros_like(self.x)
        self.v = xp.zeros_like(self.x)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        """One ascent step along ``grad``; returns the updated parameters."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        mhat = self.m / (1 - self.beta1**self.t)
        vhat = self.v / (1 - self.beta2**self.t)
        self.x = self.x + self.lr * mhat / (self.xp.sqrt(vhat) + self.eps)
        return self.x
