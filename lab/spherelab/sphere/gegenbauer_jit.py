r"""The compiled Gegenbauer kernels of :mod:`.gegenbauer` for the CPU (1-d inputs, validated by
the callers): tables, derivative tables and Clenshaw sums of the normalised polynomials
:math:`P_n^\alpha`, their weighted moments and single values :math:`C_n^\alpha(t)`, parallel
over the points."""

from __future__ import annotations

import numpy as np
from numba import prange

from ..backend.jit import jit
from ..threads import policy
from . import gegenbauer_src as src

__all__ = ["table_cpu", "derivative_table_cpu", "clenshaw_cpu", "moments_kernel", "elementwise_kernel"]

# the recurrences, compiled for the CPU from their one source (gegenbauer_src; the CUDA kernels
# compile the same functions)
_table_row = jit()(src.table_row)
_derivative_row = jit()(src.derivative_row)
_clenshaw_tables = jit()(src.clenshaw_tables)
_clenshaw_point = jit()(src.clenshaw_point)


@jit(parallel=True)
def _table_kernel(t, max_degree, alpha, out):  # pragma: no cover - compiled
    two_a = 2.0 * alpha
    for i in prange(t.shape[0]):
        _table_row(t[i], max_degree, two_a, out, i)


@jit(parallel=True)
def _derivative_table_kernel(t, max_degree, alpha, out):  # pragma: no cover - compiled
    for i in prange(t.shape[0]):
        _derivative_row(t[i], max_degree, alpha, out, i)


@jit(parallel=True)
def _clenshaw_kernel(t, coeffs, alpha, values, derivs, want_deriv):  # pragma: no cover
    L = coeffs.shape[0] - 1
    a_tab = np.empty(L + 1)
    b_tab = np.empty(L + 2)
    b_1 = _clenshaw_tables(L, 2.0 * alpha, a_tab, b_tab)
    for i in prange(t.shape[0]):
        v, d = _clenshaw_point(t[i], coeffs, a_tab, b_tab, b_1, want_deriv)
        values[i] = v
        if want_deriv:
            derivs[i] = d


@jit(parallel=True)
def moments_kernel(t, w, max_degree, alpha, out):  # pragma: no cover - compiled
    # out[k, n] = sum over the points of block k of w_i P_n(t_i): one recurrence per point, no table
    two_a = 2.0 * alpha
    blocks = out.shape[0]
    size = (t.shape[0] + blocks - 1) // blocks
    for k in prange(blocks):
        for i in range(k * size, min((k + 1) * size, t.shape[0])):
            x, wi = t[i], w[i]
            out[k, 0] += wi
            if max_degree >= 1:
                out[k, 1] += wi * x
            p_prev, p_cur = 1.0, x
            for m in range(1, max_degree):
                p_next = ((2.0 * m + two_a) * x * p_cur - m * p_prev) / (m + two_a)
                out[k, m + 1] += wi * p_next
                p_prev, p_cur = p_cur, p_next


def table_cpu(L: int, alpha: float, t: np.ndarray) -> np.ndarray:
    """The CPU implementation of the ``gegenbauer_table`` operation: ``(N, L + 1)`` for validated
    1-d ``t``."""
    out = np.empty((t.shape[0], L + 1))
    with policy(t.shape[0] * (L + 1) * 4):
        _table_kernel(t, L, alpha, out)
    return out


def derivative_table_cpu(L: int, alpha: float, t: np.ndarray) -> np.ndarray:
    """The CPU implementation of ``gegenbauer_derivative_table``."""
    out = np.empty((t.shape[0], L + 1))
    with policy(t.shape[0] * (L + 1) * 4):
        _derivative_table_kernel(t, L, alpha, out)
    return out


def clenshaw_cpu(coeffs: np.ndarray, alpha: float, t: np.ndarray, derivative: bool = False):
    r"""The CPU implementation of ``clenshaw``: :math:`\sum_n c_n P_n(t)` (and its derivative)
    for normalised coefficients and validated 1-d ``t``."""
    values = np.empty(t.shape[0])
    derivs = np.empty(t.shape[0] if derivative else 0)
    with policy(t.shape[0] * coeffs.shape[0] * 6):
        _clenshaw_kernel(t, coeffs, alpha, values, derivs, derivative)
    return (values, derivs) if derivative else values


@jit(parallel=True)
def elementwise_kernel(n, alpha, t, out):  # pragma: no cover - compiled
    # C_n^a(t) = C_n^a(1) P_n^a(t), with C_n^a(1) = prod_{k<n} (2a + k) / (k + 1) accumulated
    # along the recurrence: n roundings of random sign instead of exp() of lgamma differences
    # (which lose ~|log C_n(1)| ulps). At a = 0 the first factor is 0: the strict limit.
    for i in prange(t.shape[0]):
        x = t[i]
        nn = n[i]
        two_a = 2.0 * alpha[i]
        if nn == 0:
            out[i] = 1.0
            continue
        p_prev = 1.0
        p_cur = x
        c1 = two_a
        for k in range(1, nn):
            p_next = ((2.0 * k + two_a) * x * p_cur - k * p_prev) / (k + two_a)
            p_prev = p_cur
            p_cur = p_next
            c1 *= (two_a + k) / (k + 1.0)
        out[i] = c1 * p_cur
