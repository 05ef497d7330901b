r"""A public gradient checker (GPy's ``checkgrad`` habit): every hand-written gradient of the package
is compared with central finite differences, entry by entry for short vectors and along random
directions for long ones.

Examples
--------
>>> import numpy as np, spherelab as sl
>>> f = lambda x: (float(np.sum(np.sin(x))), np.cos(x))
>>> sl.testing.checkgrad(f, np.arange(3.0)).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["GradientCheck", "checkgrad", "check_model_gradient"]


@dataclass
class GradientCheck:
    """Result of :func:`checkgrad`: per checked direction (a unit vector, or coordinate i) the
    analytic and the numerical directional derivative; ``ok`` when every pair agrees within
    ``rtol * |numerical| + atol``."""

    analytic: np.ndarray
    numerical: np.ndarray
    rtol: float
    atol: float

    @property
    def errors(self) -> np.ndarray:
        return np.abs(self.analytic - self.numerical)

    @property
    def ok(self) -> bool:
        return bool(np.all(self.errors <= self.rtol * np.abs(self.numerical) + self.atol))

    @property
    def worst(self) -> int:
        """Index of the direction with the largest relative error."""
        return int(np.argmax(self.errors / (self.rtol * np.abs(self.numerical) + self.atol)))

    def __str__(self) -> str:
        i = self.worst
        return (f"GradientCheck(ok={self.ok}, {self.analytic.size} directions, worst #{i}: "
                f"analytic {self.analytic[i]:.9g} vs numerical {self.numerical[i]:.9g})")


def checkgrad(
    func: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x: Any,
    *,
    step: float = 1e-6,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    directions: int | None = None,
    rng: Any = 0,
) -> GradientCheck:
    """Compare the gradient ``func(x)[1]`` with central differences of ``func(x)[0]``.

    Parameters
    ----------
    func
        ``x -> (value, gradient)``.
    x
        The point, a flat float vector.
    step
        Finite-difference step (absolute).
    rtol, atol
        Tolerance of each comparison.
    directions
        ``None``: every coordinate (``x.size`` pairs of evaluations); an int k: k random unit
        directions (for long parameter vectors), drawn from ``rng``.
    """
    x = np.array(x, dtype=np.float64).reshape(-1)
    value, grad = func(x.copy())
    grad = np.asarray(grad, dtype=np.float64).reshape(-1)
    if grad.shape != x.shape:
        raise ValueError(f"the gradient has shape {grad.shape}, the point {x.shape}")
    if directions is None:
        dirs = np.eye(x.size)
    else:
        gen = np.random.default_rng(rng)
        dirs = gen.standard_normal((int(directions), x.size))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    numerical = np.empty(dirs.shape[0])
    for i, d in enumerate(dirs):
        fp = func(x + step * d)[0]
        fm = func(x - step * d)[0]
        numerical[i] = (fp - fm) / (2.0 * step)
    func(x.copy())  # leave stateful objectives (models) at the point checked
    return GradientCheck(dirs @ grad, numerical, float(rtol), float(atol))


def check_model_gradient(model, X: Any, y: Any, **kwargs) -> GradientCheck:
    """:func:`checkgrad` of ``model.objective`` (the negated ELBO over the model's free parameter
    vector) at its current parameters; keyword arguments go to :func:`checkgrad`."""
    theta = model.parameter_vector()
    return checkgrad(lambda t: model.objective(t, X, y), theta, **kwargs)
