r""":class:`VISH`: variational inference with spherical-harmonic features (Dutordoir, Durrande &
Hensman 2020).

The inputs are lifted to the sphere by the kernel (``x~ = [x / input_scale, bias]``), the GP is
:math:`f(x) = r\,g(\hat x)` with :math:`g \sim GP(0, \kappa)` on :math:`S^{d-1}`, and the inducing
variables are the projections of f on the harmonics of degree at most L, so
:math:`K_{uu} = \mathrm{diag}(1/\lambda)` needs no inversion. For Gaussian noise the optimal
:math:`q(u)` and the collapsed bound depend on the data only through the sufficient statistics of
:func:`~spherelab.bounds.vish.harmonic_statistics`, computed in one streamed pass; every optimiser step after that
costs :math:`O(M^3)` whatever N.

:meth:`VISH.fit` fits every hyper-parameter on a subsample, then the spectrum and noise on the
statistics of all rows (the bound and the stages: :mod:`.vish_collapsed`; ``passes`` counts the
full passes over the data); minibatch and Bernoulli fits: :meth:`VISH.fit_svi` (:mod:`.vish_svi`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .._state import Fields
from .._validation import check_allocation, check_data, check_finite_array, check_int, fit_options
from ..bounds.precision import InsufficientPrecision
from ..bounds.statistics import Statistics
from ..bounds.vish import predictive_weights
from ..distributed import rows
from ..features.additive import AdditiveHarmonics
from ..features.harmonic import HarmonicFeatures, SphericalFeatures
from ..kernels import Additive, ZonalKernel
from ..likelihoods import Gaussian
from ..optim import Deadline
from ..parameters import Param, kernel_params, likelihood_params
from ..progress import FitProgress, check_progress
from ..rows import vish as vish_rows
from ..sphere.special import cumulative_num_harmonics
from . import saved, vish_collapsed, vish_svi
from .base import Model, entry
from .scale import warn_off_scale

__all__ = ["VISH"]


class VISH(Model):
    r"""Sparse variational GP regression with spherical-harmonic features.

    Parameters
    ----------
    kernel
        A zonal kernel from :mod:`spherelab.kernels` (its ``bias`` and ``input_scale`` define
        the lift to the sphere), or an :class:`~spherelab.kernels.Additive` sum of zonal kernels on
        groups of input columns (features: :class:`~spherelab.features.AdditiveHarmonics`, every
        component to ``max_degree`` unless given). Shared, not copied (:mod:`spherelab.models.base`).
    max_degree
        Use every harmonic of degree 0..L: :math:`M = \sum_{\ell \le L} N(\ell, D + 1)`
        features. Levels where the kernel's spectrum vanishes (odd levels >= 3 of the
        arc-cosine kernel) are dropped. Ignored (may be ``None``) when ``features`` is given.
    likelihood
        :class:`~spherelab.likelihoods.Gaussian` (default) or
        :class:`~spherelab.likelihoods.Bernoulli` (:meth:`fit_svi` only).
    chunk_size
        Rows per chunk of the streamed passes (default: the device's ``pass_rows``: on the CPU
        :func:`spherelab.chunks.chunk_rows`, from the cache size and M; on a GPU chunks of
        about 512 MiB of columns).
    features
        Optional :class:`~spherelab.features.HarmonicFeatures` or
        :class:`~spherelab.PhaseTruncatedHarmonics` (Eleftheriadis et al.: at most ``max_phases``
        orthonormalised zonal functions per degree, so high degrees stay affordable in high
        dimension; :math:`K_{uu}` is still diagonal; their directions are trained with the lift).
    prior
        ``"features"`` (default): the prior is the finite-rank kernel the features span,
        :math:`k(x, x') = r r'\sum_m\lambda_m\phi_m(\hat x)\phi_m(\hat x')`; the collapsed bound is
        that model's exact log marginal likelihood and the predictive variance has no residual
        term (Eleftheriadis, Richards & Hensman's choice for phase-truncated features). It reproduces
        Dutordoir et al. 2020 Table 1 (all five sets within the paper's MSE and NLPD) and gives the
        lower test NLPD on kin8nm, power and protein over five splits (``benchmarks/RESULTS.md``).
        Its kernel hyper-parameters weight the levels up to ``max_degree`` only: the spectrum
        above is not identified, so a fitted lengthscale may leave the range the full kernel
        would take.
        ``"kernel"``: the GP prior is the kernel, and the bound charges the prior variance the
        features do not capture, :math:`\mathrm{tr}(K_{ff} - Q_{ff})/2\sigma^2` (Dutordoir et al.
        2020, eq. 11): the bound is below the full GP's log marginal likelihood at every degree,
        so bounds at different degrees compare one model. Where the features hold every
        harmonic up to the last degree of a spectrum that ends
        (:meth:`~spherelab.features.HarmonicFeatures.spans`: ``PolynomialDecay(max_degree=L)``,
        ``Truncated``) that variance is zero and the two priors are one model. The hybrid with orthogonal points
        (:meth:`spherelab.OrthogonalSVGP.from_vish`) extends this one.
    device
        ``"cpu"`` (default), ``"gpu"`` or ``"auto"`` (:func:`spherelab.backend.resolve`).
    gram_dtype
        ``"float64"`` (default) or ``"float32"``: the precision of the products of the pass over
        all rows (:func:`~spherelab.bounds.vish.harmonic_statistics`); the lift stage always
        runs in float64. Error and speed measured in ``benchmarks/RESULTS.md``.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> m = sl.VISH(sl.kernels.Matern(1.5, 1.0), max_degree=6).fit(X, y)
    >>> mean, var = m.predict_y(X[:3])
    """

    fields = Model.fields + Fields(
        config=("kernel", "max_degree", "likelihood", "chunk_size=_chunk_size", "given_features=_given_features",
                "prior", "gram_dtype"),
        fitted=("features", "stats", "q_mu", "q_sqrt", "passes"),
        transient=("lift_result",),
        cache={"posterior=_posterior": ("kernel", "likelihood", "stats", "features", "q_mu", "q_sqrt")})

    def __init__(self, kernel: ZonalKernel, max_degree: int | None = None, likelihood=None, *,
                 chunk_size: int | None = None, features: SphericalFeatures | None = None,
                 prior: str = "features",
                 gram_dtype: str = "float64",
                 device: str = "cpu") -> None:
        if not isinstance(kernel, (ZonalKernel, Additive)):
            raise TypeError(f"kernel must be a spherelab kernel (zonal, or kernels.Additive), got {kernel!r}")
        self.kernel = kernel
        if features is not None:
            if not isinstance(features, SphericalFeatures):
                raise TypeError("features must be HarmonicFeatures, PhaseTruncatedHarmonics or AdditiveHarmonics, "
                                f"got {features!r}")
            if isinstance(kernel, Additive) != isinstance(features, AdditiveHarmonics):
                raise TypeError("an additive kernel takes AdditiveHarmonics, and AdditiveHarmonics an additive kernel; "
                                f"got {type(kernel).__name__} with {type(features).__name__}")
            max_degree = features.max_degree
        self._given_features = features
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        # even on the circle (d = 2, the fewest harmonics) the fit holds an M x M matrix, M = 2L + 1
        check_allocation(8.0 * (2.0 * self.max_degree + 1.0) ** 2, f"max_degree = {self.max_degree:,}",
                         "lower max_degree")
        self._set_likelihood(likelihood)
        self._set_device(device)
        self.chunk_size = chunk_size
        if prior not in ("kernel", "features"):
            raise ValueError(f"prior must be 'kernel' or 'features', got {prior!r}")
        self.prior = prior
        if gram_dtype not in ("float64", "float32"):
            raise ValueError(f"gram_dtype must be 'float64' or 'float32', got {gram_dtype!r}")
        self.gram_dtype = gram_dtype
        self.features: SphericalFeatures | None = None
        self.stats: Statistics | None = None
        self.q_mu = self.q_sqrt = None
        self._posterior: tuple | None = None
        self.optimizer_result = self.lift_result = None
        self.passes = 0

    @classmethod
    def _load_state(cls, state):
        return saved.load_vish(cls, state)

    # ---- parameters -----------------------------------------------------------------------
    def _initialised(self) -> bool:
        return self.features is not None

    def _registry(self) -> list[Param]:
        reg = kernel_params(self.kernel) + likelihood_params(self.likelihood)
        if self.features.trainable:
            reg.append(Param("directions", self.features.get_params, self.features.set_params))
        return reg + (vish_svi.q_params(self) if self.q_mu is not None else [])

    def _num_inducing(self) -> int:
        if self.features is None:  # the harmonics' count depends on the sphere, known from X
            raise RuntimeError(f"{type(self).__name__}'s inducing variables are counted once its inputs' "
                               "dimension is known: call fit(X, y) first (or cumulative_num_harmonics(L, D + 1))")
        return self.features.num_features

    def _setup(self, X: np.ndarray) -> None:
        # clear errors (rows vanishing after the lift, wrong input_scale, overflow); Dask: each
        # block is checked when its statistics are computed
        if rows(X).at_hand() is not None:
            self.kernel.check_lift(X)
        if self._given_features is not None:
            feats = self._given_features
        elif isinstance(self.kernel, Additive):  # every component to max_degree
            feats = AdditiveHarmonics(self.max_degree)
        else:
            feats = HarmonicFeatures(self.max_degree)
            # refused before the harmonics are built: at degree 200 on S^3 that alone takes a minute
            self._check_size(cumulative_num_harmonics(self.max_degree, X.shape[1] + 1))
        feats.initialise(X.shape[1] + 1, None)
        feats.bind(self.kernel)
        self._check_size(feats.num_features)
        self.features = feats

    @staticmethod
    def _check_size(M: int) -> None:  # G, its factor and the spectrum's work: about four M x M arrays
        check_allocation(32.0 * M * M, f"VISH's statistics of {M:,} features", "lower max_degree")

    # ---- the collapsed bound: vish_collapsed.bound and .statistics, as methods --------------
    _bound = vish_collapsed.bound
    _statistics = vish_collapsed.statistics

    @property
    def chunk_size(self) -> int | None:
        """Rows per chunk of the host's passes (None: chosen from M); validated when assigned."""
        return self._chunk_size

    @chunk_size.setter
    def chunk_size(self, value: Any) -> None:
        self._chunk_size = None if value is None else check_int(value, "chunk_size", minimum=1)

    def elbo_and_gradient(self, X: Any, y: Any, num_data: int | None = None) -> tuple[float, dict[str, Any]]:
        """The bound on (X, y) and its gradient with respect to every parameter: after
        :meth:`fit_svi`, the uncollapsed bound of q(u) (a minibatch estimate when ``num_data`` >
        len(y)); else the collapsed bound (one statistics pass and one gradient pass over the rows;
        it has no minibatch estimate)."""
        return self._objective_terms(X, y, num_data, None)

    @entry(threads="rows")
    def _objective_terms(self, X, y, num_data, names):
        if self.q_mu is not None:
            X, y = self._check_data(X, y)
            return vish_svi.uncollapsed_objective(self, X, y, num_data, names)
        if num_data is not None and num_data != np.shape(y)[0]:
            raise ValueError("VISH's collapsed bound has no minibatch estimate; use fit_svi()")
        return vish_collapsed.bound_on_rows(self, *check_data(X, y))

    @entry("read", threads="rows")
    def elbo(self, X: Any = None, y: Any = None) -> float:
        """The bound at the current parameters: after :meth:`fit`, the collapsed bound on the
        training data (or on (X, y)); after :meth:`fit_svi`, the uncollapsed bound of the
        current q(u)."""
        self._check_fitted()
        if self.q_mu is not None:
            X, y = self._check_data(*self._training_data(X, y))
            return vish_svi.uncollapsed_objective(self, X, y, gradients=False)[0]
        if X is None:
            try:
                return float(self._bound(self.stats, gradients=False)[0])
            except InsufficientPrecision as why:
                if getattr(self, "_X", None) is None:
                    raise ValueError(f"{why}; the float64 statistics need the training data (save with "
                                     "include_data=True, or pass X and y)") from None
                X, y = self._X, self._y
        X, y = check_data(X, y)
        return float(self._bound(self._statistics(X, y), gradients=False)[0])

    def elbo_gradient(self) -> dict[str, Any]:
        """Derivatives of :meth:`elbo` with respect to every parameter (``bias``,
        ``input_scale`` and directions need one pass over the training data)."""
        self._check_fitted()
        return self._bound(self.stats, lift=self._training_data(None, None))[1]

    # ---- fitting --------------------------------------------------------------------------
    #: largest subsample (rows x features) whose harmonics are kept in memory between the bound
    #: and its lift gradient (float64: 160 MB, and as much again for the kept [K_uf^T, y]);
    #: larger ones are streamed twice per step
    lift_cache_elements = 20_000_000

    @entry("fit")
    def fit(self, X: Any, y: Any, *, optimize: bool = True, train_lift: bool = True, lift_subsample: int = 20_000,
            lift_maxiter: int = 200, maxiter: int = 500, seed: int = 0, lift_ftol: float | None = None,
            progress: bool | None = None, max_time: float | None = None) -> "VISH":
        """Fit the model (module docstring): with ``optimize`` and ``train_lift``, (1) every
        hyper-parameter on a subsample of at most ``lift_subsample`` rows (at most
        ``lift_maxiter`` L-BFGS-B iterations, after a spectrum-and-noise warm start at the
        initial lift — skipped for trainable phases, where it drives the variance to zero);
        (2) the statistics of all rows in one pass, then the spectrum and noise (``maxiter``).
        ``optimize=False`` keeps the hyper-parameters and only computes the statistics.

        With the features prior, trainable phase directions
        (:class:`~spherelab.PhaseTruncatedHarmonics`) are trained on at most half the rows, and
        stage (2) fits the spectrum and noise on the rows they were not trained on (the posterior
        conditions on every row): there the directions are hundreds of hyper-parameters of the
        prior and fit their subsample's noise, so a noise variance fitted on the same rows
        collapses (``benchmarks/RESULTS.md``, phases on synthetic data). With the kernel prior
        they are variational parameters, which the bound keeps from fitting noise.

        Stage (1) stops once an iteration improves the bound by less than ``lift_ftol`` of its
        size (None: 1e-4, or SciPy's default 2.2e-9 for trainable directions). 1e-4 suits the lift's
        few parameters: each step costs a pass over the subsample, and stage (2) refines the
        spectrum and noise on all rows anyway (measured, ``benchmarks/RESULTS.md``: at
        N = 2e4, M = 210 the fit takes 3.3 s against 6.4 s at SciPy's default, with the
        same test NLPD; on four UCI sets the same MSE and NLPD within 0.004). Trainable directions
        stop there after a few steps, before they have moved. ``progress``: a bar with
        the stage, iteration, bound and elapsed time (True; None: once the fit has run a few seconds
        in an interactive session). ``max_time``: seconds for the fit; the lift stage stops at the
        first iterate after 60 % of them (with its warm start), and the spectrum stage at the limit
        (the pass over every row between them always runs; the report says where a limit stopped a
        stage).

        Returns
        -------
        self
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("fit() uses the collapsed bound (Gaussian noise); use fit_svi() for Bernoulli")
        optimize, train_lift, lift_subsample, lift_maxiter, maxiter, seed, lift_ftol, max_time = fit_options(
            optimize=optimize, train_lift=train_lift, lift_subsample=lift_subsample, lift_maxiter=lift_maxiter,
            maxiter=maxiter, seed=seed, lift_ftol=lift_ftol, max_time=max_time)
        check_progress(progress)
        X, y = rows(X, y).checked()
        warn_off_scale("VISH.fit", X, y)
        self._setup(X)
        self._X, self._y = X, y
        self.q_mu = self.q_sqrt = None
        self.passes = 0
        bar = FitProgress(progress, "VISH.fit")
        with self._threads(X.shape[0]), contextlib.closing(bar):
            vish_collapsed.fit_stages(self, X, y, optimize, train_lift, lift_subsample, lift_maxiter, maxiter, seed,
                                      lift_ftol, bar, Deadline(max_time))
        return self

    def _pass_work(self, rows: int) -> float:
        M = self._num_inducing()
        return float(rows) * M * M  # the statistics pass's Gram product: the O(M^3) steps come after it

    @entry("fit")
    def fit_svi(self, X: Any, y: Any, *, batch_size: int = 256, iterations: int = 1000, lr: float = 0.01,
                gamma: float = 0.1, seed: int = 0, train_directions: bool = True,
                progress: bool | None = None) -> "VISH":
        r"""Stochastic variational inference with the uncollapsed bound on minibatches
        (Hensman et al. 2013), one Adam step of :meth:`objective` per minibatch: for a Gaussian
        likelihood q(u) by natural-gradient steps of size ``gamma`` and Adam on the spectrum and
        noise; for Bernoulli, Adam on a whitened q(u) and the spectrum (:mod:`.vish_svi`). Memory
        and cost per step are independent of N. The lift is kept fixed; the directions of
        phase-truncated features are trained on the same minibatch gradient
        (``train_directions``). Sets ``q_mu`` and ``q_sqrt`` (:math:`S = LL^\top`), which join the
        registry, and ``trace``, the bound's estimate at each step. ``progress`` as in :meth:`fit`.

        Returns
        -------
        self
        """
        B, iterations, lr, gamma, seed, train_directions = fit_options(
            batch_size=batch_size, iterations=iterations, lr=lr, gamma=gamma, seed=seed,
            train_directions=train_directions)
        if gamma > 1:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        check_progress(progress)
        X, y = self._check_data(X, y)
        warn_off_scale("VISH.fit_svi", X, y if isinstance(self.likelihood, Gaussian) else None)
        self._setup(X)
        self._X, self._y = X, y
        self.stats = None
        bar = FitProgress(progress, "VISH.fit_svi", total=iterations)
        with self._threads(min(B, X.shape[0])), contextlib.closing(bar):
            vish_svi.svi_fit(self, X, y, B, iterations, lr, gamma, seed, train_directions, bar)
        return self

    # ---- posterior ------------------------------------------------------------------------
    @property
    def charges_residual(self) -> bool:
        """Whether the bound and the predictive charge the prior variance the features leave
        out: under the kernel prior, unless the features span the kernel (then that variance is
        zero, and its float64 form, a difference of two sums of r², is only rounding, which a
        lift that inflates r makes large enough to steer the fit)."""
        return self.prior == "kernel" and not (self.features is not None and self.features.spans(self.kernel))

    def _cache(self):
        r"""Weights and :math:`C` of the predictive (mean :math:`\Phi w`, variance prior
        :math:`- \Phi C\Phi^\top`), recomputed whenever a field it depends on has changed
        (its entry in :attr:`fields`)."""
        def compute():
            lam, _ = vish_collapsed.spectrum(self)
            if self.q_mu is not None:
                return (*predictive_weights(lam, q=(self.q_mu, self.q_sqrt)), lam)
            return (*predictive_weights(lam, stats=self.stats, noise=self.likelihood.variance), lam)

        return self.fields.cached(self, "posterior", compute)

    @entry("read")
    def posterior_weights(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""``(w, C, lam)`` of the predictive, each feature's: mean :math:`\Phi_* w`, variance
        :math:`\Phi_*\Lambda\Phi_*^\top - \Phi_* C\Phi_*^\top` under the features prior
        (:func:`~spherelab.bounds.vish.predictive_weights`; ``lam`` :math:`= \Lambda`, ``(M,)``). For
        an additive kernel a component's block of features gives that component's posterior
        (:meth:`~spherelab.features.AdditiveHarmonics.component_slices`)."""
        self._check_fitted()
        return tuple(np.array(a) for a in self._cache())

    @entry("predict")
    def predict_f(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        r"""Posterior mean and variance of f at X, ``(N,)`` each:
        :math:`\mu = \Phi_* w`, :math:`\nu = r_*^2 \kappa(1) - \Phi_* C \Phi_*^\top` (with
        ``prior="features"`` the prior variance is :math:`\Phi_*\Lambda\Phi_*^\top`); streamed
        over chunks of rows."""
        self._check_fitted()
        if self.stats is None and self.q_mu is None:
            raise RuntimeError("VISH is not fitted: call fit(X, y) or fit_svi(X, y) first")
        X = check_finite_array(X, "X", ndim=2)
        if X.shape[1] + 1 != self.features.dim:
            raise ValueError(f"X must have {self.features.dim - 1} columns, got {X.shape[1]}")
        if X.shape[0] == 0:
            return np.zeros(0), np.zeros(0)
        with self._threads(X.shape[0]):
            return vish_rows.predict(self, X, *self._cache(), residual=self.charges_residual)

    def __repr__(self) -> str:
        return f"VISH(kernel={self.kernel!r}, max_degree={self.max_degree}, likelihood={self.likelihood!r})"
