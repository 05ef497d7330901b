r"""The data-space Gram matrix's shared pieces (:meth:`~spherelab.kernels.ZonalKernel.K`,
:meth:`~spherelab.kernels.ZonalKernel.gradients_with_inputs`): the work a Gram computation costs (the
thread policy's measure) and the backward pass through a kernel's shape where no compiled pass does
it, :math:`A = G\odot(\kappa - t\kappa')` and :math:`B = G\odot\kappa'` (which multiply
:math:`\partial(r_i r_j)` and :math:`\partial u_{ij}`), with the hyper-parameters' sums."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["gram_work", "shape_backward"]


def gram_work(kernel, *args, **kwargs) -> float:
    """The flops of a Gram computation on the 2-D arrays among its arguments (the last two: X, X2):
    one (N, d) x (d, N2) product and about 20 per entry."""
    arrays = [a for a in args if hasattr(a, "shape") and getattr(a, "ndim", 0) == 2]
    if not arrays:
        return 0.0
    n1 = arrays[-2].shape[0] if len(arrays) > 1 else arrays[-1].shape[0]
    n2 = arrays[-1].shape[0]
    return float(n1) * n2 * (2.0 * arrays[-1].shape[1] + 20.0)


def shape_backward(kernel, G: np.ndarray, T: np.ndarray, r1: np.ndarray, r2: np.ndarray, same: bool, ops):
    """``(A, B, sums)`` for ``G`` = dL/dK ``(N, N2)`` at the cosines ``T`` and radii ``r1``, ``r2``;
    ``same``: K(X, X), whose entries at t = 1 exactly have dt = 0."""
    T = np.clip(T, -1.0, 1.0)
    if same:
        np.fill_diagonal(T, 1.0)
    kap, kap_t, grads = kernel.unit_shape_all(T, ops)
    GR = G * (r1[:, None] * r2[None, :])
    out: dict[str, Any] = {
        k: kernel.variance * float(np.vdot(GR, np.broadcast_to(v, GR.shape))) for k, v in grads.items()
    }
    out["variance"] = float(np.vdot(GR, kap))
    kap = kernel.variance * kap
    kap_t = kernel.variance * kap_t
    if same:  # t = 1 exactly (diagonal, repeated rows): dt = 0 there and kappa'(1) may be infinite
        kap_t = np.where(T == 1.0, 0.0, kap_t)
    A = G * (kap - T * kap_t)  # multiplies d(r_i r_j)
    B = G * kap_t  # multiplies du_ij
    if not np.all(np.isfinite(B)):
        raise FloatingPointError(
            "kappa'(t) is infinite at coincident inputs in X and X2; this kernel is not "
            "differentiable there (e.g. Matern nu=1/2, ArcCosine order 0)"
        )
    return A, B, out
