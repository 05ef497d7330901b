r"""Models. :class:`VISH`: variational inference with spherical-harmonic features (seed 001).

The inputs are lifted to the sphere by the kernel (``x~ = [x / input_scale, bias]``), the GP is
:math:`f(x) = r\,g(\hat x)` with :math:`g \sim GP(0, \kappa)` on :math:`S^{d-1}`, and the inducing
variables are the projections of f on the harmonics of degree at most L, so
:math:`K_{uu} = \mathrm{diag}(1/\lambda)` needs no inversion. For Gaussian noise the optimal
:math:`q(u)` and the collapsed bound depend on the data only through
:class:`~spherelab.inducing.HarmonicStatistics`, computed in one streaming pass; every optimiser
step after that costs :math:`O(M^3)` whatever N.

Gaussian likelihood: :meth:`VISH.fit` (collapsed bound, L-BFGS-B) or :meth:`VISH.fit_svi`
(minibatches). Bernoulli (probit) likelihood: :meth:`VISH.fit_svi` (Adam on whitened q(u) and the
kernel parameters). In :meth:`VISH.fit` every hyper-parameter (variance,
lengthscale / beta, noise, ``bias``, ``input_scale``) trained by L-BFGS-B with analytic
gradients. ``bias`` and ``input_scale`` change the features, so their gradient needs a pass over
the data (:meth:`SphericalHarmonics.solid_vjp`); the default strategy keeps large N cheap: all
parameters are fitted on a random subsample of at most ``lift_subsample`` rows, then the lift is
frozen, the statistics are computed in one pass over all rows and the spectrum and noise are
refined at O(M^3) per step. ``passes`` records how many full passes a fit made.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from ._fitting import _softplus, _softplus_inverse
from ._validation import check_data, check_finite_array, check_int
from scipy.linalg import cho_solve

from .bounds import cholesky_or_explain, collapsed_bound
from .inducing import HarmonicStatistics, SphericalHarmonicFeatures, harmonic_statistics
from .kernels import ZonalKernel
from .likelihoods import Bernoulli, Gaussian

__all__ = ["VISH"]


#: eigenvalues below this fraction of the largest are treated as zero prior variance
_LAMBDA_FLOOR = 1e-250

#: objective value returned for a trial point whose Cholesky fails even with jitter: a huge
#: finite value makes L-BFGS-B's line search step back instead of aborting
_REJECT = 1e300


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
        arc-cosine kernel) are dropped. Ignored (may be ``None``) when ``features`` is given.
    likelihood
        :class:`spherelab.likelihoods.Gaussian`.
    chunk_size
        Rows per chunk of the streaming pass.
    features
        Optional :class:`~spherelab.PhaseTruncatedHarmonics` (seed 004): at most
        ``max_phases`` orthonormalised zonal functions per degree, so high degrees stay
        affordable in high dimension; :math:`K_{uu}` is still diagonal. Their directions are
        trained with the lift in :meth:`fit` (``train_lift=True``). Default: all harmonics up
        to ``max_degree``.
    prior
        ``"kernel"`` (default): the GP prior is the kernel, and the bound charges the prior
        variance the features do not capture, :math:`\mathrm{tr}(K_{ff} - Q_{ff})/2\sigma^2`.
        ``"features"``: the prior is the finite-rank kernel the features span,
        :math:`k(x, x') = r r'\sum_m\lambda_m\phi_m(\hat x)\phi_m(\hat x')` (for all harmonics up to
        L, :class:`~spherelab.kernels.Truncated`; for phase-truncated features, the kernel of the
        kept phases): the collapsed bound is that model's exact log marginal likelihood and the
        predictive variance has no residual term. A modelling choice for phase-truncated
        features, whose dropped phases otherwise count against high degrees (seed 004).

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
        max_degree: int | None,
        likelihood: Gaussian | None = None,
        *,
        chunk_size: int = 16384,
        features: Any = None,
        prior: str = "kernel",
    ) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        self.kernel = kernel
        if features is not None:
            from .phases import PhaseTruncatedHarmonics

            if not isinstance(features, (PhaseTruncatedHarmonics, SphericalHarmonicFeatures)):
                raise TypeError(f"features must be PhaseTruncatedHarmonics or SphericalHarmonicFeatures, got {features!r}")
            max_degree = features.max_degree
        self._given_features = features
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        self.likelihood = likelihood if likelihood is not None else Gaussian(1.0)
        if not isinstance(self.likelihood, (Gaussian, Bernoulli)):
            raise TypeError(f"likelihood must be Gaussian or Bernoulli, got {self.likelihood!r}")
        self.chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        if prior not in ("kernel", "features"):
            raise ValueError(f"prior must be 'kernel' or 'features', got {prior!r}")
        self.prior = prior
        self._residual = prior == "kernel"
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

    def _get_lift(self) -> np.ndarray:
        return np.concatenate([[self.kernel.bias], np.atleast_1d(self.kernel.input_scale)])

    def _set_lift(self, values: np.ndarray) -> None:
        self.kernel.bias = float(values[0])
        if np.ndim(self.kernel.input_scale) == 0:
            self.kernel.input_scale = float(values[1])
        else:
            self.kernel.input_scale = np.array(values[1:], dtype=np.float64)
        self._posterior = None

    def _make_features(self, X: np.ndarray):
        if self._given_features is None:
            return SphericalHarmonicFeatures(X.shape[1] + 1, self.max_degree)
        if self._given_features.dim != X.shape[1] + 1:
            raise ValueError(
                f"X has {X.shape[1]} columns but the features live on S^{self._given_features.dim - 1} "
                f"(expected {self._given_features.dim - 1} inputs)"
            )
        return self._given_features

    def _trains_features(self) -> bool:
        return bool(getattr(self.features, "trainable", False))

    # ---- bound ----------------------------------------------------------------------------
    def _active(self) -> np.ndarray:
        lam_levels = self.kernel.spectrum(self.features.dim, self.max_degree)
        return lam_levels[self.features.degrees] > 0

    def _bound_and_grad(self, gradients: bool = True, lift_data=None):
        """Bound and gradient over [variance, shape params, noise] (+ [bias, input_scale...]
        when ``lift_data = (X, y)``: one extra pass over those rows)."""
        feats, stats = self.features, self.stats
        dim, L = feats.dim, self.max_degree
        lam_levels = self.kernel.spectrum(dim, L)
        act = self._active_mask
        deg = feats.degrees[act]
        sub = HarmonicStatistics(stats.G[np.ix_(act, act)], stats.c[act], stats.yy, stats.sum_r2, stats.n)
        v = self.kernel.at_one()
        noise = self.likelihood.variance
        # Quadrature spectra of very smooth kernels reach the rounding floor (|lambda| ~ 1e-17
        # lambda_0, either sign) at high levels; such a level carries no prior variance, so it
        # is clamped to a tiny positive value (and gets no gradient) instead of breaking B.
        lam = lam_levels[deg]
        floor = _LAMBDA_FLOOR * max(float(lam.max()), 1e-300)
        clamped = lam < floor
        lam = np.where(clamped, floor, lam)
        res = collapsed_bound(lam, v, noise, sub, gradients=gradients, residual=self._residual)
        if not gradients:
            return res, None
        res.dlam = np.where(clamped, 0.0, res.dlam)
        sgrads = self.kernel.spectrum_gradients(dim, L)
        vgrads = self.kernel.at_one_gradients()
        grads = []
        for name in ["variance", *self.kernel.shape_params]:
            g = float(res.dlam @ sgrads[name][deg]) + res.dv * vgrads[name]
            grads.append(g)
        grads.append(res.dnoise)
        if lift_data is not None:
            grads.extend(self._lift_gradient(res, act, *lift_data))
        return res.value, np.array(grads)

    def _lift_gradient(self, res, act, X, y, cache=None) -> list[float]:
        r"""d bound / d (bias, input_scale) through :math:`\Phi_n = \psi(\tilde x_n)`,
        :math:`\nabla\psi_m = \nabla H_m(\hat x) + (1 - \ell_m)\phi_m(\hat x)\hat x`.

        ``cache = (r, Xh, Phi_hat)`` for all rows of X (the subsample path) saves recomputing
        the lift and the harmonics; without it the rows are streamed in chunks."""
        feats = self.features
        scale = np.asarray(self.kernel.input_scale, dtype=np.float64)
        D = X.shape[1]
        g_bias = 0.0
        g_scale = np.zeros(D)
        train_dirs = self._trains_features()
        g_dirs = np.zeros(feats.get_params().size) if train_dirs else None
        dG2 = 2.0 * res.dG
        all_active = bool(np.all(act))
        step = X.shape[0] if cache is not None else self.chunk_size
        for start in range(0, X.shape[0], step):
            yc = y[start : start + step]
            if cache is not None:
                r, Xh, Phi_hat = cache
            else:
                r, Xh = self.kernel.lift(X[start : start + step])
                Phi_hat = feats.harmonics(Xh)
            # dL/dPhi_n = 2 dG Phi_n + y_n dc (features of zero prior variance get no weight)
            if all_active:
                W = (Phi_hat * r[:, None]) @ dG2
                W += yc[:, None] * res.dc[None, :]
            else:
                W = np.zeros_like(Phi_hat)
                W[:, act] = (Phi_hat[:, act] * r[:, None]) @ dG2 + yc[:, None] * res.dc[None, :]
            if train_dirs:
                grad_x, gd = feats.lift_vjp_with_params(Xh, Phi_hat, W, r)
                g_dirs += gd
            else:
                grad_x = feats.lift_vjp(Xh, Phi_hat, W)
            Xt = Xh * r[:, None]
            grad_x += 2.0 * res.dsum_r2 * Xt
            g_bias += float(grad_x[:, -1].sum())
            g_scale -= np.einsum("nk,nk->k", grad_x[:, :D], Xt[:, :D])
        g_scale /= np.broadcast_to(scale, (D,))
        out = [g_bias, *([g_scale.sum()] if scale.ndim == 0 else list(g_scale))]
        return out + (list(g_dirs) if train_dirs else [])

    def elbo(self) -> float:
        """The collapsed bound at the current hyper-parameters (after :meth:`fit`)."""
        self._check_fitted()
        if self.stats is None:
            raise RuntimeError("elbo() is the collapsed bound of fit(); after fit_svi use elbo_uncollapsed()")
        return float(self._bound_and_grad(gradients=False)[0])

    def elbo_gradient(self) -> dict[str, Any]:
        """Derivatives of :meth:`elbo` with respect to every hyper-parameter (``bias`` and
        ``input_scale`` need one pass over the training data)."""
        self._check_fitted()
        _, g = self._bound_and_grad(lift_data=(self._X, self._y))
        names = self._param_names()
        out: dict[str, Any] = dict(zip(names, g[: len(names)]))
        out["bias"] = g[len(names)]
        rest = g[len(names) + 1 :]
        n_scale = np.size(self.kernel.input_scale)
        out["input_scale"] = float(rest[0]) if np.ndim(self.kernel.input_scale) == 0 else np.array(rest[:n_scale])
        if self._trains_features():
            out["directions"] = np.array(rest[n_scale:])
        return out

    # ---- fitting --------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        optimize: bool = True,
        *,
        train_lift: bool = True,
        lift_subsample: int = 20_000,
        lift_maxiter: int = 200,
        maxiter: int = 500,
        seed: int = 0,
    ) -> "VISH":
        """Fit the model.

        With ``optimize=True``: (1) if ``train_lift``, optimise every hyper-parameter including
        ``bias`` and ``input_scale`` on a random subsample of at most ``lift_subsample`` rows
        (each step: one harmonic evaluation, kept in memory, and one gradient pass over the
        subsample; at most ``lift_maxiter`` L-BFGS-B iterations), after a spectrum-and-noise
        warm start at the initial lift; with trainable features
        (:class:`~spherelab.PhaseTruncatedHarmonics`) their directions are optimised in this
        stage too, and the warm start is skipped (at untrained directions it drives the kernel
        variance to zero, where every other gradient vanishes); (2) freeze the lift, compute the
        sufficient statistics in one pass over all rows, and optimise the spectrum and noise
        (O(M^3) per step). ``optimize=False`` keeps the hyper-parameters and only sets q(u).
        ``self.passes`` counts the full passes over (X, y).

        Returns
        -------
        self
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("fit() uses the collapsed bound (Gaussian noise); use fit_svi() for Bernoulli")
        X, y = check_data(X, y)
        self.kernel.lift(X)  # clear errors (rows vanishing after the lift, wrong input_scale)
        self._X, self._y = X, y
        self.features = self._make_features(X)
        self.passes = 0
        if optimize and train_lift:
            n = X.shape[0]
            if n > lift_subsample:
                idx = np.sort(np.random.default_rng(seed).choice(n, int(lift_subsample), replace=False))
                Xs, ys = X[idx], y[idx]
            else:
                Xs, ys = X, y
            # warm start: fit the spectrum and noise at the initial lift first (cheap, O(M^3) per
            # step); joint optimisation from the defaults tends to run into degenerate lifts
            # (input scales -> 0) that are worse local optima
            self.stats = harmonic_statistics(self.kernel, self.features, Xs, ys, chunk_size=self.chunk_size)
            self._active_mask = self._active()
            if not self._trains_features():
                # (not with trainable phases: at untrained directions the warm start explains the
                # data by noise alone, variance -> 0, where every other gradient vanishes)
                self._optimise_spectrum(maxiter)
            self.lift_result = self._optimise_lift(Xs, ys, lift_maxiter)
            if Xs is X:
                cached = n * self.features.num_features <= self._LIFT_CACHE_ELEMENTS
                self.passes += (1 if cached else 2) * self.lift_result.nfev
        self.stats = harmonic_statistics(self.kernel, self.features, X, y, chunk_size=self.chunk_size)
        self.passes += 1
        self._active_mask = self._active()
        if optimize:
            self.optimizer_result = self._optimise_spectrum(maxiter)
        self._posterior = None
        return self

    #: largest subsample (rows x features) whose harmonics are kept in memory between the bound
    #: and its lift gradient (float64: 160 MB); larger ones are streamed twice per step
    _LIFT_CACHE_ELEMENTS = 20_000_000

    def _optimise_lift(self, Xs: np.ndarray, ys: np.ndarray, maxiter: int):
        """L-BFGS-B over every hyper-parameter (spectrum, noise, bias, input scales) on the rows
        (Xs, ys): each step lifts the rows, evaluates the harmonics once, and reuses them for the
        bound and its gradient."""
        n_spec = len(self._param_names())
        n_pos = n_spec + 1 + np.size(self.kernel.input_scale)  # positive: softplus-parameterised
        cache_ok = Xs.shape[0] * self.features.num_features <= self._LIFT_CACHE_ELEMENTS
        train_dirs = self._trains_features()
        self._active_mask = None

        def objective(u):
            theta = _softplus(u[:n_pos])
            self._set(theta[:n_spec])
            self._set_lift(theta[n_spec:])
            if train_dirs:
                self.features.set_params(u[n_pos:])
            try:
                with np.errstate(all="ignore"):  # judged by the finiteness check below
                    if cache_ok:
                        r, Xh = self.kernel.lift(Xs)
                        Phi_hat = self.features.harmonics(Xh)
                        Phi = Phi_hat * r[:, None]
                        G = Phi.T @ Phi
                        self.stats = HarmonicStatistics(0.5 * (G + G.T), Phi.T @ ys, float(ys @ ys),
                                                        float(r @ r), Xs.shape[0])
                        lift_data = (Xs, ys, (r, Xh, Phi_hat))
                    else:
                        self.stats = harmonic_statistics(self.kernel, self.features, Xs, ys,
                                                         chunk_size=self.chunk_size)
                        lift_data = (Xs, ys)
                    if self._active_mask is None:
                        self._active_mask = self._active()
                    value, grad = self._bound_and_grad(lift_data=lift_data)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError):
                # a trial point outside the usable range (Cholesky fails even with jitter, a
                # parameter under/overflowed): the line search steps back
                return _REJECT, np.zeros_like(u)
            if not (np.isfinite(value) and np.all(np.isfinite(grad))):
                return _REJECT, np.zeros_like(u)
            return -value, -np.concatenate([grad[:n_pos] * expit(u[:n_pos]), grad[n_pos:]])

        u0 = _softplus_inverse(np.concatenate([self._get(), self._get_lift()]))
        if train_dirs:
            u0 = np.concatenate([u0, self.features.get_params()])
        result = minimize(objective, u0, jac=True, method="L-BFGS-B", options={"maxiter": int(maxiter)})
        theta = _softplus(result.x[:n_pos])
        self._set(theta[:n_spec])
        self._set_lift(theta[n_spec:])
        if train_dirs:
            self.features.set_params(result.x[n_pos:])
        return result

    def _optimise_spectrum(self, maxiter: int):
        """L-BFGS-B over the spectrum and noise parameters with the statistics fixed."""
        u0 = _softplus_inverse(self._get())

        def objective_spectrum(u):
            self._set(_softplus(u))
            try:
                with np.errstate(all="ignore"):  # judged by the finiteness check below
                    value, grad = self._bound_and_grad()
            except (np.linalg.LinAlgError, ValueError, FloatingPointError):
                # a trial point outside the usable range (Cholesky fails even with jitter,
                # a parameter under/overflowed): the line search steps back
                return _REJECT, np.zeros_like(u)
            if not (np.isfinite(value) and np.all(np.isfinite(grad))):
                return _REJECT, np.zeros_like(u)
            return -value, -grad * expit(u)

        result = minimize(objective_spectrum, u0, jac=True, method="L-BFGS-B", options={"maxiter": int(maxiter)})
        self._set(_softplus(result.x))
        return result

    def fit_svi(
        self,
        X: Any,
        y: Any,
        *,
        batch_size: int = 256,
        iterations: int = 1000,
        lr: float = 0.01,
        gamma: float = 0.1,
        seed: int = 0,
        train_directions: bool = True,
    ) -> "VISH":
        r"""Stochastic variational inference with the uncollapsed bound on minibatches
        (Hensman et al. 2013): q(u) = N(m, S) by natural-gradient steps of size ``gamma`` in the
        natural parameters (:math:`S^{-1} \leftarrow (1-\gamma)S^{-1} + \gamma(\Lambda +
        \tfrac NB \Lambda\Phi_b^\top\Phi_b\Lambda/\sigma^2)`, :math:`S^{-1}m \leftarrow
        (1-\gamma)S^{-1}m + \gamma\tfrac NB\Lambda\Phi_b^\top y_b/\sigma^2`), the spectrum and
        noise by Adam on :func:`spherelab.bounds.uncollapsed_bound`'s gradients. Memory and cost
        per step are independent of N. The lift (``bias``, ``input_scale``) is kept fixed; the
        directions of phase-truncated features are trained by Adam on the same minibatch
        gradient (``train_directions``; through :meth:`~spherelab.PhaseTruncatedHarmonics.vjp`).
        Sets ``q_mu`` and ``q_sqrt`` (natural units: :math:`S = L L^\top`).

        Returns
        -------
        self
        """
        from .bounds import uncollapsed_bound
        from .optimizers import Adam

        X = check_finite_array(X, "X", ndim=2)
        y = check_finite_array(y, "y").reshape(-1)
        if X.shape[0] != y.shape[0] or X.shape[0] == 0:
            raise ValueError(f"X ({X.shape[0]} rows) and y ({y.shape[0]} values) must be non-empty and match")
        B = check_int(batch_size, "batch_size", minimum=1)
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        self.kernel.lift(X)
        self._X, self._y = X, y
        self.features = self._make_features(X)
        self._active_mask = act = self._active()
        deg = self.features.degrees[act]
        dim, L = self.features.dim, self.max_degree
        n = X.shape[0]
        rng = np.random.default_rng(seed)
        dirs = _DirectionStep(self.features, act, lr) if (train_directions and self._trains_features()) else None
        if isinstance(self.likelihood, Bernoulli):
            self.likelihood.check_targets(y)
            return self._fit_svi_whitened(X, y, act, deg, B, int(iterations), lr, rng, dirs)
        lam = self.kernel.spectrum(dim, L)[deg]
        precision = np.diag(lam)  # start at the prior: K_uu^-1 = Lambda
        theta1 = np.zeros(lam.size)
        opt = Adam(_softplus_inverse(self._get()), lr=lr)
        names = ["variance", *self.kernel.shape_params]
        for _ in range(int(iterations)):
            idx = rng.choice(n, size=min(B, n), replace=False)
            r, Xh = self.kernel.lift(X[idx])
            Phi = self.features.Kuf(self.kernel, X[idx])[:, act]
            lam = self.kernel.spectrum(dim, L)[deg]
            noise = self.likelihood.variance
            scale = n / idx.size
            PL = Phi * lam
            precision = (1 - gamma) * precision + gamma * (np.diag(lam) + scale * PL.T @ PL / noise)
            theta1 = (1 - gamma) * theta1 + gamma * scale * PL.T @ y[idx] / noise
            Lp = cholesky_or_explain(precision, "S^-1 (q(u) precision)", "lower gamma or lr")
            m = cho_solve((Lp, True), theta1)
            Linv = np.linalg.inv(Lp)
            Ls = np.linalg.cholesky(Linv.T @ Linv)  # S = P^-1 = Lp^-T Lp^-1
            res = uncollapsed_bound(lam, self.kernel.at_one(), noise, m, Ls, Phi, y[idx], r * r, n, self._residual,
                                    phi_gradient=dirs is not None)
            if dirs is not None:
                dirs.step(Xh, r, res.dPhi)
            sg = self.kernel.spectrum_gradients(dim, L)
            vg = self.kernel.at_one_gradients()
            g = [float(res.dlam @ sg[p][deg]) + res.dv * vg[p] for p in names] + [res.dnoise]
            u = opt.step(np.array(g) * expit(opt.x))
            self._set(_softplus(u))
        Lp = cholesky_or_explain(precision, "S^-1 (q(u) precision)", "lower gamma or lr")
        self.q_mu = cho_solve((Lp, True), theta1)
        Linv = np.linalg.inv(Lp)
        self.q_sqrt = np.linalg.cholesky(Linv.T @ Linv)
        self.stats = None
        self._posterior = None
        return self

    def _fit_svi_whitened(self, X, y, act, deg, B, iterations, lr, rng, dirs=None) -> "VISH":
        """Non-conjugate likelihoods: Adam on whitened q(u) (m = Lambda^1/2 m_w, L = Lambda^1/2 L_w)
        and the kernel's spectrum parameters, with the likelihood-generic uncollapsed bound."""
        from .bounds import uncollapsed_bound_general
        from .optimizers import Adam

        dim, Ldeg, n = self.features.dim, self.max_degree, X.shape[0]
        Ma = int(act.sum())
        tril = np.tril_indices(Ma)
        diag_pos = np.flatnonzero(tril[0] == tril[1])
        names = ["variance", *self.kernel.shape_params]
        h = len(names)
        lw0 = np.eye(Ma)[tril]
        lw0[diag_pos] = _softplus_inverse(lw0[diag_pos])
        hyp0 = np.array([getattr(self.kernel, p) for p in names], dtype=np.float64)
        opt = Adam(np.concatenate([_softplus_inverse(hyp0), np.zeros(Ma), lw0]), lr=lr)

        def unpack(u):
            for name, val in zip(names, _softplus(u[:h])):
                setattr(self.kernel, name, float(val))
            lvec = u[h + Ma :].copy()
            lvec[diag_pos] = _softplus(lvec[diag_pos])
            Lw = np.zeros((Ma, Ma))
            Lw[tril] = lvec
            lam = self.kernel.spectrum(dim, Ldeg)[deg]
            sq = np.sqrt(lam)
            return sq * u[h : h + Ma], sq[:, None] * Lw, lam, sq

        for _ in range(iterations):
            u = opt.x
            m, L, lam, sq = unpack(u)
            idx = rng.choice(n, size=min(B, n), replace=False)
            r, Xh = self.kernel.lift(X[idx])
            Phi = self.features.Kuf(self.kernel, X[idx])[:, act]
            res = uncollapsed_bound_general(lam, self.kernel.at_one(), self.likelihood, m, L, Phi, y[idx], r * r, n,
                                            self._residual, phi_gradient=dirs is not None)
            dlam = res.dlam + (res.dm * m + np.sum(res.dL * L, axis=1)) / (2.0 * lam)
            sg = self.kernel.spectrum_gradients(dim, Ldeg)
            vg = self.kernel.at_one_gradients()
            g_h = np.array([float(dlam @ sg[p][deg]) + res.dv * vg[p] for p in names]) * expit(u[:h])
            g_l = (sq[:, None] * res.dL)[tril]
            g_l[diag_pos] *= expit(u[h + Ma :][diag_pos])
            opt.step(np.concatenate([g_h, sq * res.dm, g_l]))
            if dirs is not None:
                dirs.step(Xh, r, res.dPhi)
        self.q_mu, self.q_sqrt, _, _ = unpack(opt.x)
        self.stats = None
        self._posterior = None
        return self

    def elbo_uncollapsed(self, X: Any = None, y: Any = None) -> float:
        """The uncollapsed bound of the current q(u) (after :meth:`fit_svi`) on all of (X, y)."""
        from .bounds import uncollapsed_bound

        X = self._X if X is None else check_finite_array(X, "X", ndim=2)
        y = self._y if y is None else check_finite_array(y, "y").reshape(-1)
        act = self._active_mask
        r, _ = self.kernel.lift(X)
        Phi = self.features.Kuf(self.kernel, X)[:, act]
        lam = self.kernel.spectrum(self.features.dim, self.max_degree)[self.features.degrees[act]]
        if isinstance(self.likelihood, Gaussian):
            return uncollapsed_bound(
                lam, self.kernel.at_one(), self.likelihood.variance, self.q_mu, self.q_sqrt, Phi, y, r * r, len(y),
                self._residual,
            ).value
        from .bounds import uncollapsed_bound_general

        return uncollapsed_bound_general(
            lam, self.kernel.at_one(), self.likelihood, self.q_mu, self.q_sqrt, Phi, y, r * r, len(y), self._residual
        ).value

    def _check_fitted(self) -> None:
        if self.stats is None and getattr(self, "q_mu", None) is None:
            raise RuntimeError("call fit(X, y) first")

    # ---- posterior ------------------------------------------------------------------------
    def _cache(self):
        """Optimal q(u): mean weights a / noise and C = Lambda - A^{-1} (prediction O(M^2))."""
        if self._posterior is None and self.stats is None and getattr(self, "q_mu", None) is not None:
            # q(u) = N(m, S) from fit_svi: mean Phi Lambda m, variance r^2 v - Phi (Lambda - Lambda S Lambda) Phi^T
            act = self._active_mask
            lam = self.kernel.spectrum(self.features.dim, self.max_degree)[self.features.degrees[act]]
            LS = lam[:, None] * self.q_sqrt
            self._posterior = (act, lam * self.q_mu, np.diag(lam) - LS @ LS.T, self.kernel.at_one(), lam)
        if self._posterior is None:
            act = self._active_mask
            lam = self.kernel.spectrum(self.features.dim, self.max_degree)[self.features.degrees[act]]
            lam = np.maximum(lam, _LAMBDA_FLOOR * max(float(lam.max()), 1e-300))
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
            v = self.kernel.at_one()
            self._posterior = (act, weights, C, v, lam)
        return self._posterior

    def predict_f(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        r"""Posterior mean and variance of f at X, ``(N,)`` each:
        :math:`\mu = \Phi_* A^{-1} c / \sigma^2`,
        :math:`\nu = r_*^2 \kappa(1) - \Phi_* (\Lambda - A^{-1}) \Phi_*^\top` (with
        ``prior="features"`` the prior variance :math:`r_*^2\kappa(1)` is
        :math:`\Phi_*\Lambda\Phi_*^\top`)."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] + 1 != self.features.dim:
            raise ValueError(f"X must have {self.features.dim - 1} columns, got {X.shape[1]}")
        act, weights, C, v, lam = self._cache()
        means, variances = [], []
        for start in range(0, X.shape[0], self.chunk_size):
            Xc = X[start : start + self.chunk_size]
            r, _ = self.kernel.lift(Xc)
            Phi = self.features.Kuf(self.kernel, Xc)[:, act]
            means.append(Phi @ weights)
            prior = r * r * v if self._residual else np.einsum("nm,m,nm->n", Phi, lam, Phi)
            variances.append(prior - np.einsum("nm,mk,nk->n", Phi, C, Phi))
        return np.concatenate(means), np.maximum(np.concatenate(variances), 0.0)

    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (noise added)."""
        return self.likelihood.predict_y(*self.predict_f(X))

    def __repr__(self) -> str:
        return f"VISH(kernel={self.kernel!r}, max_degree={self.max_degree}, likelihood={self.likelihood!r})"


class _DirectionStep:
    r"""Adam on the directions of trainable features from a minibatch's :math:`\partial L/\partial\Phi`
    (``Phi = r * features(x_hat)`` restricted to the active columns)."""

    def __init__(self, features, active: np.ndarray, lr: float) -> None:
        from .optimizers import Adam

        self.features, self.active = features, active
        self.opt = Adam(features.get_params(), lr=lr)

    def step(self, Xh: np.ndarray, r: np.ndarray, dPhi: np.ndarray) -> None:
        G = np.zeros((Xh.shape[0], self.features.num_features))
        G[:, self.active] = dPhi * r[:, None]
        self.features.set_params(self.opt.step(self.features.vjp(Xh, G)[0]))
