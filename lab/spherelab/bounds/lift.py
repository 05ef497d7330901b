r"""VISH's lift stage on rows already evaluated: the statistics with the columns kept, and the
chain of the collapsed bound's matrix gradients into the lift (bias, input scales) and the
features' directions, both split over the cores by chunks of rows
(:func:`~spherelab.bounds.run_shares`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .statistics import Statistics, row_chunks, run_shares, stopping
from .sums import GradientSums
from .vish import CollapsedBound

__all__ = ["lift_statistics", "lift_gradient"]


def lift_statistics(features, ev, y: np.ndarray, *, chunk_size: int, ops=None) -> Statistics:
    r"""VISH's statistics of rows already evaluated (``ev``, :meth:`SphericalFeatures.evaluate`),
    split over the cores by chunks of rows; ``Statistics.chunks`` keeps each chunk's
    :math:`[K_{uf}^\top, y]` ``(n_chunk, M + 1)`` for :func:`lift_gradient` (the lift stage's
    subsample, where the columns are kept between the bound and its gradient)."""
    if ops is None:
        from ..backend import resolve

        ops = resolve("cpu")
    n, M, kept = y.shape[0], features.num_features, features.kept
    pieces = list(row_chunks(n, chunk_size))

    def share(k, shares):
        G, c, chunks = np.zeros((M, M)), np.zeros(M), {}
        for i in range(k, len(pieces), shares):
            if stopping():
                break
            a, b = pieces[i]
            A = np.empty((b - a, M + 1))
            np.multiply(ev.values[a:b, kept], ev.r[a:b, None], out=A[:, :M])
            A[:, M] = y[a:b]
            ops.gram_update(G, c, A[:, :M].T, y[a:b])
            chunks[i] = A
        return G, c, chunks

    parts = run_shares(share, len(pieces), ops)
    G, c = parts[0][0], parts[0][1]
    for part in parts[1:]:
        G += part[0]
        c += part[1]
    chunks = {i: A for part in parts for i, A in part[2].items()}
    return Statistics(0.5 * (G + G.T), c, float(y @ y), float(np.sum(ev.r * ev.r)), n,
                      [chunks[i] for i in sorted(chunks)])


def lift_gradient(features, kernel, res: CollapsedBound, X: np.ndarray, y: np.ndarray, ev=None, *,
                  chunk_size: int, chunks: list | None = None) -> dict[str, Any]:
    r"""Chain the collapsed bound's :math:`\partial L/\partial G`, :math:`\partial L/\partial c`
    and :math:`\partial L/\partial\sum r^2` into the lift (``bias``, ``input_scale``) and the
    features' directions: :math:`\partial L/\partial K_{uf} = 2\,\partial_G K_{uf} +
    \partial_c\,y^\top`, one chunk of rows at a time (``ev``: the rows' evaluation, else
    recomputed; ``chunks``: :func:`lift_statistics`' kept columns, same ``chunk_size``), the
    chunks split over the cores by :func:`~spherelab.bounds.run_shares`."""
    zero = {"bias": 0.0, "input_scale": np.zeros_like(np.asarray(kernel.input_scale, dtype=np.float64))}
    if features.trainable:
        zero["directions"] = np.zeros(features.get_params().size)
    # [K_uf; y]^T [2 dG^T; dc^T] = (dL/dK_uf)^T, (N, M), in one product per chunk
    B = np.vstack([2.0 * res.dG.T, res.dc[None, :]])
    M, kept = B.shape[1], features.kept
    pieces = list(row_chunks(X.shape[0], chunk_size))

    def share(k, shares):  # this share's chunks of rows, single-threaded
        acc = GradientSums(zero)
        for i in range(k, len(pieces), shares):
            if stopping():
                break
            a, b = pieces[i]
            Xc, yc = X[a:b], y[a:b]
            e = ev.rows(a, b) if ev is not None else features.evaluate(kernel, Xc)
            if chunks is not None:
                A = chunks[i]
            else:
                A = np.empty((b - a, M + 1))
                np.multiply(e.values[:, kept], e.r[:, None], out=A[:, :M])
                A[:, M] = yc
            acc.add(features.Kuf_gradients(kernel, (A @ B).T, Xc, e))
            acc.add(kernel.lift_backward(Xc, 2.0 * res.dsum_r2 * e.Xh * e.r[:, None]))  # sum r^2
        return acc

    total = GradientSums(zero)
    for part in run_shares(share, len(pieces)):
        total.merge(part)
    return total.result()
