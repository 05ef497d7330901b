r"""A public gradient checker (GPy's ``checkgrad`` habit): every hand-written gradient of the package
is compared with finite differences, entry by entry for short vectors and along random directions
for long ones.

The step is chosen for each direction, relative to the size of the point along it, and refined by
Richardson extrapolation of central differences (Ridders' method: Press et al. 2007, *Numerical
Recipes* §5.7): a fixed absolute step is too small where the objective is noisy at the 1e-9 level
(a fitted model's bound at variance 650 loses digits in its Cholesky factors) and too large where
parameters are small. Only the finite differences choose the step — never the analytic gradient,
which would let a wrong gradient pick the step that hides it.

Examples
--------
>>> import numpy as np, spherelab as sl
>>> f = lambda x: (float(np.sum(np.sin(x))), np.cos(x))
>>> sl.testing.checkgrad(f, np.arange(3.0)).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .._validation import check_finite_array

__all__ = ["GradientCheck", "checkgrad", "check_jacobian", "check_model_gradient", "check_named_gradients"]

_SHRINK = 2.0      # each Richardson row divides the step by this
_ROWS = 8          # at most this many steps per direction (first / 2**7 is the smallest)
_RELATIVE = 1e-2   # the first step, relative to max(1, |x * d|)


@dataclass
class GradientCheck:
    """Result of :func:`checkgrad`: per checked direction (a unit vector, or coordinate i) the
    analytic and the numerical directional derivative; ``ok`` when every pair agrees within
    ``rtol * |numerical| + atol``. ``steps`` holds the finite-difference step used along each
    direction and ``estimated_error`` the extrapolation's own error estimate (``None`` for a
    fixed step)."""

    analytic: np.ndarray
    numerical: np.ndarray
    rtol: float
    atol: float
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    estimated_error: np.ndarray | None = None

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
        step = f", step {self.steps[i]:.3g}" if self.steps.size else ""
        return (f"GradientCheck(ok={self.ok}, {self.analytic.size} directions, worst #{i}: "
                f"analytic {self.analytic[i]:.9g} vs numerical {self.numerical[i]:.9g}{step})")


def _central(func, x, d, h):
    fp = func(x + h * d)[0]
    fm = func(x - h * d)[0]
    value = (fp - fm) / (2.0 * h)
    if not np.isfinite(value):
        raise FloatingPointError
    return float(value)


def _ridders(func, x, d, h0):
    """Ridders' extrapolation of central differences along ``d`` from the step ``h0``, halving it:
    returns (derivative, step of the best estimate, error estimate). Steps whose evaluations fail
    or are not finite (outside the domain) are halved until they work."""
    h = h0
    for _ in range(40):
        try:
            first = _central(func, x, d, h)
            break
        except ArithmeticError:  # FloatingPointError included: outside the domain
            h /= _SHRINK
    else:
        raise ValueError("checkgrad: the function fails at every step tried around x")
    table = [[first]]
    best, best_step, error = first, h, np.inf
    for i in range(1, _ROWS):
        h /= _SHRINK
        try:
            row = [_central(func, x, d, h)]
        except ArithmeticError:
            break
        factor = _SHRINK ** 2
        for j in range(1, i + 1):
            row.append((row[j - 1] * factor - table[i - 1][j - 1]) / (factor - 1.0))
            factor *= _SHRINK ** 2
            change = max(abs(row[j] - row[j - 1]), abs(row[j] - table[i - 1][j - 1]))
            if change <= error:
                best, best_step, error = row[j], h, change
        if abs(row[i] - table[i - 1][i - 1]) >= 2.0 * error:  # round-off has taken over
            break
        table.append(row)
    return best, best_step, error


def checkgrad(
    func: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x: Any,
    *,
    step: float | str = "auto",
    rtol: float = 1e-4,
    atol: float = 1e-6,
    directions: int | None = None,
    rng: Any = 0,
) -> GradientCheck:
    r"""Compare the gradient ``func(x)[1]`` with finite differences of ``func(x)[0]``.

    Parameters
    ----------
    func
        ``x -> (value, gradient)``.
    x
        The point, a flat float vector.
    step
        ``"auto"`` (default): along each unit direction :math:`d`, central differences from the
        step :math:`10^{-2}\max(1, \lVert x \odot d\rVert)` halved up to seven times and
        extrapolated (Ridders), so that the step follows each parameter's scale; a float: one
        fixed absolute step for every direction, plain central differences.
    rtol, atol
        Tolerance of each comparison.
    directions
        ``None``: every coordinate; an int k: k random unit directions (for long parameter
        vectors), drawn from ``rng``.

    Returns
    -------
    GradientCheck
        With the step used along each direction (``steps``).
    """
    x = check_finite_array(x, "x").reshape(-1)
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
    numerical, steps, errors = np.empty(dirs.shape[0]), np.empty(dirs.shape[0]), np.empty(dirs.shape[0])
    if isinstance(step, str):
        if step != "auto":
            raise ValueError(f"step must be 'auto' or a positive float, got {step!r}")
        for i, d in enumerate(dirs):
            h0 = _RELATIVE * max(1.0, float(np.linalg.norm(x * d)))
            numerical[i], steps[i], errors[i] = _ridders(func, x, d, h0)
        estimated = errors
    else:
        h = float(step)
        if not (np.isfinite(h) and h > 0):
            raise ValueError(f"step must be 'auto' or a positive float, got {step!r}")
        for i, d in enumerate(dirs):
            numerical[i] = _central(func, x, d, h)
        steps[:] = h
        estimated = None
    func(x.copy())  # leave stateful objectives (models) at the point checked
    return GradientCheck(dirs @ grad, numerical, float(rtol), float(atol), steps, estimated)


def check_model_gradient(model, X: Any, y: Any, **kwargs) -> GradientCheck:
    """:func:`checkgrad` of ``model.objective`` (the negated ELBO over the model's free parameter
    vector) at its current parameters; keyword arguments go to :func:`checkgrad`. The objective
    answers 1e300 at a trial point it rejects, which the step search treats as outside the
    domain."""
    theta = model.parameter_vector()

    def objective(t):
        value, grad = model.objective(t, X, y)
        if value >= 1e300:
            raise FloatingPointError
        return value, grad

    return checkgrad(objective, theta, **kwargs)


def check_named_gradients(value: Callable[..., float], point: Mapping[str, Any], gradient: Mapping[str, Any], *,
                          symmetric: Sequence[str] = (), positive: Sequence[str] = (), **kwargs) -> GradientCheck:
    r""":func:`checkgrad` of derivatives reported by name — a bound's :math:`\partial L/\partial(\text{matrices})`
    (GPy's contract) — all at once: ``value(**arrays) -> float`` at ``point`` (name -> array or float)
    against ``gradient`` (name -> the claimed derivative, shaped like its argument).

    Names in ``symmetric`` are symmetric matrices, varied as :math:`(A + A^\top)/2` (the claim compared
    as :math:`(G + G^\top)/2`); names in ``positive`` are varied in logarithms (the claim times the
    value), so that no step leaves their domain whatever their scale. Keyword arguments go to
    :func:`checkgrad` (``directions=k`` for long ones).

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> value = lambda A, s: float(s * np.sum(A * A))
    >>> sl.testing.check_named_gradients(value, {"A": A, "s": 3.0}, {"A": 6.0 * A, "s": float(np.sum(A * A))},
    ...                                  symmetric=["A"], positive=["s"]).ok
    True
    """
    names = list(point)
    shapes = {k: np.shape(point[k]) for k in names}
    sizes = [int(np.prod(shapes[k])) for k in names]
    base = {k: np.asarray(point[k], dtype=np.float64) for k in names}
    x0 = np.concatenate([(np.log(base[k]) if k in positive else base[k]).ravel() for k in names])

    def unpack(x):
        out, i = {}, 0
        for k, n in zip(names, sizes):
            a = x[i:i + n].reshape(shapes[k])
            i += n
            a = np.exp(a) if k in positive else a
            a = 0.5 * (a + a.T) if k in symmetric else a
            out[k] = a if a.ndim else float(a)
        return out

    claimed = []
    for k in names:
        g = np.asarray(gradient[k], dtype=np.float64).reshape(shapes[k])
        g = 0.5 * (g + g.T) if k in symmetric else g
        claimed.append((g * base[k] if k in positive else g).ravel())
    grad = np.concatenate(claimed)
    return checkgrad(lambda x: (float(value(**unpack(x))), grad), x0, **kwargs)


def check_jacobian(func: Callable[[Any], Any], x: Any, jacobian: Any, **kwargs) -> GradientCheck:
    r""":func:`checkgrad` of every output of a vector function: ``func(x)`` ``(m,)`` (any shape,
    flattened) against the claimed ``jacobian`` ``(m, n)`` for an ``(n,)`` point, or ``(m,)`` for a
    scalar one (then ``func`` receives a float). Each output gets its own steps; the result lists
    every output's entries, output by output. Keyword arguments go to :func:`checkgrad`.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> t = np.linspace(-1, 1, 5)
    >>> sl.testing.check_jacobian(lambda a: np.exp(a * t), 0.3, t * np.exp(0.3 * t)).ok
    True
    """
    scalar = np.ndim(x) == 0
    x0 = np.atleast_1d(np.asarray(x, dtype=np.float64)).ravel()
    J = np.asarray(jacobian, dtype=np.float64).reshape(-1, x0.size)

    def output(k):
        def value(z):
            return float(np.ravel(func(float(z[0]) if scalar else z))[k]), J[k]

        return value

    checks = [checkgrad(output(k), x0, **kwargs) for k in range(J.shape[0])]
    estimated = [c.estimated_error for c in checks]
    return GradientCheck(np.concatenate([c.analytic for c in checks]), np.concatenate([c.numerical for c in checks]),
                         checks[0].rtol, checks[0].atol, np.concatenate([c.steps for c in checks]),
                         None if any(e is None for e in estimated) else np.concatenate(estimated))
