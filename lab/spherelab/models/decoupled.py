r"""The orthogonally-decoupled SVGP with inter-domain features (Tiao, thesis §3.3-3.4): u from any
:class:`~spherelab.features.Features`, K orthogonal inducing points v; the activated SVGP is
K = 0. The bound and its matrix derivatives live in :mod:`spherelab.bounds.decoupled`, the Gaussian
statistics path (cores, Dask, a device) in :mod:`spherelab.rows.decoupled` and the chain into the parameters
in :mod:`spherelab.rows.gradients`; this module holds the model state."""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator

import numpy as np
from scipy.linalg import cho_solve

from .._state import Fields
from .._validation import check_allocation, check_bool, check_finite_array, check_int, check_nonnegative, check_seed
from ..bounds.decoupled import (
    HINT_UU,
    HINT_VV,
    OrthogonalBound,
    decoupled_predictive,
    joint_cholesky,
    orthogonal_bound,
    orthogonal_bound_whitened,
    whitened_optimum,
)
from ..distributed import rows, subsample_rows
from ..features import Features, HarmonicFeatures, greedy_variance
from ..kernels import ZonalKernel
from ..likelihoods import Gaussian
from ..linalg import cholesky_or_explain
from ..parameters import Param, kernel_params, likelihood_params
from ..rows.decoupled import StatisticsPath
from ..rows.gradients import DecoupledGradients
from . import saved
from .base import entry
from .sparse import SparseModel

__all__ = ["OrthogonalSVGP", "ActivatedSVGP"]



class OrthogonalSVGP(SparseModel):
    r"""SVGP with inter-domain features :math:`u` and K orthogonal inducing points
    (the orthogonally-decoupled posterior of Tiao, thesis eqs. 3.11-3.12).

    Parameters
    ----------
    kernel
        A :class:`~spherelab.kernels.ZonalKernel` (its ``bias`` and ``input_scale`` are trained).
    features
        :class:`~spherelab.features.ActivatedFeatures`, :class:`~spherelab.features.InducingPoints`
        or :class:`~spherelab.features.HarmonicFeatures` (spherical harmonics: VISH's features
        with orthogonal points).
    num_orthogonal
        K (0: the plain SVGP / activated SVGP).
    likelihood
        :class:`~spherelab.likelihoods.Gaussian` (default, closed-form expectations) or
        :class:`~spherelab.likelihoods.Bernoulli` (Gauss-Hermite).
    orthogonal_inputs
        ``(K, D)`` initial W, or how :meth:`initialise` chooses K training inputs: ``"random"``
        (default) or ``"greedy"``, where the process given the features is least explained
        (:func:`~spherelab.features.greedy_variance`, Burt, Rasmussen & van der Wilk 2020, Alg. 1,
        on the residual kernel :math:`k - k_{\cdot u}K_{uu}^{-1}k_{u\cdot}` of v's prior; among at
        most :attr:`greedy_candidates` rows drawn at random).
    whiten
        Parameterise q in whitened coordinates (:func:`orthogonal_bound_whitened`; default):
        ``m_u``, ``L_u`` describe :math:`\tilde u = L_{uu}^{-1}u` and ``m_v``, ``L_v``
        :math:`\tilde v = L_{vv}^{-1}v'`, both with N(0, I) priors. Needed when :math:`K_{uu}`
        is ill-conditioned (smooth activations: softplus units span few effective dimensions).
    sufficient_statistics
        Gaussian likelihood, whitened (the defaults): evaluate the ELBO and its gradient from
        :math:`\Phi = AA^\top` and :math:`Ay`, :math:`A = L_J^{-1}K_{pf}`
        (:func:`gaussian_stats_bound_whitened`),
        accumulated over chunks of rows, so memory does not grow with N and each step does three
        O((M + K)^2 N) products instead of about eight; used for batches of at least
        3(M + K) rows. ``False``: always the per-row bound (:func:`orthogonal_bound_whitened`,
        same value); Bernoulli always uses it.
    device
        ``"cpu"`` (default), ``"gpu"`` or ``"auto"`` (:func:`spherelab.backend.resolve`).

    Notes
    -----
    Trainable: ``m_u``, ``L_u`` (:math:`C_u = L_uL_u^\top`), ``m_v``, ``L_v``, ``W``, the feature
    parameters (unit weights or inducing inputs), the kernel's variance, shape parameters, bias
    and input scale, and the Gaussian noise variance — all with analytic gradients
    (:meth:`elbo_and_gradient`).

    Examples
    --------
    >>> import spherelab as sl
    >>> X, y = sl.datasets.snelson_like(100)
    >>> model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.features.InducingPoints(X[:8]), 4).fit(X, y, maxiter=20)
    >>> model.W.shape, model.predict_y(X[:3])[0].shape     # K = 4 orthogonal inputs
    ((4, 1), (3,))
    """

    #: entries of one row chunk, (M + K) x rows: blocks of 16 MB
    chunk_entries = 1 << 21
    #: A = L_J^-1 K_pf is kept between the forward and the backward pass up to 128 MB
    keep_entries = 1 << 24
    #: rows among which orthogonal_inputs="greedy" chooses (a random subset of larger data)
    greedy_candidates = 20_000

    fields = SparseModel.fields + Fields(
        config=("kernel", "features", "num_orthogonal", "likelihood", "whiten", "jitter", "sufficient_statistics"),
        fitted=("W", "orthogonal_init", "m_u", "L_u", "m_v", "L_v", "input_dim=_input_dim"),
        held=("held=_held",))

    def __init__(
        self,
        kernel: ZonalKernel,
        features,
        num_orthogonal: int = 0,
        likelihood=None,
        *,
        orthogonal_inputs: Any = None,
        whiten: bool = True,
        jitter: float = 1e-6,
        sufficient_statistics: bool = True,
        device: str = "cpu",
    ) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab ZonalKernel, got {kernel!r}")
        if not isinstance(features, Features):
            raise TypeError(f"features must be spherelab Features (harmonics, phases, activated units, inducing "
                            f"points), got {features!r}")
        self.kernel = kernel
        self.features = features
        self.num_orthogonal = check_int(num_orthogonal, "num_orthogonal", minimum=0)
        check_allocation(16.0 * float(self.num_orthogonal) ** 2, f"num_orthogonal = {self.num_orthogonal:,}",
                         "use fewer orthogonal inducing inputs")  # (its K x K factor and covariance)
        self._set_likelihood(likelihood)
        self._set_device(device)
        self.orthogonal_init = "random"
        if orthogonal_inputs is None or isinstance(orthogonal_inputs, str):
            if orthogonal_inputs not in (None, "random", "greedy"):
                raise ValueError(f"orthogonal_inputs must be a (K, D) array, 'random' or 'greedy', got "
                                 f"{orthogonal_inputs!r}")
            self.orthogonal_init, self.W = orthogonal_inputs or "random", None
        else:
            self.W = check_finite_array(orthogonal_inputs, "orthogonal_inputs", ndim=2).copy()
        if self.W is not None and self.W.shape[0] != self.num_orthogonal:
            raise ValueError(f"orthogonal_inputs must have num_orthogonal = {self.num_orthogonal} rows")
        self.whiten = check_bool(whiten, "whiten")
        self.jitter = check_nonnegative(jitter, "jitter")
        self.m_u = self.L_u = self.m_v = self.L_v = None
        self.optimizer_result = None
        self.sufficient_statistics = check_bool(sufficient_statistics, "sufficient_statistics")

    @classmethod
    def from_vish(cls, model, num_orthogonal: int, *, orthogonal_inputs: Any = "greedy",
                  **options: Any) -> "OrthogonalSVGP":
        r"""Spherical features and orthogonal inducing points together (Tiao, thesis §3.4: u the
        features, v K inducing points in the orthogonal complement), started from a fitted
        :class:`~spherelab.VISH` with ``prior="kernel"`` (the hybrid's bound is that VISH's bound
        plus v's terms; the features prior's hyper-parameters describe a truncated kernel): a copy
        of its kernel (lift and spectrum), its noise and its features, with ``num_orthogonal``
        inputs chosen by ``orthogonal_inputs`` (default: by greedy conditional variance given the
        features, where the harmonics leave the most unexplained).
        ``options`` go to the constructor. Fit it with :meth:`fit` on the same data.

        Examples
        --------
        >>> import spherelab as sl
        >>> X, y = sl.datasets.synthetic_regression(300, 2, seed=0)
        >>> vish = sl.VISH(sl.kernels.Matern(1.5), 3, prior="kernel").fit(X, y)
        >>> hybrid = sl.OrthogonalSVGP.from_vish(vish, 16).fit(X, y, maxiter=30)
        >>> hybrid.features.num_features + hybrid.num_orthogonal      # 16 harmonics on S^2, 16 points
        32
        """
        from .vish import VISH

        if not isinstance(model, VISH) or not model._initialised() or model.q_mu is not None:
            raise ValueError("model must be a VISH fitted with fit() (the collapsed bound, Gaussian noise), "
                             f"got {model!r}")
        if model.prior != "kernel":
            raise ValueError("model must be a VISH with prior='kernel': the hybrid extends that bound, and the "
                             "features prior's hyper-parameters weight a truncated kernel; fit "
                             "VISH(..., prior='kernel') first, or use spherelab.selection.fit_hybrid")
        features = copy.deepcopy(model.features)
        if isinstance(features, HarmonicFeatures):  # bound afresh to the copied kernel
            features = HarmonicFeatures(features.max_degree)
        return cls(copy.deepcopy(model.kernel), features, num_orthogonal, copy.deepcopy(model.likelihood),
                   orthogonal_inputs=orthogonal_inputs, **options)

    def _num_inducing(self) -> int:
        return self.features.num_features + self.num_orthogonal

    @classmethod
    def _load_state(cls, state):
        return saved.load_decoupled(cls, state)

    # ---- set-up ---------------------------------------------------------------------------
    def initialise(self, X: np.ndarray, seed: int = 0) -> "OrthogonalSVGP":
        """Feature parameters, W (K distinct training inputs) and q at the prior
        (:math:`m = 0`, :math:`C_u = K_{uu}`, :math:`C_v = S_{vv}`)."""
        rng = np.random.default_rng(check_seed(seed))
        self._input_dim = X.shape[1]
        self.features.initialise(X.shape[1] + 1, rng)
        self.features.bind(self.kernel)
        K = self.num_orthogonal
        if self.W is None:
            if K > X.shape[0]:
                raise ValueError(f"num_orthogonal = {K} exceeds the number of training rows {X.shape[0]}")
            index = rng.choice(X.shape[0], K, replace=False) if K else np.zeros(0, dtype=int)
            if self.orthogonal_init == "greedy" and K:
                self.W = self._greedy_inputs(X, K, int(rng.integers(2**31)))
            else:  # in the order drawn (Dask: gathered block by block)
                self.W = rows(X).gather(index) if K else np.zeros((0, X.shape[1]))
        elif self.W.shape[1] != X.shape[1]:
            raise ValueError(f"orthogonal_inputs have {self.W.shape[1]} columns but X has {X.shape[1]}")
        M = self.features.num_features
        Kuu = self._with_jitter(self.features.Kuu(self.kernel, ops=self.ops))
        self.m_u = np.zeros(M)
        self.L_u = cholesky_or_explain(Kuu, "Kuu", HINT_UU)
        self.m_v = np.zeros(K)
        if self.whiten:  # the prior in whitened coordinates
            self.L_u = np.eye(M)
            self.L_v = np.eye(K)
        elif K:
            Kvu = self.features.Kuf(self.kernel, self.W, ops=self.ops).T
            Svv = self._with_jitter(self.kernel.K(self.W, ops=self.ops)) - Kvu @ cho_solve((self.L_u, True), Kvu.T)
            self.L_v = cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", HINT_VV)
        else:
            self.L_v = np.zeros((0, 0))
        return self

    def _greedy_inputs(self, X, K: int, seed: int) -> np.ndarray:
        """K rows of X (a random subset of :attr:`greedy_candidates` rows when X is larger) chosen by
        greedy conditional variance given the features (already bound to the kernel)."""
        X = subsample_rows(X, X[:, 0], self.greedy_candidates, seed)[0]
        return X[greedy_variance(self.kernel, X, K, self.features, jitter=self.jitter, ops=self.ops)].copy()

    # ---- matrices -------------------------------------------------------------------------
    def _matrices(self, X):
        Kuu, Kvv, Kvu = self.inducing_matrices()
        Kuf = self.features.Kuf(self.kernel, X, ops=self.ops)
        Kvf = self.kernel.K(self.W, X, ops=self.ops) if self.num_orthogonal else np.zeros((0, X.shape[0]))
        return Kuu, Kuf, self.kernel.diag(X), Kvv, Kvu, Kvf

    def bound(self, X, y, num_data: int | None = None) -> OrthogonalBound:
        """:func:`orthogonal_bound` at the current parameters on (X, y)."""
        Kuu, Kuf, kff, Kvv, Kvu, Kvf = self._matrices(X)
        fn = orthogonal_bound_whitened if self.whiten else orthogonal_bound
        return fn(Kuu, Kuf, kff, self.m_u, self.L_u, Kvv, Kvu, Kvf, self.m_v, self.L_v,
                                y, self.likelihood, X.shape[0] if num_data is None else num_data)

    @entry(threads="rows")
    def elbo_and_gradient(self, X, y, num_data: int | None = None) -> tuple[float, dict[str, Any]]:
        """The ELBO (minibatch estimate if ``num_data`` > len(y)) and its gradient with respect to
        every parameter, as a dict. Gaussian likelihood, whitened: from the batch's sufficient
        statistics streamed over row chunks (:func:`gaussian_stats_bound_whitened`); a Dask ``X``
        in two passes over its blocks (the statistics, then the gradient's sums over the rows)."""
        path = StatisticsPath(self)
        rowpass = path.rows_pass(X, y)
        if not rowpass.per_row:
            n = X.shape[0]
            return path.elbo_and_gradient(rowpass, n, n if num_data is None else num_data)
        X = rowpass.X
        res = self.bound(X, y, num_data)
        grads = DecoupledGradients(self)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        grads.rows(X, res.dKuf, res.dKvf, res.dkff)
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    @entry("fit", threads="rows")
    def optimal_q(self, X: Any, y: Any) -> "OrthogonalSVGP":
        r"""Set q to the maximiser of the ELBO for a Gaussian likelihood at the current kernel,
        noise, features and orthogonal inputs (Titsias' optimum for the decoupled family).

        In whitened coordinates :math:`[u; v] = L_J[\tilde u; \tilde v]` the bound depends on the
        data through :math:`\Phi = AA^\top` and :math:`\beta = Ay`, :math:`A = L_J^{-1}K_{pf}`
        only (:func:`gaussian_stats_bound_whitened`); with :math:`\Lambda = I + \Phi/\sigma^2`
        the optimal means are :math:`\Lambda^{-1}\beta/\sigma^2` (u and v jointly: the data
        couple them) and, q(u) and q(v') being independent, the optimal covariances are the
        inverses of the diagonal blocks :math:`\Lambda_{uu}`, :math:`\Lambda_{vv}`. Without
        whitening they are mapped by :math:`L_k`, :math:`L_s`. One streamed pass over the rows
        (O(N(M + K)^2), memory independent of N). :meth:`fit` starts from this q by default.
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("optimal_q needs a Gaussian likelihood")
        X, y = self._check_data(X, y)
        if not self._initialised():
            self.initialise(X)
        M = self.features.num_features
        LJ = joint_cholesky(*self.inducing_matrices())
        st = StatisticsPath(self).statistics(X, y, LJ)
        m, L_u, L_v = whitened_optimum(st.G, st.c, self.likelihood.variance, M)
        Lk, Ls = LJ[:M, :M], LJ[M:, M:]
        if self.whiten:
            self.m_u, self.L_u, self.m_v, self.L_v = m[:M], L_u, m[M:], L_v
        else:
            self.m_u, self.L_u, self.m_v, self.L_v = Lk @ m[:M], Lk @ L_u, Ls @ m[M:], Ls @ L_v
        self._X, self._y = X, y
        return self

    def _check_data(self, X, y):
        return rows(X, y).require(StatisticsPath(self).blocks_refused()).checked(self.likelihood)

    # ---- the statistics path, composed (rows.decoupled) --------------------------------
    _held: tuple | None = None  # (X, y, their pass) while a fit holds its rows

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """One fit's pass over its rows, chosen once (:meth:`StatisticsPath.hold`)."""
        self._held = StatisticsPath(self).hold(X, y)
        try:
            yield
        finally:
            self._held = None

    def _svi_steps(self, X, y, lr: float):
        steps = StatisticsPath(self).svi_steps(X, y, lr)  # resident on the model's device where it can be
        return steps if steps is not None else super()._svi_steps(X, y, lr)

    def _collapsed_elbo_and_gradient(self, X, y):
        return StatisticsPath(self).collapsed_elbo_and_gradient(X, y)

    def inducing_matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r""":math:`K_{uu}` and :math:`K_{vv}` (each with the jitter) and :math:`K_{vu}`, the prior
        covariances of the M features u and the K orthogonal points v (``(M, M)``, ``(K, K)``,
        ``(K, M)``; K = 0 without orthogonal points)."""
        Kuu = self._with_jitter(self.features.Kuu(self.kernel, ops=self.ops))
        if self.num_orthogonal:
            Kvv = self._with_jitter(self.kernel.K(self.W, ops=self.ops))
            return Kuu, Kvv, self.features.Kuf(self.kernel, self.W, ops=self.ops).T
        return Kuu, np.zeros((0, 0)), np.zeros((0, Kuu.shape[0]))

    # ---- parameters -----------------------------------------------------------------------
    def _registry(self) -> list[Param]:
        def attr(name, kind="free"):
            return Param(name, lambda: getattr(self, name), lambda v: setattr(self, name, v), kind)

        def renamed(public, name, kind):
            return Param(public, lambda: getattr(self, name), lambda v: setattr(self, name, v), kind)

        feats = self.features
        reg = [renamed("q_mu", "m_u", "free"), renamed("q_sqrt", "L_u", "tril"),
               renamed("q_mu_orth", "m_v", "free"), renamed("q_sqrt_orth", "L_v", "tril")]
        if feats.get_params().size:
            reg.append(Param("features", feats.get_params, feats.set_params))
        if self.num_orthogonal:
            reg.append(attr("W"))
        return reg + kernel_params(self.kernel) + likelihood_params(self.likelihood)

    def _initialised(self) -> bool:
        return self.m_u is not None

    @entry("read", threads="rows")
    def elbo(self, X: Any = None, y: Any = None) -> float:
        """The ELBO on all of (X, y) (default: the training data)."""
        self._check_fitted()
        X, y = self._check_data(*self._training_data(X, y))
        if StatisticsPath(self).use_stats(X.shape[0]):
            return self.elbo_and_gradient(X, y)[0]  # streamed: memory independent of N
        return self.bound(X, y).value

    # ---- prediction -----------------------------------------------------------------------
    def _predictive(self, X: np.ndarray):
        """The one predictive (:func:`~spherelab.bounds.decoupled_predictive`) at X."""
        Kuu, Kuf, kff, Kvv, Kvu, Kvf = self._matrices(X)
        return decoupled_predictive(Kuu, Kuf, kff, self.m_u, self.L_u, Kvv, Kvu, Kvf, self.m_v, self.L_v,
                                    whiten=self.whiten)

    @entry(threads="rows")
    def variance_terms(self, X: Any) -> dict[str, np.ndarray]:
        r"""The five terms of the predictive variance (Tiao, thesis eq. 3.12, Fig. 3.8), each ``(N,)``:
        ``Kff``, ``-Qff``, ``+QCuQ``, ``-SfvSvv^-1Svf``, ``+SfvSvv^-1CvSvv^-1Svf``; they sum to
        the variance of :meth:`predict_f` (before its clipping at 0)."""
        self._check_fitted()
        return self._predictive(self._check_inputs(X)).terms

    @entry("predict", threads="rows")
    def predict_f(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of f, ``(N,)`` each (chunked over rows)."""
        self._check_fitted()
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        X = self._check_inputs(X)
        if X.shape[0] == 0:
            return np.zeros(0), np.zeros(0)
        means, varis = [], []
        for s in range(0, X.shape[0], chunk_size):
            pred = self._predictive(X[s : s + chunk_size])
            means.append(pred.mean)
            varis.append(np.maximum(pred.var, 0.0))
        return np.concatenate(means), np.concatenate(varis)


class ActivatedSVGP(OrthogonalSVGP):
    """The activated SVGP (Dutordoir et al. 2021; Tiao, thesis §3.2.2): :class:`OrthogonalSVGP` with
    ``num_orthogonal = 0``."""

    def __init__(self, kernel: ZonalKernel, features, likelihood=None, **options: Any) -> None:
        super().__init__(kernel, features, 0, likelihood, **options)
