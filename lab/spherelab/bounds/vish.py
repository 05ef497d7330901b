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

Here with the statistics it consumes — of every row in one streamed pass
(:func:`harmonic_statistics`), or of a subsample evaluated once (:func:`lift_statistics`) — and
the chain of its matrix gradients into the lift and the features' directions
(:func:`lift_gradient`): everything :meth:`spherelab.VISH.fit` evaluates. The uncollapsed
bounds of its minibatch fit are in :mod:`.vish_svi`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import check_data
from ..backend.ops import as_operations
from ..chunks import host_slices
from ..distributed import block_statistics, is_dask
from ..linalg import NumericalFailure, chol_inverse, cholesky_or_explain
from .collapsed import collapsed_terms
from .statistics import Statistics, check_trace_term, gram_threads, pass_sums, row_chunks
from .sums import GradientSums

__all__ = ["CollapsedBound", "collapsed_bound", "LAMBDA_FLOOR", "clamp_spectrum",
           "predictive_weights", "predict_rows", "harmonic_statistics", "lift_statistics", "lift_gradient"]


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
        :math:`\\partial\\mathcal L/\\partial G` (symmetric), ``(M, M)``; None from a device's
        evaluation, which chains it where it is (:meth:`~spherelab.rows.vish.ResidentLift.evaluate`).
    dc : numpy.ndarray
        :math:`\\partial\\mathcal L/\\partial c`, ``(M,)``; None there too.
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
    dG: np.ndarray | None
    dc: np.ndarray | None
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
    on = 1.0 if residual else 0.0  # the trace term's weight
    t = collapsed_terms(np, _factor_B, _solve_lower, chol_inverse, lam, v, noise, stats.G, stats.c, stats.yy,
                        stats.sum_diag, stats.n, on, gradients=gradients or bool(stats.rounding))
    value = float(t.value)
    if residual:
        check_trace_term(value, float(np.sum(v * stats.sum_diag)), float(t.trace), noise, stats.n)
    if not gradients and not stats.rounding:
        return value
    dG, dc = t.dG, t.dc
    error = condition = 0.0
    if stats.rounding:  # float32 statistics: the first-order estimate of their error
        d = np.sqrt(np.maximum(np.diag(stats.G), 0.0))
        error = stats.rounding * float(np.sqrt(np.sum((dG * np.outer(d, d)) ** 2) + stats.yy * np.sum((dc * d) ** 2)))
        condition = float(np.abs(t.B).sum(axis=0).max() * np.abs(t.Binv).sum(axis=0).max())
    if not gradients:
        return value
    return CollapsedBound(
        value=value,
        dlam=t.dlam,
        dv=-0.5 * on * stats.sum_diag / noise,
        dnoise=float(t.dnoise),
        dG=dG,
        dc=dc,
        dsum_r2=-0.5 * on * v / noise,
        error=error,
        condition=condition,
    )


def _factor_B(B: np.ndarray) -> np.ndarray:
    return cholesky_or_explain(
        B, "B = I + Lambda^1/2 G Lambda^1/2 / noise",
        "Likely causes: NaN/inf in the data, a noise variance near 0 or huge, or inputs far "
        "outside the scale the kernel expects; standardise X and y.",
    )


def _solve_lower(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    return solve_triangular(L, b, lower=True)


#: eigenvalues below this fraction of the largest are treated as zero prior variance
LAMBDA_FLOOR = 1e-250


def clamp_spectrum(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The features' prior variances ``lam`` ``(M,)`` and where they were clamped: quadrature
    spectra of very smooth kernels reach the rounding floor (|lambda| ~ 1e-17 lambda_0, either
    sign) at high levels; such a level carries no prior variance, so it is clamped to
    :data:`LAMBDA_FLOOR` times the largest (and gets no gradient) instead of breaking B."""
    floor = LAMBDA_FLOOR * max(float(lam.max()), 1e-300)
    clamped = lam < floor
    return np.where(clamped, floor, lam), clamped


def predictive_weights(lam: np.ndarray, *, stats: Statistics | None = None, noise: float | None = None,
                       q: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""``(w, C)`` of VISH's predictive, mean :math:`\Phi_* w` and variance (prior)
    :math:`- \Phi_* C\Phi_*^\top`: for ``q = (m, L)`` (:math:`S = LL^\top`),
    :math:`w = \Lambda m`, :math:`C = \Lambda - \Lambda S\Lambda`; else the collapsed bound's optimal q
    from ``stats`` and ``noise``, :math:`w = \Lambda^{1/2}B^{-1}\Lambda^{1/2}c/\sigma^2`,
    :math:`C = \Lambda - \Lambda^{1/2}B^{-1}\Lambda^{1/2}` (``lam`` is :math:`\Lambda`, ``(M,)``;
    Dutordoir, Durrande & Hensman 2020, eq. 5)."""
    if q is not None:
        LS = lam[:, None] * q[1]
        return lam * q[0], np.diag(lam) - LS @ LS.T
    s = np.sqrt(lam)
    B = stats.G * np.outer(s, s) / noise
    B[np.diag_indices_from(B)] += 1.0
    LB = cholesky_or_explain(B, "B = I + Lambda^1/2 G Lambda^1/2 / noise",
                             "standardise X and y, or increase the noise variance")
    Binv = chol_inverse(LB)
    return s * (Binv @ (s * stats.c)) / noise, np.diag(lam) - Binv * np.outer(s, s)


def predict_rows(features, kernel, X: np.ndarray, weights: np.ndarray, C: np.ndarray, lam: np.ndarray, *,
                 residual: bool, rows: int, ops="cpu") -> tuple[np.ndarray, np.ndarray]:
    r"""VISH's predictive mean :math:`\Phi_* w` and variance of f at ``X`` ``(N, D)`` from
    :func:`predictive_weights`' ``(w, C)``: the prior :math:`r_*^2\kappa(1)` (the kernel prior,
    ``residual``) or :math:`\Phi_*\Lambda\Phi_*^\top` (the features prior) minus
    :math:`\Phi_* C\Phi_*^\top`, clipped at 0; ``rows`` at a time, so memory does not grow with N; the
    features evaluated by ``ops``."""
    means, variances = [], []
    for s in range(0, X.shape[0], rows):
        ev = features.evaluate(kernel, X[s:s + rows], ops=ops)
        Phi = features.Kuf_from(ev).T
        means.append(Phi @ weights)
        prior = kernel.prior_rows(ev.r) if residual else np.einsum("nm,m,nm->n", Phi, lam, Phi)
        # (Phi C) * Phi by BLAS: einsum's three-operand loop is ~20x slower here
        variances.append(prior - np.einsum("nm,nm->n", Phi @ C, Phi))
    return np.concatenate(means), np.maximum(np.concatenate(variances), 0.0)


def harmonic_statistics(kernel, features, X: Any, y: Any, *, chunk_size: int | None = None,
                        progress: bool | None = None, ops="cpu", gram_dtype: str = "float64") -> Statistics:
    r"""VISH's sufficient statistics in one pass over the rows (:func:`~spherelab.bounds.statistics.pass_sums`,
    the rows streamed to ``ops``' device a chunk at a time, lifted and evaluated there):
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
    ops = as_operations(ops)
    xp = ops.array_namespace()
    kernel.lift(X[:1])  # the input scale's shape and the bias's magnitude, with their messages
    pieces = list(row_chunks(X.shape[0], chunk_size or ops.pass_rows(features.num_features)))

    def chunk(i, rows, shares, acc):
        Xc, yc = rows
        r, Xh, bad = kernel.lift_kept(xp, Xc)  # rejected rows: counted, not summed
        A = features.device_Kuf(ops, Xh, r)  # (M, n), on the device
        if single:
            A, yc = A.astype(xp.float32), yc.astype(xp.float32)
        with gram_threads(ops, shares, 2.0 * A.shape[0] ** 2 * A.shape[1]):
            return {"G": A @ A.T, "c": A @ yc, "r2": (r * r).sum(axis=0), "bad": bad}

    show = X.shape[0] > 1_000_000 if progress is None else progress
    t = pass_sums(ops, pieces, functools.partial(ops.stream_rows, X, y), chunk,
                  progress="harmonic statistics" if show else None)
    if not t:
        raise ValueError("no rows: the statistics need at least one")
    G, c, sum_r2, bad = (ops.to_host(t[k]) for k in ("G", "c", "r2", "bad"))  # the pass's only copies back
    if int(bad):
        kernel.check_lift(X)  # raises the lift's own error, naming the row
        raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")
    stats = Statistics(0.5 * (G + G.T), c, float(y @ y), float(sum_r2) if np.ndim(sum_r2) == 0 else sum_r2,
                       X.shape[0])
    if single:
        if not (np.all(np.isfinite(stats.G)) and np.all(np.isfinite(stats.c))):
            raise NumericalFailure("the float32 statistics overflowed (lifted inputs too large for single "
                                   "precision): use gram_dtype='float64' or standardise the inputs")
        # the typical error of an entry relative to sqrt(G_ii G_jj): measured 0.02-0.03 float32
        # eps (2e5 rows, chunks of 1 024 and 16 384: RESULTS.md, "float32 bound"); eps is the
        # margin
        stats.rounding = float(np.finfo(np.float32).eps)
    return stats


def lift_statistics(features, ev, y: np.ndarray, *, chunk_size: int, ops="cpu") -> Statistics:
    r"""VISH's statistics of rows already evaluated (``ev``, :meth:`SphericalFeatures.evaluate`),
    split over the cores by chunks of rows; ``Statistics.chunks`` keeps each chunk's
    :math:`[K_{uf}^\top, y]` ``(n_chunk, M + 1)`` for :func:`lift_gradient` (the lift stage's
    subsample, where the columns are kept between the bound and its gradient)."""
    ops = as_operations(ops)
    n, M = y.shape[0], features.num_features
    pieces = list(row_chunks(n, chunk_size))
    chunks: dict = {}

    def chunk(i, rows, shares, acc):
        _, yc = rows
        a, b = pieces[i]
        A = np.empty((b - a, M + 1))
        features.columns_into(ev, a, b, A[:, :M])
        A[:, M] = yc
        if "G" not in acc:
            acc["G"], acc["c"] = np.zeros((M, M)), np.zeros(M)
        ops.gram_update(acc["G"], acc["c"], A[:, :M].T, yc)
        chunks[i] = A
        return {}

    t = pass_sums(ops, pieces, host_slices(ev.X, y), chunk)
    G, c = t["G"], t["c"]
    sum_r2 = np.sum(ev.r * ev.r, axis=0)  # per component for an additive kernel
    return Statistics(0.5 * (G + G.T), c, float(y @ y), float(sum_r2) if sum_r2.ndim == 0 else sum_r2, n,
                      [chunks[i] for i in sorted(chunks)])


def lift_gradient(features, kernel, res: CollapsedBound, X: np.ndarray, y: np.ndarray, ev=None, *,
                  chunk_size: int, chunks: list | None = None, ops="cpu") -> dict[str, Any]:
    r"""Chain the collapsed bound's :math:`\partial L/\partial G`, :math:`\partial L/\partial c`
    and :math:`\partial L/\partial\sum r^2` into the lift (``bias``, ``input_scale``) and the
    features' directions: :math:`\partial L/\partial K_{uf} = 2\,\partial_G K_{uf} +
    \partial_c\,y^\top`, one chunk of rows at a time (``ev``: the rows' evaluation, else
    recomputed; ``chunks``: :func:`lift_statistics`' kept columns, same ``chunk_size``), the
    chunks split over the cores by :func:`~spherelab.bounds.statistics.pass_sums`."""
    zero = kernel.lift_zeros()
    if features.trainable:
        zero["directions"] = np.zeros(features.get_params().size)
    # [K_uf; y]^T [2 dG^T; dc^T] = (dL/dK_uf)^T, (N, M), in one product per chunk
    B = np.vstack([2.0 * res.dG.T, res.dc[None, :]])
    M = B.shape[1]
    pieces = list(row_chunks(X.shape[0], chunk_size))

    def chunk(i, rows, shares, acc):
        Xc, yc = rows
        a, b = pieces[i]
        e = ev.rows(a, b) if ev is not None else features.evaluate(kernel, Xc, ops=ops)
        if chunks is not None:
            A = chunks[i]
        else:
            A = np.empty((b - a, M + 1))
            features.columns_into(e, 0, b - a, A[:, :M])
            A[:, M] = yc
        sums = GradientSums(zero)  # (the names the lift's parameters need, of each gradient dict)
        sums.add(features.Kuf_gradients(kernel, (A @ B).T, Xc, e, ops=ops))
        sums.add(kernel.radii_backward(Xc, e.r, e.Xh, res.dsum_r2))  # sum r^2
        return sums.sums

    total = GradientSums(zero)
    total.add(pass_sums(ops, pieces, host_slices(X, y), chunk))
    return total.result()
