r"""The lift of :math:`R^D` to the sphere, :math:`x \mapsto \tilde x = [x / s, b]`, :math:`r = \|\tilde x\|`,
:math:`\hat x = \tilde x / r` (``docs/design.md`` §3): its arithmetic in any array module and its reverse
mode. The zonal kernels (:class:`spherelab.kernels.ZonalKernel`) validate and call these."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["lift_rows", "lift_backward_rows", "lifted_row_gradients"]


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


def lift_backward_rows(X: np.ndarray, dXt: np.ndarray, input_scale: Any, xp=np) -> dict[str, Any]:
    r"""Chain :math:`\partial L/\partial\tilde x` (``(N, D + 1)``, the unnormalised lifted rows) into
    ``X`` ``(N, D)``, ``bias`` (a float) and ``input_scale`` (a float, or ``(D,)`` like the scale);
    ``xp``: the array module of ``X`` and ``dXt`` (``X`` and a vector ``input_scale`` stay in it)."""
    scale = xp.asarray(input_scale, dtype=np.float64)
    D = X.shape[1]
    s_vec = xp.broadcast_to(scale, (D,))
    g_scale = -xp.einsum("nk,nk->k", dXt[:, :D], X) / (s_vec * s_vec)
    return {
        "X": dXt[:, :D] / s_vec,
        "bias": float(dXt[:, D].sum()),
        "input_scale": float(g_scale.sum()) if scale.ndim == 0 else g_scale,
    }


def lifted_row_gradients(A, B, r1, U1, r2, U2):
    r""":math:`\partial L/\partial\tilde x` of both arguments of :math:`K_{ij} = r_i r_j\kappa(t_{ij})` from
    :math:`A = G\odot(\kappa - t\kappa')`, :math:`B = G\odot\kappa'` (``(N1, N2)``, any array module):
    :math:`\sum_j A_{ij} r_j\,\tilde x_i/r_i + \sum_j B_{ij}\tilde x_j` and its mirror, ``(N1, D + 1)``,
    ``(N2, D + 1)``; the lift's reverse mode (:func:`lift_backward_rows`) takes them on."""
    Xt1 = U1 * r1[:, None]
    Xt2 = U2 * r2[:, None]
    return ((A @ r2) / r1)[:, None] * Xt1 + B @ Xt2, ((r1 @ A) / r2)[:, None] * Xt2 + B.T @ Xt1
