r"""The one streamed-statistics pass of the package.

Every Gaussian bound of the package depends on the data only through

.. math:: G = AA^\top, \qquad c = Ay, \qquad y^\top y, \qquad \textstyle\sum_n d(x_n), \qquad N,

where the columns of :math:`A` ``(P, N)`` are the model's (whitened) feature vectors of the rows
and :math:`d` a per-row prior term (VISH: :math:`A = K_{uf}` with :math:`K_{uu}` diagonal and
:math:`d = r^2`; the decoupled model: :math:`A = L_J^{-1}K_{pf}` and :math:`d = k(x, x)`; HVGP:
the stacked :math:`L_{k,c}^{-1}k_c(Z_c, X)`). :func:`streamed_statistics` accumulates them over
chunks of rows, so memory is :math:`O(P \cdot \text{chunk} + P^2)` whatever N.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..threads import gram_policy

__all__ = ["Statistics", "streamed_statistics", "row_chunks"]


@dataclass
class Statistics:
    r"""Sufficient statistics of a Gaussian bound: ``G = A A^T`` ``(P, P)``, ``c = A y`` ``(P,)``,
    ``yy = y^T y``, ``sum_diag`` = :math:`\sum_n d(x_n)`, ``n`` rows; ``chunks`` holds the
    chunks' A when asked to keep them (for a backward pass without recomputing them)."""

    G: np.ndarray
    c: np.ndarray
    yy: float
    sum_diag: float
    n: int
    chunks: list = field(default_factory=list, repr=False)


def row_chunks(n: int, size: int):
    """``(start, stop)`` pairs covering ``range(n)`` in pieces of at most ``size`` rows."""
    size = max(1, int(size))
    for start in range(0, n, size):
        yield start, min(start + size, n)


def streamed_statistics(
    columns: Callable[[np.ndarray], np.ndarray],
    X: np.ndarray,
    y: np.ndarray,
    *,
    chunk_size: int,
    diag: Callable[[np.ndarray], np.ndarray] | None = None,
    keep: bool = False,
    progress: bool | None = None,
    desc: str = "statistics",
    ops=None,
) -> Statistics:
    """One pass over (X, y) in chunks of ``chunk_size`` rows.

    Parameters
    ----------
    columns
        ``columns(X_chunk)`` returns :math:`A` for the chunk, ``(P, n_chunk)`` (a transposed
        ``(n_chunk, P)`` array is fine: no copy is made), or ``(A, d)`` with the per-row prior
        term ``d`` ``(n_chunk,)`` when it comes out of the same computation.
    X, y
        ``(N, D)`` and ``(N,)``, already validated.
    diag
        ``diag(X_chunk)`` returns the per-row prior term ``(n_chunk,)`` (default: from
        ``columns``, else 0).
    keep
        Keep each chunk's A in ``Statistics.chunks``.
    progress
        Show a tqdm bar (default: when N > 10^6).
    ops
        The device's :class:`~spherelab.backend.Operations` (default: the CPU's); its
        ``gram_update`` accumulates each chunk.
    """
    if ops is None:
        from ..backend import resolve

        ops = resolve("cpu")
    n = X.shape[0]
    G = c = None
    sum_diag = 0.0
    kept = []
    pieces = list(row_chunks(n, chunk_size))
    if progress is None:
        progress = n > 1_000_000
    if progress:
        from tqdm.auto import tqdm

        pieces = tqdm(pieces, desc=desc, unit="chunk")
    for start, stop in pieces:
        A = columns(X[start:stop])
        if isinstance(A, tuple):
            A, d = A
            sum_diag += float(np.sum(d))
        P = A.shape[0]
        if G is None:
            G, c = np.zeros((P, P)), np.zeros(P)
        with gram_policy(2.0 * P * P * (stop - start)):
            ops.gram_update(G, c, A, y[start:stop])
        if diag is not None:
            sum_diag += float(np.sum(diag(X[start:stop])))
        if keep:
            kept.append(A)
    G = 0.5 * (G + G.T)  # exactly symmetric
    return Statistics(G, c, float(y @ y), sum_diag, n, kept)
