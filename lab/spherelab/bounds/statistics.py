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

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..backend.ops import current, use
from ..threads import gram_policy, overlap_pass, thread_limit

__all__ = ["Statistics", "streamed_statistics", "host_gram_pass", "row_chunks"]


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


def _columns_ahead(columns, X, pieces):
    """``(start, stop, columns(X[start:stop]))`` per chunk; the next chunk's columns are computed
    on a second thread while the caller runs the Gram product of the current one when
    :func:`~spherelab.threads.overlap_pass` says it pays (BLAS releases the GIL)."""
    pieces = list(pieces)
    first = pieces[0] if pieces else None
    if first is None:
        return
    A = columns(X[first[0]:first[1]])
    P, chunk_size = (A[0] if isinstance(A, tuple) else A).shape[0], first[1] - first[0]
    # a few chunks do not repay starting the second thread (measured: 2 chunks of 2e4 rows, 1.6x slower)
    if len(pieces) < 4 or not overlap_pass(2.0 * P * P * chunk_size):
        yield first[0], first[1], A
        for start, stop in pieces[1:]:
            yield start, stop, columns(X[start:stop])
        return
    device = current()

    def work(start, stop):
        with use(device), thread_limit(1):
            return columns(X[start:stop])

    with ThreadPoolExecutor(1) as pool, thread_limit(1):
        future = pool.submit(work, *pieces[1])
        yield first[0], first[1], A
        for i in range(1, len(pieces)):
            A = future.result()
            if i + 1 < len(pieces):
                future = pool.submit(work, *pieces[i + 1])
            yield pieces[i][0], pieces[i][1], A


def host_gram_pass(X, y, pieces, load, columns, keep=False, ops=None):
    r"""The CPU's ``gram_pass`` (:data:`~spherelab.backend.OPERATIONS`): ``columns(*load(chunk))``
    for every chunk — the next one on a second thread while this one's :math:`AA^\top` runs —
    accumulated by ``ops.gram_update``. Returns ``(G, c, sum_d, kept)``."""
    if ops is None:
        from ..backend import resolve

        ops = resolve("cpu")
    G = c = None
    sum_d = 0.0
    kept = []
    for start, stop, A in _columns_ahead(lambda Xc: columns(*load(Xc)), X, pieces):
        if isinstance(A, tuple):
            A, d = A
            sum_d += float(np.sum(d))
        P = A.shape[0]
        if G is None:
            G, c = np.zeros((P, P)), np.zeros(P)
        with gram_policy(2.0 * P * P * (stop - start)):
            ops.gram_update(G, c, A, y[start:stop])
        if keep:
            kept.append(A)
    return G, c, sum_d, kept


def _identity_load(Xc):
    return (Xc,)


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
    device_columns: tuple[Callable, Callable] | None = None,
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
        The device's :class:`~spherelab.backend.Operations` (default: the CPU's).
    device_columns
        ``(load, cols)``: the same columns split into host preparation ``load(X_chunk)`` ->
        tuple of arrays and ``cols(*arrays)`` -> ``(A, d)`` written against the device's
        arrays (``ops.device_harmonics``, array methods). When given, the pass is the device's
        ``gram_pass`` — on a GPU the chunks stay on the device and only ``G``, ``c`` come back;
        otherwise it runs on the host with ``columns``.
    """
    if ops is None:
        from ..backend import resolve

        ops = resolve("cpu")
    n = X.shape[0]
    pieces = list(row_chunks(n, chunk_size))
    if progress is None:
        progress = n > 1_000_000
    load, cols = device_columns if device_columns is not None else (_identity_load, columns)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar, inner = tqdm(total=len(pieces), desc=desc, unit="chunk"), load

        def load(Xc):  # called once per chunk, in order: the bar follows the pass
            bar.update(1)
            return inner(Xc)
    try:
        if device_columns is not None:
            G, c, sum_diag, kept = ops.gram_pass(X, y, pieces, load, cols, keep)
        else:
            G, c, sum_diag, kept = host_gram_pass(X, y, pieces, load, cols, keep, ops)
    finally:
        if bar is not None:
            bar.close()
    if diag is not None:
        sum_diag += sum(float(np.sum(diag(X[a:b]))) for a, b in row_chunks(n, chunk_size))
    if G is None:
        raise ValueError("no rows: the statistics need at least one")
    G = 0.5 * (G + G.T)  # exactly symmetric
    return Statistics(G, c, float(y @ y), sum_diag, n, kept)
