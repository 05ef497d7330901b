r"""The lift of :math:`R^D` to the sphere, :math:`x \mapsto \tilde x = [x / s, b]`, :math:`r = \|\tilde x\|`,
:math:`\hat x = \tilde x / r` (``docs/design.md`` §3): its arithmetic in any array module and its reverse
mode. The zonal kernels (:class:`spherelab.kernels.ZonalKernel`) validate and call these."""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from .._validation import MAX_MAGNITUDE
from ..backend.jit import jit
from ..threads import policy

__all__ = ["lift_rows", "lift_rows_kept", "lift_extent", "lift_backward_rows", "lift_backward_sums",
           "lift_gradient_from_sums", "lifted_row_gradients"]


def lift_rows(xp, X, scale, bias: float):
    r"""The lift's arithmetic in any array module ``xp`` (NumPy, or CuPy on a device's rows),
    unchecked: :math:`\tilde x = [x / s, b]`, its norm :math:`r` and the unit point
    :math:`\hat x = \tilde x / r`, each row first scaled by its largest magnitude ``big`` (tiny
    rows, a bias of 1e-160 at x = 0, would underflow in the squares and leave the unit points off
    the sphere). Returns ``(r (N,), X_hat (N, D + 1), big (N,))``; a row with ``r = 0`` vanished and
    ``max(big)`` above :data:`~spherelab._validation.MAX_MAGNITUDE` overflows the kernel's values
    (:meth:`ZonalKernel.lift` raises for both)."""
    Xt = xp.concatenate([X / scale, xp.full((X.shape[0], 1), bias)], axis=1)
    big = xp.max(xp.abs(Xt), axis=1) if Xt.size else xp.zeros(Xt.shape[0])
    safe = xp.where(big > 0, big, 1.0)
    Xs = Xt / safe[:, None]
    r = big * xp.sqrt(xp.einsum("ij,ij->i", Xs, Xs))
    return r, Xs / (r / safe)[:, None], big


def lift_rows_kept(xp, X, scale, bias: float):
    r""":func:`lift_rows` of a device's chunk of rows with the rows whose lift overflows or vanishes
    kept out of the sums: radius 0 and a unit point each, so that no NaN or overflow reaches a
    statistic, and their count (a device scalar, read once after the pass, which then raises the
    lift's own error through :meth:`~spherelab.kernels.ZonalKernel.check_lift`). Returns
    ``(r (N,), X_hat (N, D + 1), rejected)``."""
    with np.errstate(all="ignore"):
        r, Xh, big = lift_rows(xp, X, scale, bias)
        ok = (big <= MAX_MAGNITUDE) & (r > 0)
    return xp.where(ok, r, 0.0), xp.where(ok[:, None], Xh, 1.0 / np.sqrt(Xh.shape[1])), xp.count_nonzero(~ok)


def lift_backward_rows(X: np.ndarray, dXt: np.ndarray, input_scale: Any, xp=np) -> dict[str, Any]:
    r"""Chain :math:`\partial L/\partial\tilde x` (``(N, D + 1)``, the unnormalised lifted rows) into
    ``X`` ``(N, D)``, ``bias`` (a float) and ``input_scale`` (a float, or ``(D,)`` like the scale);
    ``xp``: the array module of ``X`` and ``dXt`` (``X`` and a vector ``input_scale`` stay in it)."""
    scale = xp.asarray(input_scale, dtype=np.float64)
    s_vec = xp.broadcast_to(scale, (X.shape[1],))
    return {"X": dXt[:, :X.shape[1]] / s_vec,
            **lift_gradient_from_sums(lift_backward_sums(X, dXt, xp), input_scale, xp)}


def lift_backward_sums(X, dXt, xp=np):
    r"""The ``(D + 1,)`` sums over rows that the lift's parameters need:
    :math:`\sum_n \partial_{\tilde x_{nk}} L\,x_{nk}` for each input k, then
    :math:`\sum_n \partial_{\tilde x_{nD}} L` (the bias's column), in ``X``'s array module; sums
    of several chunks add up (a device keeps them there and sends back D + 1 numbers)."""
    D = X.shape[1]
    return xp.concatenate([xp.einsum("nk,nk->k", dXt[:, :D], X), dXt[:, D:].sum(axis=0)])


def lift_gradient_from_sums(sums, input_scale: Any, xp=np) -> dict[str, Any]:
    r"""``bias`` and ``input_scale`` gradients from :func:`lift_backward_sums`:
    :math:`\tilde x_k = x_k / s_k` gives :math:`\partial L/\partial s_k = -\sum_n
    \partial_{\tilde x_{nk}} L\,x_{nk} / s_k^2` (summed over k for a scalar scale)."""
    scale = xp.asarray(input_scale, dtype=np.float64)
    D = sums.shape[0] - 1
    s_vec = xp.broadcast_to(scale, (D,))
    g_scale = -sums[:D] / (s_vec * s_vec)
    return {"bias": float(sums[D]), "input_scale": float(g_scale.sum()) if scale.ndim == 0 else g_scale}


def lifted_row_gradients(A, B, r1, U1, r2, U2):
    r""":math:`\partial L/\partial\tilde x` of both arguments of :math:`K_{ij} = r_i r_j\kappa(t_{ij})` from
    :math:`A = G\odot(\kappa - t\kappa')`, :math:`B = G\odot\kappa'` (``(N1, N2)``, any array module):
    :math:`\sum_j A_{ij} r_j\,\tilde x_i/r_i + \sum_j B_{ij}\tilde x_j` and its mirror, ``(N1, D + 1)``,
    ``(N2, D + 1)``; the lift's reverse mode (:func:`lift_backward_rows`) takes them on."""
    Xt1 = U1 * r1[:, None]
    Xt2 = U2 * r2[:, None]
    return ((A @ r2) / r1)[:, None] * Xt1 + B @ Xt2, ((r1 @ A) / r2)[:, None] * Xt2 + B.T @ Xt1


def lift_extent(X: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, int]:
    r"""What the lift's checks need of finite rows ``X`` ``(N, D)`` at ``scale`` ``(D,)``, in one
    compiled pass over blocks of rows (every core for large N, through the thread policy):
    each column's largest :math:`|x_k| / s_k` ``(D,)`` and the count of rows whose scaled entries
    are all 0 (they vanish when the bias is 0). It replaces NumPy's blocks (absolute values,
    their maximum and a comparison per block, each a temporary of the block's size)."""
    X = np.asarray(X, dtype=np.float64)  # (a strided view is read in place: no copy of N x D)
    scale = np.array(np.broadcast_to(np.asarray(scale, dtype=np.float64), (X.shape[1],)))  # (one signature)
    with policy(float(X.size)):
        blocks = max(1, min(X.shape[0], 4 * numba.get_num_threads()))
        top, zeros = _extent(X, scale, blocks)
    return top.max(axis=0), int(zeros.sum())


@jit(parallel=True)
def _extent(X, scale, blocks):  # pragma: no cover - compiled
    n, D = X.shape
    top = np.zeros((blocks, D))
    zeros = np.zeros(blocks, dtype=np.int64)
    step = (n + blocks - 1) // blocks
    for b in numba.prange(blocks):
        for i in range(b * step, min(n, (b + 1) * step)):
            vanishes = True
            for k in range(D):
                v = math.fabs(X[i, k]) / scale[k]
                if v > top[b, k]:
                    top[b, k] = v
                if v != 0.0:
                    vanishes = False
            if vanishes:
                zeros[b] += 1
    return top, zeros
