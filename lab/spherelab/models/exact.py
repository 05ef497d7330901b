r"""The exact GP regression every sparse model of the package approaches (Rasmussen & Williams
2006, Alg. 2.1): dense :math:`K + \sigma^2 I`, for small N only — the reference of the notebooks
and of a sparse model's bound (collapsed bound :math:`\le` log marginal likelihood)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from .._state import Fields, Saveable
from .._validation import check_data, check_finite_array, check_positive
from ..kernels import Additive, ZonalKernel
from ..linalg import cholesky_or_explain
from ..threads import policy
from .base import entry
from .scale import warn_off_scale

__all__ = ["ExactGP"]

#: largest N accepted: the N x N Gram matrix of 20 000 rows is 3.2 GB
MAX_ROWS = 20_000


class ExactGP(Saveable):
    r"""Dense GP regression with a spherelab kernel and Gaussian noise.

    Parameters
    ----------
    kernel
        A :class:`~spherelab.kernels.ZonalKernel` or :class:`~spherelab.kernels.Additive` (shared, not copied).
    noise
        The noise variance :math:`\sigma^2`.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> X = np.linspace(-2, 2, 30)[:, None]; y = np.sin(2 * X[:, 0])
    >>> gp = sl.models.ExactGP(sl.kernels.Matern(1.5, 1.0), 0.01).fit(X, y)
    >>> mean, var = gp.predict_f(X[:3]); lml = gp.log_marginal_likelihood()
    """

    #: the training data are always saved: they are the posterior (the factor is computed again)
    fields = Fields(config=("kernel", "noise=_noise"), fitted=("X=_X", "y=_y"), report=("fit_report=fit_report_",),
                    cache={"factor=_factor": ("kernel", "noise", "X", "y")})

    def __init__(self, kernel: ZonalKernel | Additive, noise: float) -> None:
        if not isinstance(kernel, (ZonalKernel, Additive)):
            raise TypeError(f"kernel must be a spherelab kernel (zonal, or kernels.Additive), got {kernel!r}")
        self.kernel = kernel
        self._noise = check_positive(noise, "noise")
        self._X = self._y = None
        self.fit_report_: dict | None = None

    @property
    def noise(self) -> float:
        """The noise variance; assigning it validates it and, on a fitted model, factorises again
        (the posterior depends on it)."""
        return self._noise

    @noise.setter
    def noise(self, value: Any) -> None:
        noise = check_positive(value, "noise")
        if not self._fitted():
            self._noise = noise
        else:
            self._refit_with(noise)

    @entry("fit")
    def _refit_with(self, noise: float) -> None:
        self._noise = noise
        self.fit(self._X, self._y)

    @classmethod
    def _load_state(cls, state):
        from .saved import load_exact

        return load_exact(cls, state)

    @entry("fit")
    def fit(self, X: Any, y: Any) -> "ExactGP":
        r"""Factorise :math:`K + \sigma^2 I` (:math:`O(N^3)`)."""
        X, y = check_data(X, y)
        warn_off_scale("ExactGP.fit", X, y)
        if X.shape[0] > MAX_ROWS:
            raise ValueError(f"ExactGP is a dense reference for at most {MAX_ROWS:,} rows (the Gram matrix of "
                             f"{X.shape[0]:,} rows would take {8 * X.shape[0] ** 2 / 2**30:.1f} GiB); use VISH or "
                             "OrthogonalSVGP")
        self._X, self._y = X, y
        self._posterior()  # a failed factorisation fails the fit (and leaves the model as it was)
        self.fit_report_ = {"rows": int(X.shape[0]), "log marginal likelihood": self._lml()}
        return self

    def save(self, path, *, include_data: bool = True) -> None:
        """Save to ``path`` (:mod:`spherelab.persistence`): the kernel, the noise and, the
        posterior being the training rows, always the rows (the factor is computed again on load)."""
        from ..persistence import save

        save(self, path, include_data=True)

    def _fitted(self) -> bool:
        return self._X is not None

    def _check_fitted(self) -> None:
        if not self._fitted():
            raise RuntimeError("ExactGP is not fitted: call fit(X, y) first")

    def _posterior(self) -> tuple[np.ndarray, np.ndarray]:
        r"""The Cholesky factor :math:`L` of :math:`K + \sigma^2 I` and :math:`\alpha = (K + \sigma^2I)^{-1}y`,
        factorised again whenever the kernel, the noise or the data have changed."""
        def compute():
            X = self._X
            with policy(float(X.shape[0]) ** 3 / 3, X.shape[0]):
                Kxx = self.kernel.K(X, ops="cpu")
                Kxx[np.diag_indices_from(Kxx)] += self.noise
                L = cholesky_or_explain(Kxx, "K + noise I", "increase the noise variance or standardise X")
                return L, cho_solve((L, True), self._y)

        return self.fields.cached(self, "factor", compute)

    @entry("read")
    def log_marginal_likelihood(self) -> float:
        r"""The log marginal likelihood :math:`-\tfrac12 y^\top(K + \sigma^2I)^{-1}y
        - \tfrac12\log|K + \sigma^2I| - \tfrac N2\log 2\pi`."""
        self._check_fitted()
        return self._lml()

    def _lml(self) -> float:
        n = self._y.size
        L, alpha = self._posterior()
        return float(-0.5 * self._y @ alpha - np.log(np.diag(L)).sum() - 0.5 * n * np.log(2 * np.pi))

    @entry("read")  # (the dense reference: memory only)
    def predict_f(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of f at ``X``, ``(N*,)`` each."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] != self._X.shape[1]:
            raise ValueError(f"X must have {self._X.shape[1]} columns (as the training inputs), got shape {X.shape}")
        L, alpha = self._posterior()
        Ksx = self.kernel.K(X, self._X, ops="cpu")
        V = solve_triangular(L, Ksx.T, lower=True)
        return Ksx @ alpha, np.maximum(self.kernel.diag(X) - np.einsum("ij,ij->j", V, V), 0.0)

    @entry("read")  # (the dense reference: memory only)
    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (noise added)."""
        mean, var = self.predict_f(X)
        return mean, var + self.noise
