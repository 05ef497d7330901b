r"""Inducing inputs from the data: k-means centres (:func:`kmeans_centres`, where the rows are
dense), or rows chosen by greedy conditional variance (Burt, Rasmussen & van der Wilk 2020,
"Convergence of sparse variational inference in Gaussian process regression", JMLR, Algorithm 1;
:func:`greedy_variance`, where the process is least explained): each new input is the candidate
row where the process is least explained by the features and the inputs chosen so far, the largest
diagonal entry of the conditional covariance.

With features :math:`u` the process conditioned on is :math:`f` given :math:`u`, whose covariance is
:math:`\tilde k(x, x') = k(x, x') - k_{xu}K_{uu}^{-1}k_{ux'}`: the prior of the orthogonal component
that an orthogonally-decoupled model's inducing inputs :math:`v` describe (Tiao, thesis eq. 3.11).
The selection is a pivoted Cholesky factorisation of :math:`\tilde k` on the candidates, stopped
after ``count`` pivots: :math:`O(n(M^2 + \text{count}^2))` time and :math:`O(n(M + \text{count}))`
memory for n candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import check_finite_array, check_int, check_nonnegative, check_seed
from ..backend.ops import Operations
from ..linalg import add_jitter, cholesky_or_explain

__all__ = ["greedy_variance", "kmeans_centres"]


def greedy_variance(kernel, X: Any, count: int, features=None, *, jitter: float = 1e-6,
                    ops: Operations | str = "cpu") -> np.ndarray:
    r"""Indices of ``count`` distinct rows of ``X`` ``(n, D)``, chosen one at a time where the
    conditional variance of :math:`f` given the features and the rows chosen before is largest.

    Parameters
    ----------
    kernel
        The :class:`~spherelab.kernels.ZonalKernel` of the process.
    X
        Candidate rows (a model passes its training inputs, or a subsample of them).
    count
        How many rows to choose, at most n.
    features
        Features bound to ``kernel`` (``initialise`` and ``bind`` done) to condition on first, or
        ``None`` for the plain kernel (inducing points for an SVGP).
    jitter
        Added to :math:`K_{uu}`'s diagonal, relative to its mean (:func:`~spherelab.linalg.add_jitter`),
        as the models do.

    Returns
    -------
    numpy.ndarray
        ``(count,)`` int indices, in the order chosen. Once every candidate's conditional variance
        is zero to rounding (duplicates, or a process the features explain exactly), the remaining
        rows are taken in their order in ``X``.
    """
    from ..kernels import ZonalKernel
    from .base import Features

    if not isinstance(kernel, ZonalKernel):
        raise TypeError(f"kernel must be a spherelab ZonalKernel, got {kernel!r}")
    if features is not None and not isinstance(features, Features):
        raise TypeError(f"features must be spherelab Features bound to the kernel, or None, got {features!r}")
    X = check_finite_array(X, "X", ndim=2)
    count = check_int(count, "count", minimum=0, maximum=X.shape[0])
    jitter = check_nonnegative(jitter, "jitter")
    n = X.shape[0]
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    variance = np.array(kernel.diag(X), dtype=np.float64)
    scale = float(np.max(variance))  # (rounding is judged against the largest prior variance)
    A = None
    if features is not None and features.num_features:
        Kuu = add_jitter(np.asarray(features.Kuu(kernel, ops=ops), dtype=np.float64), jitter)
        Lu = cholesky_or_explain(Kuu, "Kuu", "the features' prior covariance: raise jitter")
        A = solve_triangular(Lu, features.Kuf(kernel, X, ops=ops), lower=True)  # (M, n)
        variance -= np.einsum("mn,mn->n", A, A)
    R = np.zeros((count, n))  # the pivoted factor's rows
    chosen = np.zeros(n, dtype=bool)
    order = []
    for j in range(count):
        remaining = np.where(chosen, -np.inf, variance)
        i = int(np.argmax(remaining))
        if not remaining[i] > 1e-12 * scale:  # nothing left to explain: the rest in their order
            order.extend(np.flatnonzero(~chosen)[:count - j].tolist())
            break
        column = np.asarray(kernel.K(X, X[i:i + 1], ops=ops), dtype=np.float64)[:, 0]
        if A is not None:
            column -= A.T @ A[:, i]
        column -= R[:j].T @ R[:j, i]
        R[j] = column / np.sqrt(remaining[i])
        variance -= R[j] * R[j]
        chosen[i] = True
        order.append(i)
    return np.asarray(order, dtype=np.int64)


def kmeans_centres(X: Any, count: int, *, seed: int = 0, iterations: int = 10, max_rows: int = 20_000) -> np.ndarray:
    r"""``count`` centres of k-means (Lloyd's iterations from k-means++ seeding, Arthur & Vassilvitskii
    2007) on at most ``max_rows`` rows of ``X`` ``(n, D)`` drawn at random: inducing inputs that
    follow the data's density, as GPflow's and GPyTorch's examples start theirs.

    On the collapsed bound they start far closer to the optimum than the greedy rows on dense
    data: ``benchmarks/RESULTS.md``, "Test NLPD against wall time on UCI" (protein: the greedy
    rows need hundreds of L-BFGS-B iterations of the inputs to reach what k-means starts near).
    :math:`O(\text{iterations} \cdot n \cdot \text{count} \cdot D)` time, rows taken in chunks.

    Returns
    -------
    numpy.ndarray
        ``(count, D)`` centres. A cluster left empty keeps its centre; duplicate rows may leave
        fewer distinct centres than ``count`` only when ``X`` has fewer distinct rows.
    """
    X = check_finite_array(X, "X", ndim=2)
    count = check_int(count, "count", minimum=1, maximum=X.shape[0])
    iterations = check_int(iterations, "iterations", minimum=0)
    max_rows = check_int(max_rows, "max_rows", minimum=1)
    rng = np.random.default_rng(check_seed(seed))
    if X.shape[0] > max(max_rows, count):
        X = X[rng.choice(X.shape[0], max(max_rows, count), replace=False)]
    # distances from the rows' mean: |x|^2 - 2 x.c + |c|^2 loses every digit of rows far from the
    # origin (offset by 1e9, their spread of 1 is below the rounding of 1e18)
    shift = X.mean(axis=0)
    X = np.asarray(X, dtype=np.float64) - shift
    sq = np.einsum("nd,nd->n", X, X)
    # k-means++: each next centre drawn with probability proportional to its squared distance
    first = int(rng.integers(X.shape[0]))
    centres = [first]
    dist = np.maximum(sq - 2 * X @ X[first] + sq[first], 0.0)
    for _ in range(1, count):
        total = float(dist.sum())
        i = int(rng.choice(X.shape[0], p=dist / total)) if total > 0 else int(rng.integers(X.shape[0]))
        centres.append(i)
        dist = np.minimum(dist, np.maximum(sq - 2 * X @ X[i] + sq[i], 0.0))
    C = X[centres].copy()
    for _ in range(iterations):
        label = _nearest(X, C)
        sums = np.stack([np.bincount(label, weights=X[:, j], minlength=count) for j in range(X.shape[1])], axis=1)
        sizes = np.bincount(label, minlength=count)
        filled = sizes > 0
        moved = sums[filled] / sizes[filled, None]
        if np.array_equal(moved, C[filled]):
            break
        C[filled] = moved
    return C + shift


def _nearest(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Each row's nearest centre, a chunk of rows at a time: the chunk's (rows x count) products
    and their temporaries within a quarter of the memory budget (``SPHERELAB_MAX_MEMORY``) and
    256 MiB."""
    from .._validation import memory_budget

    chunk = int(max(1, min(4096, min(256 << 20, memory_budget() // 4) // (24.0 * C.shape[0]))))
    csq = np.einsum("md,md->m", C, C)
    out = np.empty(X.shape[0], dtype=np.int64)
    for a in range(0, X.shape[0], chunk):
        out[a:a + chunk] = np.argmin(csq - 2 * X[a:a + chunk] @ C.T, axis=1)  # |x|^2 is common to a row
    return out
