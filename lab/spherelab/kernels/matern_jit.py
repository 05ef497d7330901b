r"""Fused Numba kernels for the Matérn family at chordal distance on the lifted sphere
(:class:`~spherelab.kernels.Matern` with :math:`\nu \in \{3/2, 5/2, \infty\}`).

NumPy evaluates :math:`K_{ij} = r_i r_j\,\sigma^2 m(\rho_{ij})`, :math:`\rho = \sqrt{2 - 2t}/\ell`, in
about ten element-wise passes, and the gradient pass in about fifteen; here each is one serial
pass over the entries, written so that LLVM runs it in vector lanes: :math:`e^{-a}` from
:func:`exp_nonpositive` (no call to libm per entry), selects in place of branches, the row sums
reassociated (``benchmarks/RESULTS.md``, "The host's Matérn loops": 4-6x NumPy, about 2x the same
loops with libm's exp). Numba's parallel loop was slower than serial at these sizes, 256-2048 x
256, its threads competing with BLAS. The matrix products around them (:math:`U_1U_2^\top` and the
chain to the inputs) stay with BLAS. Results equal the NumPy path to rounding (tested).

Shapes per :math:`\nu` (unit variance, :math:`a = \sqrt{2\nu}\rho`):

* 3/2: :math:`m = (1 + a)e^{-a}`, :math:`m' = -3\rho e^{-a}`, :math:`\kappa' = 3e^{-a}/\ell^2`;
* 5/2: :math:`m = (1 + a + \tfrac53\rho^2)e^{-a}`, :math:`m' = -\tfrac53\rho(1 + a)e^{-a}`,
  :math:`\kappa' = \tfrac5{3\ell^2}(1 + a)e^{-a}`;
* ∞: :math:`m = e^{-\rho^2/2}`, :math:`m' = -\rho e^{-\rho^2/2}`, :math:`\kappa' = e^{-\rho^2/2}/\ell^2`;

and :math:`\partial\kappa/\partial\ell = -m'(\rho)\rho/\ell`.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend.jit import jit

__all__ = ["NU_CODES", "matern_values", "matern_backward", "exp_nonpositive"]

#: the smoothness values with a fused kernel, and their codes
NU_CODES = {1.5: 0, 2.5: 1, float("inf"): 2}


# the host's loops: the shapes of matern_src with e^{-a} from exp_nonpositive (the CUDA kernels
# compile matern_src itself, whose math.exp is the device's own)
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in 32 bits: k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.90821492927058770002e-10
_ROUNDER = 6755399441055744.0  # 1.5 * 2^52: adding it rounds to an integer held in the low bits
_TWO_M200 = 2.0 ** -200
_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = (1.0 / math.factorial(k) for k in range(2, 14))


@jit(inline=True)
def exp_nonpositive(x):  # pragma: no cover - compiled
    r""":math:`e^x` for :math:`x \le 0` (NaN for NaN), within one ulp of the correctly rounded value,
    subnormals included, and free of calls so that a loop around it runs in vector lanes (libm's
    ``exp`` is a call per entry, which keeps the loop scalar). Cody-Waite reduction
    :math:`x = k\ln 2 + r`, :math:`|r| \le \tfrac12\ln 2`, Taylor's polynomial to :math:`r^{13}`
    (remainder below 2e-17), and :math:`2^k` written into the exponent bits; arguments below -690
    (results below about :math:`2^{-995}`) take :math:`2^{k + 200}` and a second factor
    :math:`2^{-200}`, so that subnormal results round once."""
    x = -746.0 if x < -746.0 else x  # below, e^x rounds to 0 (a NaN passes)
    low = x < -690.0
    kf = x * _LOG2E + _ROUNDER
    k = kf - _ROUNDER
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = _C13
    p = _C12 + r * p
    p = _C11 + r * p
    p = _C10 + r * p
    p = _C9 + r * p
    p = _C8 + r * p
    p = _C7 + r * p
    p = _C6 + r * p
    p = _C5 + r * p
    p = _C4 + r * p
    p = _C3 + r * p
    p = _C2 + r * p
    p = 1.0 + r * p
    p = 1.0 + r * p
    # the low bits of kf hold k: add the exponent bias and shift them into place
    bits = (np.float64(kf).view(np.int64) + (1223 if low else 1023)) << 52
    out = p * np.int64(bits).view(np.float64)
    return out * _TWO_M200 if low else out


_SQRT3, _SQRT5 = math.sqrt(3.0), math.sqrt(5.0)


@jit(inline=True)
def _shape(code, rho, inv_l2):  # pragma: no cover - compiled
    """matern_src.shape3 with :func:`exp_nonpositive`: ``(m, dm/drho, d kappa/dt)``."""
    if code == 0:
        a = _SQRT3 * rho
        e = exp_nonpositive(-a)
        return (1.0 + a) * e, -3.0 * rho * e, 3.0 * inv_l2 * e
    if code == 1:
        a = _SQRT5 * rho
        e = exp_nonpositive(-a)
        p = (1.0 + a) * e
        return p + 5.0 / 3.0 * rho * rho * e, -5.0 / 3.0 * rho * p, 5.0 / 3.0 * inv_l2 * p
    e = exp_nonpositive(-0.5 * rho * rho)
    return e, -rho * e, inv_l2 * e


@jit(inline=True)
def _chordal(t, diagonal, inv_l):  # pragma: no cover - compiled
    """matern_src.chordal with selects in place of min/max (a NaN passes; the loop vectorises)."""
    t = 1.0 if t > 1.0 else t
    t = -1.0 if t < -1.0 else t
    t = 1.0 if diagonal else t
    u = 2.0 - 2.0 * t
    return t, math.sqrt(0.0 if u < 0.0 else u) * inv_l


@jit(inline=True)
def _values_row(T, out, i, r2, vi, same, code, inv_l, inv_l2):  # pragma: no cover - compiled
    for j in range(T.shape[1]):
        _, rho = _chordal(T[i, j], same and i == j, inv_l)
        m, _, _ = _shape(code, rho, inv_l2)
        out[i, j] = vi * r2[j] * m


@jit()
def _values(T, r1, r2, code, inv_l, variance, same, out):  # pragma: no cover - compiled
    inv_l2 = inv_l * inv_l
    for i in range(T.shape[0]):
        vi = variance * r1[i]
        # one copy of the row's loop per smoothness, its code a constant there: each vectorises
        if code == 0:
            _values_row(T, out, i, r2, vi, same, 0, inv_l, inv_l2)
        elif code == 1:
            _values_row(T, out, i, r2, vi, same, 1, inv_l, inv_l2)
        else:
            _values_row(T, out, i, r2, vi, same, 2, inv_l, inv_l2)


@jit(inline=True, reassociate=True)  # the row sums in vector lanes
def _backward_row(T, G, A, B, i, r1i, r2, same, code, inv_l, inv_l2, variance):  # pragma: no cover - compiled
    acc_v = 0.0
    acc_l = 0.0
    for j in range(T.shape[1]):
        t, rho = _chordal(T[i, j], same and i == j, inv_l)
        m, dm, kt = _shape(code, rho, inv_l2)
        g = G[i, j]
        grr = g * r1i * r2[j]
        acc_v += grr * m
        acc_l += grr * (-dm * rho * inv_l)
        kt = 0.0 if same and t == 1.0 else kt  # the diagonal (and repeated rows): dt = 0 there
        A[i, j] = g * variance * (m - t * kt)
        B[i, j] = g * variance * kt
    return acc_v, acc_l


@jit(reassociate=True)
def _backward(T, G, r1, r2, code, inv_l, variance, same, A, B, row_var, row_l):  # pragma: no cover - compiled
    inv_l2 = inv_l * inv_l
    for i in range(T.shape[0]):
        if code == 0:
            acc_v, acc_l = _backward_row(T, G, A, B, i, r1[i], r2, same, 0, inv_l, inv_l2, variance)
        elif code == 1:
            acc_v, acc_l = _backward_row(T, G, A, B, i, r1[i], r2, same, 1, inv_l, inv_l2, variance)
        else:
            acc_v, acc_l = _backward_row(T, G, A, B, i, r1[i], r2, same, 2, inv_l, inv_l2, variance)
        row_var[i] = acc_v
        row_l[i] = variance * acc_l


def matern_values(T: np.ndarray, r1: np.ndarray, r2: np.ndarray, code: int, lengthscale: float,
                  variance: float, same: bool) -> np.ndarray:
    """``(N1, N2)`` Gram matrix from the raw inner products ``T`` of the unit lifted rows."""
    out = np.empty(T.shape)
    _values(np.ascontiguousarray(T), r1, r2, code, 1.0 / lengthscale, variance, same, out)
    return out


def matern_backward(T: np.ndarray, G: np.ndarray, r1: np.ndarray, r2: np.ndarray, code: int,
                    lengthscale: float, variance: float, same: bool):
    r"""``(A, B, d/dvariance, d/dlengthscale)`` with :math:`A = G\odot\sigma^2(\kappa - t\kappa')`,
    :math:`B = G\odot\sigma^2\kappa'` (what
    :meth:`~spherelab.kernels.ZonalKernel.gradients_with_inputs` chains to the lifted rows)."""
    A = np.empty(T.shape)
    B = np.empty(T.shape)
    row_var = np.empty(T.shape[0])
    row_l = np.empty(T.shape[0])
    _backward(np.ascontiguousarray(T), np.ascontiguousarray(G), r1, r2, code, 1.0 / lengthscale,
              variance, same, A, B, row_var, row_l)
    return A, B, float(row_var.sum()), float(row_l.sum())
