r"""The Matérn shapes at chordal distance as device functions, written once in plain Python and
compiled by ``numba.cuda.jit(device=True)`` for the CUDA kernels (:mod:`spherelab.devices.cuda_kernels`),
whose ``math.exp`` is the device's own. The host's loops (:mod:`.matern_jit`) write the same
formulas around a call-free exp so that they vectorise; the parity tests hold the two to rounding.
Formulas: :mod:`.matern_jit`."""

from __future__ import annotations

import math

__all__ = ["chordal", "shape3"]


def chordal(t, diagonal, inv_l):  # pragma: no cover - compiled
    """``(t, rho)``: the inner product clipped to [-1, 1] (exactly 1 on a Gram diagonal) and the
    scaled chordal distance :math:`\\rho = \\sqrt{2 - 2t}/\\ell`."""
    t = min(max(t, -1.0), 1.0)
    if diagonal:
        t = 1.0
    return t, math.sqrt(max(2.0 - 2.0 * t, 0.0)) * inv_l


def shape3(code, rho, inv_l2):  # pragma: no cover - compiled
    """``(m, dm/drho, d kappa/dt)`` at distance rho for nu = 3/2 (code 0), 5/2 (1), inf (2)."""
    if code == 0:
        a = math.sqrt(3.0) * rho
        e = math.exp(-a)
        return (1.0 + a) * e, -3.0 * rho * e, 3.0 * inv_l2 * e
    if code == 1:
        a = math.sqrt(5.0) * rho
        e = math.exp(-a)
        p = (1.0 + a) * e
        return p + 5.0 / 3.0 * rho * rho * e, -5.0 / 3.0 * rho * p, 5.0 / 3.0 * inv_l2 * p
    e = math.exp(-0.5 * rho * rho)
    return e, -rho * e, inv_l2 * e
