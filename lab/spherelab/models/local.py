r"""A global model corrected by a nearest-neighbour GP on its residual (Vecchia 1988; the
nearest-neighbour GP predictors of Datta et al. 2016 and Allison et al. 2023, "GPnn").

A global sparse model (VISH, inducing points) captures the smooth part of a function with a few
hundred features; what it leaves, structure on the scale of the spacing of the rows, is what
neighbouring rows know. The model is :math:`y = g(x) + h(x) + \varepsilon` with :math:`g` the
global model's posterior and :math:`h \sim GP(0, k_h)`, :math:`k_h(x, x') = a\,
\mathrm{Mat}_{3/2}(\|(x - x') / s\| / \ell)` in the metric ``s`` of the global kernel's input
scales, and :math:`h` is conditioned on the residuals :math:`\rho = y - E[g]` of the ``m``
training rows nearest each test input only (a k-d tree, :class:`scipy.spatial.cKDTree`):

.. math:: \mu(x_*) = E[g(x_*)] + k_*^\top (K + \sigma^2 I)^{-1}\rho_N, \qquad
          \nu(x_*) = V[g(x_*)] + a - k_*^\top (K + \sigma^2 I)^{-1}k_*,

``predict_y`` adding :math:`\sigma^2`. With every training row as a neighbour this is the exact GP
posterior of the residual. :math:`(a, \ell, \sigma^2)` maximise the rows' nearest-neighbour
predictive log density (each of at most ``subsample`` training rows predicted from its ``m``
nearest other rows: a leave-one-out form of Vecchia's likelihood; copies of a row, the same inputs
with the same target, would predict it without error and drive the noise to zero, so up to 16 of
them are passed over, while the same inputs with another target stay: they measure the noise),
three parameters fitted by Nelder–Mead on their logarithms (no gradient is needed, or written);
then the noise alone again, on a grid, by the same criterion on up to 10 000 rows. With
``max_time`` the search stops at :data:`SEARCH_SHARE` of it, keeping its best point so far, and
the noise's rows are as many as the rest of the time allows (at least the search's).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.spatial import cKDTree

from .._state import Fields, Saveable
from .._validation import check_data, check_finite_array, check_int, check_positive
from ..distributed import is_dask
from ..linalg import NumericalFailure
from ..threads import policy
from .base import entry
from .local_jit import neighbour_conditionals

__all__ = ["NeighbourResidual"]

#: copies of a row (same inputs and target) passed over when the fit predicts it from its neighbours
DUPLICATES = 16
#: rows whose neighbour predictions choose the noise (on a grid, the other parameters held)
NOISE_ROWS = 10_000
#: the part of ``max_time`` the Nelder–Mead search may take (the rest: the noise's grid)
SEARCH_SHARE = 0.7
#: the noise's floor relative to the residual kernel's variance: far above Cholesky's rounding
#: (about m^2 eps of the variance for m neighbours), so that no neighbourhood fails to factor
NOISE_FLOOR = 1e-8
#: entries of the (rows, m + 1, m + 1) distances held at once
_BATCH_ENTRIES = 1 << 22


class _OutOfTime(Exception):
    """The neighbour search's share of ``max_time`` is spent."""


def _conditionals(dist: np.ndarray, rho: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""For each row b, the first point of its block conditioned on the others: ``dist``
    ``(B, m + 1, m + 1)`` distances (point 0 the query), ``rho`` ``(B, m)`` the others' residuals.
    Returns the conditional mean of h, its variance (no noise) and the noisy predictive variance
    (:func:`~spherelab.models.local_jit.neighbour_conditionals`)."""
    B, m = dist.shape[0], dist.shape[1] - 1
    mean, var_f, var_y = np.empty(B), np.empty(B), np.empty(B)
    with policy(B * (m ** 3 / 3.0 + 4.0 * m * m), B):
        neighbour_conditionals(dist, np.ascontiguousarray(rho), float(theta[0]), float(theta[1]), float(theta[2]),
                               mean, var_f, var_y)
    if not np.all(var_y > 0):
        bad = int(np.sum(~(var_y > 0)))
        raise NumericalFailure(f"the covariance K + noise I of {bad} of {B} neighbourhoods is not positive definite "
                               f"(noise {theta[2]:.3g} against the variance {theta[0]:.3g}): raise the noise, "
                               f"theta[2], to at least {NOISE_FLOOR:g} of theta[0]")
    return mean, var_f, var_y


class NeighbourResidual(Saveable):
    r"""A fitted-or-not global model plus a nearest-neighbour GP on its residual (module docstring).

    Parameters
    ----------
    model
        The global model (VISH, OrthogonalSVGP, ...): :meth:`fit` fits it on the same rows first.
    num_neighbours
        m, the training rows each prediction conditions on (cost :math:`O(m^3)` per row).
    subsample
        Training rows whose neighbour predictions fit :math:`(a, \ell, \sigma^2)`.
    seed
        The subsample's seed.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> X, y = sl.datasets.synthetic_regression(500, 2, seed=0)
    >>> with sl.models.capped():
    ...     model = sl.models.NeighbourResidual(sl.VISH(sl.kernels.Matern(1.5), 3)).fit(X, y)
    >>> mean, var = model.predict_y(X[:3])
    """

    fields = Fields(config=("model", "num_neighbours", "subsample", "seed"),
                    fitted=("X=_X", "y=_y", "theta", "metric", "fit_report_"),
                    cache={"index=_index": ("model", "X", "y", "metric")})

    def __init__(self, model: Any, num_neighbours: int = 32, subsample: int = 1000, seed: int = 0) -> None:
        if not (hasattr(model, "predict_f") and hasattr(model, "fit") and isinstance(model, Saveable)):
            raise TypeError(f"model must be a spherelab model (VISH, OrthogonalSVGP, ...), got {model!r}")
        self.model = model
        self.num_neighbours = check_int(num_neighbours, "num_neighbours", minimum=1, maximum=1024)
        self.subsample = check_int(subsample, "subsample", minimum=10)
        self.seed = check_int(seed, "seed", minimum=0)
        self._X = self._y = self.theta = self.metric = None
        self._index = None
        self.fit_report_: dict | None = None

    @classmethod
    def _load_state(cls, state):
        out = cls(state.value("model"), state.int("num_neighbours", minimum=1, maximum=1024),
                  state.int("subsample", minimum=10), state.int("seed", minimum=0))
        X = state.array("X", shape=(None, None), optional=True)
        if X is None:
            for name in ("y", "theta", "metric"):
                if not state.is_null(name):
                    raise state.fail(name, "null for a model not fitted")
        else:
            out._X, out._y = check_data(X, state.array("y", shape=(X.shape[0],)))
            theta = state.array("theta", shape=(3,))
            if not np.all(theta > 0):
                raise state.fail("theta", "three positive numbers (variance, lengthscale, noise)")
            metric = state.array("metric", shape=(X.shape[1],))
            if not np.all(metric > 0):
                raise state.fail("metric", "positive scales, one per input")
            out.theta, out.metric = theta, metric
        out.fit_report_ = None if state.is_null("fit_report_") else state.report("fit_report_")
        return out

    def save(self, path, *, include_data: bool = True) -> None:
        """Save to ``path`` (:mod:`spherelab.persistence`); the training rows are always written:
        the local part conditions on them."""
        from ..persistence import save

        save(self, path, include_data=True)

    # ---- the metric, the index and the residuals -------------------------------------------
    def _metric_of(self, D: int) -> np.ndarray:
        scale = getattr(getattr(self.model, "kernel", None), "input_scale", 1.0)
        return np.broadcast_to(np.asarray(scale, dtype=np.float64), (D,)).copy()

    def _prepared(self) -> tuple[cKDTree, np.ndarray]:
        """The k-d tree of the scaled training rows and their residuals under the global model's
        mean, computed again whenever the model, the rows or the metric change."""
        def compute():
            mean, _ = self.model.predict_f(self._X)
            return cKDTree(self._X / self.metric), self._y - mean

        return self.fields.cached(self, "index", compute)

    def _blocks(self, Z: np.ndarray, tree: cKDTree, exclude_self: bool, y_query: np.ndarray | None = None):
        m = min(self.num_neighbours, tree.n - (1 if exclude_self else 0))
        extra = min(DUPLICATES, tree.n - m) if exclude_self else 0
        rows = max(1, _BATCH_ENTRIES // (m + 1 + extra) ** 2)
        for a in range(0, Z.shape[0], rows):
            Zq = Z[a:a + rows]
            d, nb = tree.query(Zq, k=m + extra)
            d, nb = d.reshape(Zq.shape[0], -1), nb.reshape(Zq.shape[0], -1)
            if exclude_self:  # the row itself and its copies (same inputs, same target) last, else by distance
                copies = (d == 0.0) & (self._y[nb] == y_query[a:a + rows, None])
                order = np.argsort(copies, axis=1, kind="stable")[:, :m]
                nb = np.take_along_axis(nb, order, axis=1)
            pts = np.concatenate([Zq[:, None, :], tree.data[nb]], axis=1)
            yield a, nb, np.sqrt(np.sum((pts[:, :, None, :] - pts[:, None, :, :]) ** 2, axis=-1))

    # ---- fitting ----------------------------------------------------------------------------
    @entry("fit")
    def fit(self, X: Any, y: Any, *, fit_model: bool = True, max_time: float | None = None) -> "NeighbourResidual":
        """Fit the global model on (X, y) (``fit_model=False``: keep it as fitted, on these rows or
        others), then :math:`(a, \\ell, \\sigma^2)` (module docstring), in about ``max_time``
        seconds when given (the global model's fit not counted)."""
        if is_dask(X) or is_dask(y):
            raise TypeError("NeighbourResidual indexes the training rows in a k-d tree: it needs X and y in memory "
                            "(NumPy arrays)")
        X, y = check_data(X, y)
        if X.shape[0] < 3:
            raise ValueError(f"NeighbourResidual needs at least 3 rows, got {X.shape[0]}")
        limit = None if max_time is None else check_positive(max_time, "max_time")
        if fit_model:
            self.model.fit(X, y)
        clock = time.perf_counter()
        self._X, self._y, self.metric = X, y, self._metric_of(X.shape[1])
        tree, rho = self._prepared()
        rng = np.random.default_rng(self.seed)
        pick = np.sort(rng.choice(X.shape[0], min(self.subsample, X.shape[0]), replace=False))
        blocks = [(nb, dist) for _, nb, dist in self._blocks(tree.data[pick], tree, exclude_self=True,
                                                                  y_query=y[pick])]
        target = rho[pick]

        def loo(theta, blocks, target) -> float:
            total, start = 0.0, 0
            try:
                for nb, dist in blocks:
                    mean, _, var = _conditionals(dist, rho[nb], theta)
                    r = target[start:start + mean.size] - mean
                    total += float(np.sum(0.5 * np.log(2 * np.pi * var) + 0.5 * r * r / var))
                    start += mean.size
            except NumericalFailure:
                return np.inf
            return total / target.size

        v = max(float(np.var(rho)), 1e-12)
        best = [np.inf, None, 0, np.inf]  # value, point, evaluations, the first value

        def objective(log_theta):
            if limit is not None and best[1] is not None and time.perf_counter() - clock > SEARCH_SHARE * limit:
                raise _OutOfTime
            theta = np.exp(log_theta)
            value = np.inf
            if np.all(np.isfinite(theta)) and theta[2] >= NOISE_FLOOR * max(v, theta[0]):
                value = loo(theta, blocks, target)
            best[2] += 1
            best[3] = value if best[2] == 1 else best[3]
            if value < best[0] or best[1] is None:
                best[:2] = value, np.array(log_theta, dtype=np.float64)
            return value

        spread = float(np.median(blocks[0][1][:, 0, 1:])) if blocks else 1.0
        start = np.log([0.5 * v, max(spread, 1e-6), 0.5 * v])
        searched = time.perf_counter()
        try:
            minimize(objective, start, method="Nelder-Mead", options={"maxfev": 150, "xatol": 1e-3, "fatol": 1e-5})
        except _OutOfTime:  # the best point so far: Nelder-Mead's simplex only ever improves on it
            pass
        if not np.isfinite(best[0]):
            raise NumericalFailure("no neighbour GP fitted the residuals: standardise X and y")
        theta, per_row = np.exp(best[1]), (time.perf_counter() - searched) / max(best[2] * target.size, 1)
        # the noise again, on many more rows: a few rows whose neighbours have the same inputs and
        # another target decide it, and a subsample rarely holds them (a noise near 0 then looks best)
        grid = v * np.logspace(-6.0, 0.0, 13)
        rows = min(NOISE_ROWS, X.shape[0])
        if limit is not None:
            left = limit - (time.perf_counter() - clock)
            rows = int(min(rows, max(left / (2.0 * (grid.size + 1) * per_row), target.size)))
        if rows > target.size:
            more = np.sort(rng.choice(X.shape[0], rows, replace=False))
            wide = [(nb, dist) for _, nb, dist in self._blocks(tree.data[more], tree, exclude_self=True,
                                                                  y_query=y[more])]
            wide_target = rho[more]
        else:
            wide, wide_target = blocks, target
        noises = np.maximum((*grid, theta[2]), NOISE_FLOOR * theta[0])
        scores = [loo(np.array([theta[0], theta[1], s]), wide, wide_target) for s in noises]
        theta[2] = noises[int(np.argmin(scores))]
        self.theta = theta
        self.fit_report_ = {"local": {"evaluations": int(best[2]), "nlpd": float(best[0]),
                                      "start nlpd": float(best[3]),
                                      "rows": int(target.size), "noise rows": int(wide_target.size),
                                      "noise nlpd": float(min(scores)), "seconds": time.perf_counter() - clock}}
        return self

    # ---- predictions ------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if self.theta is None:
            raise RuntimeError("NeighbourResidual is not fitted: call fit(X, y) first")

    @entry("read")
    def predict_f(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of :math:`g + h` at ``X`` ``(N, D)``, ``(N,)`` each."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] != self._X.shape[1]:
            raise ValueError(f"X must have {self._X.shape[1]} columns (as the training inputs), got {X.shape[1]}")
        mean, var = self.model.predict_f(X)
        tree, rho = self._prepared()
        mean, var = np.array(mean, dtype=np.float64), np.array(var, dtype=np.float64)
        for a, nb, dist in self._blocks(X / self.metric, tree, exclude_self=False):
            m_h, v_h, _ = _conditionals(dist, rho[nb], self.theta)
            mean[a:a + m_h.size] += m_h
            var[a:a + m_h.size] += v_h
        return mean, var

    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (the local noise :math:`\\sigma^2` added)."""
        mean, var = self.predict_f(X)
        return mean, var + self.theta[2]

    def __repr__(self) -> str:
        return f"NeighbourResidual({self.model!r}, num_neighbours={self.num_neighbours})"
