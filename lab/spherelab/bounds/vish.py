r"""Bounds of VISH (Dutordoir et al. 2020): spherical-harmonic features with a diagonal
:math:`K_{uu} = \Lambda^{-1}`, and their derivatives with respect to the matrices they consume
(GPy's contract: the bound returns :math:`\partial\mathcal L/\partial(\cdot)`; features and
kernels chain them to their parameters).

Collapsed (Titsias 2009) bound, Gaussian noise :math:`\sigma^2`, in the well-conditioned form
:math:`B = I + \Lambda^{1/2} G \Lambda^{1/2} / \sigma^2` (eigenvalues :math:`\ge 1`):

.. math:: \mathcal L = -\tfrac n2\log 2\pi - \tfrac12\log|B| - \tfrac n2\log\sigma^2
          - \frac{y^\top y}{2\sigma^2} + \frac{\|L_B^{-1}\Lambda^{1/2}c\|^2}{2\sigma^4}
          - \frac{v\sum_n r_n^2 - \mathrm{tr}(\Lambda G)}{2\sigma^2},

with :math:`G = \Phi^\top\Phi`, :math:`c = \Phi^\top y`, :math:`v = \kappa(1)` (the prior
variance at unit radius); Dutordoir, Durrande & Hensman (2020), eqs. 3-4.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from .._validation import MAX_MAGNITUDE, check_data
from ..backend import array_module
from ..distributed import block_statistics, is_dask
from ..linalg import NumericalFailure, cholesky_or_explain
from ..sphere.lift import lift_rows
from .statistics import Statistics, streamed_statistics

__all__ = [
    "harmonic_statistics",
    "CollapsedBound",
    "collapsed_bound",
    "UncollapsedBound",
    "uncollapsed_bound",
    "uncollapsed_bound_whitened",
    "uncollapsed_bound_general",
]


@dataclass
class CollapsedBound:
    """Value and derivatives of the collapsed bound.

    Attributes
    ----------
    value : float
    dlam : numpy.ndarray
        :math:`\\partial\\mathcal L/\\partial\\lambda_m` per feature, ``(M,)``.
    dv : float
        :math:`\\partial\\mathcal L/\\partial v`, :math:`v = \\kappa(1)`.
    dnoise : float
        :math:`\\partial\\mathcal L/\\partial\\sigma^2`.
    dG : numpy.ndarray
        :math:`\\partial\\mathcal L/\\partial G` (symmetric), ``(M, M)``.
    dc : numpy.ndarray
        :math:`\\partial\\mathcal L/\\partial c`, ``(M,)``.
    dsum_r2 : float
    error : float
        First-order estimate of the bound's error from the statistics' rounding
        (:attr:`Statistics.rounding` :math:`\\rho`), the errors of the entries taken as independent:
        :math:`\\rho\\,\\big(\\sum_{ij}(\\partial_{G_{ij}}\\mathcal L\\,d_id_j)^2
        + y^\\top y\\sum_i(\\partial_{c_i}\\mathcal L\\,d_i)^2\\big)^{1/2}`, :math:`d_i = \\sqrt{G_{ii}}`;
        0 for float64 statistics.
    condition : float
        :math:`\\|B\\|_1\\|B^{-1}\\|_1`, :math:`B = I + \\Lambda^{1/2}G\\Lambda^{1/2}/\\sigma^2` (computed with
        ``error``): beyond about :math:`10/\\rho` the first-order estimate no longer holds.
    """

    value: float
    dlam: np.ndarray
    dv: float
    dnoise: float
    dG: np.ndarray
    dc: np.ndarray
    dsum_r2: float
    error: float = 0.0
    condition: float = 0.0


def collapsed_bound(
    lam: np.ndarray, v: float, noise: float, stats: Statistics, *, gradients: bool = True,
    residual: bool = True,
) -> CollapsedBound | float:
    r"""The collapsed bound for features with prior variances ``lam`` (:math:`K_{uu}^{-1}`
    diagonal, all > 0), prior variance ``v`` at unit radius and noise variance ``noise``.

    ``residual=False`` drops the trace term :math:`-\tfrac1{2\sigma^2}\mathrm{tr}(K_{ff} - Q_{ff})`:
    the bound is then the exact log marginal likelihood of the finite-rank prior spanned by
    the features, :math:`k(x, x') = r r' \sum_m \lambda_m \phi_m(\hat x)\phi_m(\hat x')`.

    The :math:`\lambda` derivative is computed as :math:`\partial\mathcal L/\partial\log\lambda_m
    = -\tfrac{(B^{-1}SGS)_{mm}}{2\sigma^2} + \tfrac{(B^{-1}Sc)_m^2}{2\sigma^4}
    + \tfrac{\lambda_m G_{mm}}{2\sigma^2}` (:math:`S = \Lambda^{1/2}`), free of the cancellation
    of the naive form for tiny eigenvalues.
    """
    lam = np.asarray(lam, dtype=np.float64)
    if np.any(lam <= 0) or not np.all(np.isfinite(lam)):
        raise ValueError("lam (the features' prior variances) must be finite and > 0")
    if not noise > 0:
        raise ValueError(f"noise variance must be > 0, got {noise}")
    G, c, n = stats.G, stats.c, stats.n
    s = np.sqrt(lam)
    SGS = G * np.outer(s, s)
    B = SGS / noise
    B[np.diag_indices_from(B)] += 1.0
    LB = cholesky_or_explain(
        B, "B = I + Lambda^1/2 G Lambda^1/2 / noise",
        "Likely causes: NaN/inf in the data, a noise variance near 0 or huge, or inputs far "
        "outside the scale the kernel expects; standardise X and y.",
    )
    Sc = s * c
    w = solve_triangular(LB, Sc, lower=True)
    logdetB = 2.0 * np.sum(np.log(np.diag(LB)))
    trace_lg = float(np.dot(lam, np.diag(G)))
    on = 1.0 if residual else 0.0  # the trace term's weight
    value = (
        -0.5 * n * np.log(2 * np.pi)
        - 0.5 * logdetB
        - 0.5 * n * np.log(noise)
        - 0.5 * stats.yy / noise
        + 0.5 * float(w @ w) / noise**2
        - 0.5 * on * (v * stats.sum_diag - trace_lg) / noise
    )
    if not gradients and not stats.rounding:
        return float(value)
    Binv = cho_solve((LB, True), np.eye(lam.size))
    z = Binv @ Sc  # B^{-1} S c ; a = A^{-1} c = S z
    a = s * z
    BinvSGS = Binv @ SGS
    dloglam = -np.diag(BinvSGS) / (2 * noise) + z**2 / (2 * noise**2) + on * lam * np.diag(G) / (2 * noise)
    dlam = dloglam / lam
    Ainv = Binv * np.outer(s, s)  # A^{-1} = S B^{-1} S
    dA = -0.5 * Ainv - np.outer(a, a) / (2 * noise**2)
    dG = dA / noise + on * np.diag(lam) / (2 * noise)
    dc = a / noise**2
    tr_AinvG = float(np.trace(BinvSGS))
    aGa = float(z @ SGS @ z)
    dnoise = (
        (0.5 * tr_AinvG + 0.5 * aGa / noise**2) / noise**2
        - 0.5 * n / noise
        + 0.5 * stats.yy / noise**2
        - float(Sc @ z) / noise**3
        + 0.5 * on * (v * stats.sum_diag - trace_lg) / noise**2
    )
    d = np.sqrt(np.maximum(np.diag(G), 0.0))
    error = condition = 0.0
    if stats.rounding:
        error = stats.rounding * float(np.sqrt(np.sum((dG * np.outer(d, d)) ** 2) + stats.yy * np.sum((dc * d) ** 2)))
        condition = float(np.abs(B).sum(axis=0).max() * np.abs(Binv).sum(axis=0).max())
    if not gradients:
        return float(value)
    return CollapsedBound(
        value=float(value),
        dlam=dlam,
        dv=-0.5 * on * stats.sum_diag / noise,
        dnoise=float(dnoise),
        dG=dG,
        dc=dc,
        dsum_r2=-0.5 * on * v / noise,
        error=error,
        condition=condition,
    )


@dataclass
class UncollapsedBound:
    """Value and derivatives of the uncollapsed (SVGP) ELBO for one minibatch.

    ``dm`` (M,), ``dL`` (M, M) lower-triangular, ``dlam`` (M,), ``dv``, ``dnoise``, and
    ``dPhi`` (B, M) when asked for (``phi_gradient=True``; trainable features chain it)."""

    value: float
    dm: np.ndarray
    dL: np.ndarray
    dlam: np.ndarray
    dv: float
    dnoise: float
    dPhi: np.ndarray | None = None


def uncollapsed_bound(
    lam: np.ndarray,
    v: float,
    noise: float,
    m: np.ndarray,
    L: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
    phi_gradient: bool = False,
) -> UncollapsedBound:
    r"""SVGP ELBO with :math:`q(u) = N(m, LL^\top)`, :math:`K_{uu} = \Lambda^{-1}`, Gaussian noise,
    on a minibatch (``Phi`` ``(B, M)``, ``y``, ``r2`` = :math:`r_n^2`), the data term scaled by
    ``num_data / B`` (an unbiased estimate of the full-data term):

    .. math:: \mathcal L = \tfrac NB \sum_{n \in \text{batch}} \Big[-\tfrac12\log 2\pi\sigma^2
              - \frac{(y_n - \mu_n)^2 + \nu_n}{2\sigma^2}\Big]
              - \tfrac12\big[\mathrm{tr}(\Lambda S) + m^\top\Lambda m - M - \log|S|
              - \log|\Lambda|\big],

    :math:`\mu = \Phi\Lambda m`, :math:`\nu_n = r_n^2 v - \Phi_n\Lambda\Phi_n^\top +
    \|\Phi_n\Lambda L\|^2` (Dutordoir et al. 2020 eq. 1, ``docs/design.md`` §5); ``residual=False``
    drops :math:`r_n^2 v - \Phi_n\Lambda\Phi_n^\top` (the finite-rank prior of the features,
    :func:`collapsed_bound`).
    """
    lam = np.asarray(lam, dtype=np.float64)
    B, M = Phi.shape
    scale = num_data / B
    L = np.tril(L)
    PL = Phi * lam  # Phi Lambda
    mu = PL @ m
    Q = PL @ L
    on = 1.0 if residual else 0.0
    nu = on * (r2 * v - np.einsum("nm,nm->n", PL, Phi)) + np.einsum("nk,nk->n", Q, Q)
    resid = y - mu
    data = -0.5 * B * np.log(2 * np.pi * noise) - 0.5 * float(resid @ resid + nu.sum()) / noise
    diagL = np.diag(L)
    if np.any(diagL <= 0):
        raise ValueError("L must have a positive diagonal (the Cholesky factor of S)")
    S_diag = np.einsum("ij,ij->i", L, L)
    kl = 0.5 * (float(lam @ S_diag) + float(m @ (lam * m)) - M - 2 * np.sum(np.log(diagL)) - np.sum(np.log(lam)))
    value = scale * data - kl

    dmu = resid / noise  # dE/dmu
    dnu = -0.5 / noise  # dE/dnu (same for every n)
    dm = scale * (lam * (Phi.T @ dmu)) - lam * m
    dL = np.tril(scale * dnu * 2.0 * (PL.T @ Q) - lam[:, None] * L + np.diag(1.0 / diagL))
    QLt = Q @ L.T
    dlam = scale * (
        m * (Phi.T @ dmu) + dnu * (-on * np.einsum("nm,nm->m", Phi, Phi) + 2.0 * np.einsum("nm,nm->m", Phi, QLt))
    ) - 0.5 * (S_diag + m * m - 1.0 / lam)
    dv = on * scale * dnu * float(r2.sum())
    dnoise = scale * (-0.5 * B / noise + 0.5 * float(resid @ resid + nu.sum()) / noise**2)
    dPhi = None
    if phi_gradient:  # mu = Phi Lambda m, nu = on (r2 v - Phi Lambda Phi^T) + |Phi Lambda L|^2
        dPhi = scale * (np.outer(dmu, lam * m) + dnu * 2.0 * (QLt - on * Phi) * lam)
    return UncollapsedBound(float(value), dm, dL, dlam, dv, float(dnoise), dPhi)


def uncollapsed_bound_whitened(
    lam: np.ndarray,
    v: float,
    noise: float,
    m_w: np.ndarray,
    L_w: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
) -> UncollapsedBound:
    r""":func:`uncollapsed_bound` in whitened coordinates: the prior of u is
    :math:`N(0, K_{uu}) = N(0, \Lambda^{-1})`, so :math:`u = \Lambda^{-1/2}w`,
    :math:`m = \Lambda^{-1/2} m_w`, :math:`L = \Lambda^{-1/2} L_w`, and the prior is
    :math:`m_w = 0`, :math:`L_w = I` (the KL term vanishes there). Every variational parameter is
    O(1) whatever the spectrum's decay. ``dm``/``dL`` are with respect to :math:`m_w, L_w`;
    ``dlam`` includes the dependence of :math:`m, L` on :math:`\lambda`
    (:math:`\partial m/\partial\lambda = -m/2\lambda`)."""
    lam = np.asarray(lam, dtype=np.float64)
    s = 1.0 / np.sqrt(lam)
    m = s * m_w
    L = s[:, None] * np.tril(L_w)
    res = uncollapsed_bound(lam, v, noise, m, L, Phi, y, r2, num_data, residual)
    dlam = res.dlam - (res.dm * m + np.sum(res.dL * L, axis=1)) / (2.0 * lam)
    return UncollapsedBound(res.value, s * res.dm, np.tril(s[:, None] * res.dL), dlam, res.dv, res.dnoise)


def uncollapsed_bound_general(
    lam: np.ndarray,
    v: float,
    likelihood,
    m: np.ndarray,
    L: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
    phi_gradient: bool = False,
) -> UncollapsedBound:
    """:func:`uncollapsed_bound` for any likelihood with ``variational_expectations`` (the data
    term from its per-point expectations and their ``mu``/``var`` derivatives). ``dnoise`` is 0
    (a likelihood's own parameters are chained by the caller)."""
    lam = np.asarray(lam, dtype=np.float64)
    B, M = Phi.shape
    scale = num_data / B
    L = np.tril(L)
    diagL = np.diag(L)
    if np.any(diagL <= 0):
        raise ValueError("L must have a positive diagonal (the Cholesky factor of S)")
    PL = Phi * lam
    mu = PL @ m
    Q = PL @ L
    on = 1.0 if residual else 0.0
    var = on * (r2 * v - np.einsum("nm,nm->n", PL, Phi)) + np.einsum("nk,nk->n", Q, Q)
    e, dmu, dvar = likelihood.variational_expectations(y, mu, np.maximum(var, 1e-300))
    S_diag = np.einsum("ij,ij->i", L, L)
    kl = 0.5 * (float(lam @ S_diag) + float(m @ (lam * m)) - M - 2 * np.sum(np.log(diagL)) - np.sum(np.log(lam)))
    value = scale * float(e.sum()) - kl
    dm = scale * (lam * (Phi.T @ dmu)) - lam * m
    dL = np.tril(scale * 2.0 * (PL.T @ (dvar[:, None] * Q)) - lam[:, None] * L + np.diag(1.0 / diagL))
    QLt = Q @ L.T
    dlam = scale * (
        m * (Phi.T @ dmu)
        + (dvar[:, None] * (-on * Phi * Phi + 2.0 * Phi * QLt)).sum(axis=0)
    ) - 0.5 * (S_diag + m * m - 1.0 / lam)
    dv = on * scale * float(dvar @ r2)
    dPhi = None
    if phi_gradient:
        dPhi = scale * (np.outer(dmu, lam * m) + dvar[:, None] * 2.0 * (QLt - on * Phi) * lam)
    return UncollapsedBound(float(value), dm, dL, dlam, dv, 0.0, dPhi)


def harmonic_statistics(kernel, features, X: Any, y: Any, *, chunk_size: int | None = None,
                        progress: bool | None = None, ops=None, gram_dtype: str = "float64") -> Statistics:
    r"""VISH's sufficient statistics in one streamed pass (:func:`~spherelab.bounds.streamed_statistics`):
    :math:`G = K_{uf}K_{fu}`, :math:`c = K_{uf}y`, :math:`y^\top y` and ``sum_diag`` =
    :math:`\sum_n r_n^2`, over the features kept by ``features.bind``. Memory
    :math:`O(\text{chunk} \cdot M + M^2)` whatever N. A Dask ``X`` is summed block by block
    (:func:`spherelab.distributed.block_statistics`) on the active scheduler.

    ``gram_dtype="float32"`` forms each chunk's :math:`AA^\top` and :math:`Ay` in single
    precision (SGEMM, about twice DGEMM's rate), accumulated in float64; the harmonics, the lift
    and :math:`y^\top y` stay in float64. Its error is measured in ``benchmarks/RESULTS.md``
    ("float32 Gram pass")."""
    if gram_dtype not in ("float64", "float32"):
        raise ValueError(f"gram_dtype must be 'float64' or 'float32', got {gram_dtype!r}")
    if is_dask(X):  # blockwise with this very function, summed on the active scheduler
        return block_statistics(functools.partial(harmonic_statistics, kernel, features, chunk_size=chunk_size,
                                                  gram_dtype=gram_dtype), X, y, progress)
    X, y = check_data(X, y)
    single = gram_dtype == "float32"

    def columns(Xc):
        ev = features.evaluate(kernel, Xc)
        A = features.Kuf_from(ev)
        return (A.astype(np.float32) if single else A), ev.r * ev.r

    def load(Xc):  # the raw rows travel: the lift runs where the columns are computed
        return (Xc,)

    kernel.lift(X[:1])  # the input scale's shape and the bias's magnitude, with their messages
    scale = np.asarray(kernel.input_scale, dtype=np.float64)
    on_device: dict = {}
    rejected: list = []  # per chunk, a device scalar: rows whose lift overflows or vanishes

    def device_columns(Xd):  # where the device keeps its arrays
        xp = array_module(Xd)
        s = on_device.get("scale")
        if s is None:
            s = on_device["scale"] = xp.asarray(scale)
            on_device["xp"] = xp
        with np.errstate(all="ignore"):  # rejected rows are reported after the pass
            r, Xh, big = lift_rows(xp, Xd, s, kernel.bias)
            ok = (big <= MAX_MAGNITUDE) & (r > 0)
        rejected.append(xp.count_nonzero(~ok))
        # a rejected row contributes nothing (no NaN reaches the sums); the pass then raises
        r = xp.where(ok, r, 0.0)
        Xh = xp.where(ok[:, None], Xh, 1.0 / np.sqrt(Xh.shape[1]))
        A = features.device_Kuf(ops, Xh, r)
        return (A.astype(np.float32) if single else A), r * r

    if ops is None:
        from ..backend import resolve

        ops = resolve("cpu")
    chunk_size = chunk_size or ops.pass_rows(features.num_features)
    stats = streamed_statistics(columns, X, y.astype(np.float32) if single else y, chunk_size=chunk_size,
                                progress=progress, desc="harmonic statistics", ops=ops,
                                device_columns=(load, device_columns))
    if rejected and int(ops.to_host(on_device["xp"].stack(rejected)).sum()):
        kernel.check_lift(X)  # raises the lift's own error, naming the row
        raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")
    if single:
        if not (np.all(np.isfinite(stats.G)) and np.all(np.isfinite(stats.c))):
            raise NumericalFailure("the float32 statistics overflowed (lifted inputs too large for single "
                                   "precision): use gram_dtype='float64' or standardise the inputs")
        stats.yy = float(y @ y)  # in double precision, like everything outside the products
        # the typical error of an entry relative to sqrt(G_ii G_jj): measured 0.02-0.03 float32
        # eps (2e5 rows, chunks of 1 024 and 16 384: RESULTS.md, "float32 bound"); eps is the
        # margin
        stats.rounding = float(np.finfo(np.float32).eps)
    return stats
