r"""Models. :class:`VISH`: variational inference with spherical-harmonic features (seed 001).

The inputs are lifted to the sphere by the kernel (``x~ = [x / input_scale, bias]``), the GP is
:math:`f(x) = r\,g(\hat x)` with :math:`g \sim GP(0, \kappa)` on :math:`S^{d-1}`, and the inducing
variables are the projections of f on the harmonics of degree at most L, so
:math:`K_{uu} = \mathrm{diag}(1/\lambda)` needs no inversion. For Gaussian noise the optimal
:math:`q(u)` and the collapsed bound depend on the data only through
:class:`~spherelab.inducing.HarmonicStatistics`, computed in one streaming pass; every optimiser
step after that costs :math:`O(M^3)` whatever N.

Current scope: Gaussian likelihood, collapsed bound, hyper-parameters of the kernel's spectrum
(variance, lengthscale / beta) and the noise variance trained by L-BFGS-B. ``bias`` and
``input_scale`` are kept fixed (they change the features and need the harmonics' input
derivatives, which are not implemented yet).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from ._validation import check_finite_array, check_int
from .bounds import collapsed_bound
from .inducing import HarmonicStatistics, SphericalHarmonicFeatures, harmonic_statistics
from .kernels import ZonalKernel
from .likelihoods import Gaussian

__all__ = ["VISH"]


def _softplus(u: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, u)


def _softplus_inverse(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 30, x, np.log(np.expm1(np.minimum(x, 30))))


class VISH:
    r"""Sparse variational GP regression with spherical-harmonic features.

    Parameters
    ----------
    kernel
        A zonal kernel from :mod:`spherelab.kernels` (its ``bias`` and ``input_scale`` define
        the lift to the sphere).
    max_degree
        Use every harmonic of degree 0..L: :math:`M = \sum_{\ell \le L} N(\ell, D + 1)`
        features. Levels where the kernel's spectrum vanishes (odd levels >= 3 of the
        arc-cosine kernel) are dropped.
    likelihood
        :class:`spherelab.likelihoods.Gaussian`.
    chunk_size
        Rows per chunk of the streaming pass.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = np.sin(X[:, 0])
    >>> m = sl.VISH(sl.kernels.Matern(1.5, 1.0), max_degree=6).fit(X, y)
    >>> mean, var = m.predict_y(X[:3])

    References
    ----------
    Dutordoir, Durrande & Hensman (2020), seed 001; Titsias (2009).
    """

    def __init__(
        self,
        kernel: ZonalKernel,
        max_degree: int,
        likelihood: Gaussian | None = None,
        *,
        chunk_size: int = 16384,
    ) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        self.kernel = kernel
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        self.likelihood = likelihood if likelihood is not None else Gaussian(1.0)
        if not isinstance(self.likelihood, Gaussian):
            raise NotImplementedError("VISH supports the Gaussian likelihood only (for now)")
        self.chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        self.features: SphericalHarmonicFeatures | None = None
        self.stats: HarmonicStatistics | None = None
        self._posterior = None
        self.optimizer_result = None

    # ---- parameters -----------------------------------------------------------------------
    def _param_names(self) -> list[str]:
        return ["variance", *self.kernel.shape_params, "noise"]

    def _get(self) -> np.ndarray:
        vals = [getattr(self.kernel, p) for p in ["variance", *self.kernel.shape_params]]
        return np.array(vals + [self.likelihood.variance], dtype=np.float64)

    def _set(self, values: np.ndarray) -> None:
        for name, v in zip(["variance", *self.kernel.shape_params], values[:-1]):
            setattr(self.kernel, name, float(v))
        self.likelihood.variance = float(values[-1])
        self._posterior = None

    # ---- bound ----------------------------------------------------------------------------
    def _active(self) -> np.ndarray:
        lam_levels = self.kernel.spectrum(self.features.dim, self.max_degree)
        return lam_levels[self.features.degrees] > 0

    def _bound_and_grad(self, gradients: bool = True):
        feats, stats = self.features, self.stats
        dim, L = feats.dim, self.max_degree
        lam_levels = self.kernel.spectrum(dim, L)
        act = self._active_mask
        deg = feats.degrees[act]
        sub = HarmonicStatistics(stats.G[np.ix_(act, act)], stats.c[act], stats.yy, stats.sum_r2, stats.n)
        v = float(self.kernel.shape(np.ones(1))[0])
        noise = self.likelihood.variance
        res = collapsed_bound(lam_levels[deg], v, noise, sub, gradients=gradients)
        if not gradients:
            return res, None
        sgrads = self.kernel.spectrum_gradients(dim, L)
        vgrads = self.kernel.shape_gradients(np.ones(1))
        grads = []
        for name in ["variance", *self.kernel.shape_params]:
            g = float(res.dlam @ sgrads[name][deg]) + res.dv * float(vgrads[name][0])
            grads.append(g)
        grads.append(res.dnoise)
        return res.value, np.array(grads)

    def elbo(self) -> float:
        """The collapsed bound at the current hyper-parameters (after :meth:`fit`)."""
        self._check_fitted()
        return float(self._bound_and_grad(gradients=False)[0])

    def elbo_gradient(self) -> dict[str, float]:
        """Derivatives of :meth:`elbo` with respect to every trained hyper-parameter."""
        self._check_fitted()
        _, g = self._bound_and_grad()
        return dict(zip(self._param_names(), g))

    # ---- fitting --------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, optimize: bool = True, *, maxiter: int = 500) -> "VISH":
        """Compute the sufficient statistics (one pass over the data), then optimise the
        hyper-parameters with L-BFGS-B (``optimize=True``) and set the optimal q(u).

        Returns
        -------
        self
        """
        X = check_finite_array(X, "X", ndim=2)
        y = check_finite_array(y, "y")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-d (or a single column), got shape {y.shape}")
        self.features = SphericalHarmonicFeatures(X.shape[1] + 1, self.max_degree)
        self.stats = harmonic_statistics(self.kernel, self.features, X, y, chunk_size=self.chunk_size)
        self._active_mask = self._active()
        if optimize:
            u0 = _softplus_inverse(self._get())

            def objective(u):
                self._set(_softplus(u))
                value, grad = self._bound_and_grad()
                return -value, -grad * expit(u)

            self.optimizer_result = minimize(
                objective, u0, jac=True, method="L-BFGS-B", options={"maxiter": int(maxiter)}
            )
            self._set(_softplus(self.optimizer_result.x))
        self._posterior = None
        return self

    def _check_fitted(self) -> None:
        if self.stats is None:
            raise RuntimeError("call fit(X, y) first")

    # ---- posterior ------------------------------------------------------------------------
    def _cache(self):
        """Optimal q(u): mean weights a / noise and C = Lambda - A^{-1} (prediction O(M^2))."""
        if self._posterior is None:
            act = self._active_mask
            lam = self.kernel.spectrum(self.features.dim, self.max_degree)[self.features.degrees[act]]
            noise = self.likelihood.variance
            G = self.stats.G[np.ix_(act, act)]
            s = np.sqrt(lam)
            B = G * np.outer(s, s) / noise
            B[np.diag_indices_from(B)] += 1.0
            from scipy.linalg import cho_solve

            from .bounds import cholesky_or_explain

            LB = cholesky_or_explain(B, "B", "standardise X and y, or increase the noise variance")
            Binv = cho_solve((LB, True), np.eye(lam.size))
            weights = s * (Binv @ (s * self.stats.c[act])) / noise
            C = np.diag(lam) - Binv * np.outer(s, s)
            v = float(self.kernel.shape(np.ones(1))[0])
            self._posterior = (act, weights, C, v)
        return self._posterior

    def predict_f(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        r"""Posterior mean and variance of f at X, ``(N,)`` each:
        :math:`\mu = \Phi_* A^{-1} c / \sigma^2`,
        :math:`\nu = r_*^2 \kappa(1) - \Phi_* (\Lambda - A^{-1}) \Phi_*^\top`."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] + 1 != self.features.dim:
            raise ValueError(f"X must have {self.features.dim - 1} columns, got {X.shape[1]}")
        act, weights, C, v = self._cache()
        means, variances = [], []
        for start in range(0, X.shape[0], self.chunk_size):
            Xc = X[start : start + self.chunk_size]
            r, _ = self.kernel.lift(Xc)
            Phi = self.features.Kuf(self.kernel, Xc)[:, act]
            means.append(Phi @ weights)
            variances.append(r * r * v - np.einsum("nm,mk,nk->n", Phi, C, Phi))
        return np.concatenate(means), np.maximum(np.concatenate(variances), 0.0)

    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (noise added)."""
        return self.likelihood.predict_y(*self.predict_f(X))

    def __repr__(self) -> str:
        return f"VISH(kernel={self.kernel!r}, max_degree={self.max_degree}, likelihood={self.likelihood!r})"
