r"""The Gegenbauer recurrences as device functions, written once in plain Python and compiled
twice: by ``numba.njit`` for the CPU kernels (:mod:`.gegenbauer`) and by
``numba.cuda.jit(device=True)`` for the CUDA kernels (:mod:`spherelab.devices.cuda_kernels`).

Normalised polynomials :math:`P_n = C_n^\alpha / C_n^\alpha(1)` (bounded by 1, never overflow):
:math:`P_{k+1} = \big((2k + 2\alpha)\,t P_k - k P_{k-1}\big)/(k + 2\alpha)`;
derivatives :math:`P_n' = \tfrac{n(n+2\alpha)}{2\alpha+1} P_{n-1}^{\alpha+1}`; series
:math:`\sum_n c_n P_n(t)` by Clenshaw's backward recurrence with
:math:`A_k = (2k+2\alpha)/(k+2\alpha)`, :math:`B_k = k/(k+2\alpha)` tabulated by the caller.
"""

from __future__ import annotations

__all__ = ["table_row", "derivative_row", "clenshaw_tables", "clenshaw_point", "pair_terms"]


def table_row(x, max_degree, two_a, out, i):  # pragma: no cover - compiled
    """``out[i, n] = P_n(x)`` for n = 0..L."""
    out[i, 0] = 1.0
    if max_degree >= 1:
        out[i, 1] = x
    p_prev = 1.0
    p_cur = x
    for k in range(1, max_degree):
        p_next = ((2.0 * k + two_a) * x * p_cur - k * p_prev) / (k + two_a)
        out[i, k + 1] = p_next
        p_prev = p_cur
        p_cur = p_next


def derivative_row(x, max_degree, alpha, out, i):  # pragma: no cover - compiled
    """``out[i, n] = P_n'(x)`` for n = 0..L."""
    two_a1 = 2.0 * (alpha + 1.0)
    scale = 2.0 * alpha + 1.0
    out[i, 0] = 0.0
    if max_degree >= 1:
        out[i, 1] = 1.0
    q_prev = 1.0
    q_cur = x
    for k in range(1, max_degree):
        n = k + 1
        out[i, n] = n * (n + 2.0 * alpha) / scale * q_cur
        q_next = ((2.0 * k + two_a1) * x * q_cur - k * q_prev) / (k + two_a1)
        q_prev = q_cur
        q_cur = q_next


def clenshaw_tables(L, two_a, a_tab, b_tab):  # pragma: no cover - compiled
    """Fill ``a_tab[k] = A_k`` (k = 1..L) and ``b_tab[k] = B_k`` (k = 2..L+1); return
    :math:`B_1`. Tabulated once per call: the divisions dominated the per-point cost (1.6x)."""
    for k in range(1, L + 1):
        a_tab[k] = (2.0 * k + two_a) / (k + two_a)
        b_tab[k + 1] = (k + 1.0) / (k + 1.0 + two_a)
    return 1.0 / (1.0 + two_a)


def clenshaw_point(x, coeffs, a_tab, b_tab, b_1, want_deriv):  # pragma: no cover - compiled
    """``(sum_n c_n P_n(x), its x-derivative)`` (the derivative 0 unless ``want_deriv``)."""
    L = coeffs.shape[0] - 1
    if L == 0:
        return coeffs[0], 0.0
    y1 = 0.0  # y_{k+1}
    y2 = 0.0  # y_{k+2}
    d1 = 0.0
    d2 = 0.0
    for k in range(L, 0, -1):
        a_k = a_tab[k]
        b_k1 = b_tab[k + 1]
        y0 = coeffs[k] + a_k * x * y1 - b_k1 * y2
        if want_deriv:
            d0 = a_k * y1 + a_k * x * d1 - b_k1 * d2
            d2 = d1
            d1 = d0
        y2 = y1
        y1 = y0
    value = coeffs[0] + x * y1 - b_1 * y2
    if want_deriv:
        return value, y1 + x * d1 - b_1 * d2
    return value, 0.0


def pair_terms(t, v, d, g):  # pragma: no cover - compiled
    """One entry of a zonal pair's reverse mode from the series' value ``v`` and derivative ``d`` at
    ``t`` and the output weight ``g``: ``(g (v - t d), g d)`` (what
    :func:`spherelab.sphere.lift.lifted_row_gradients` takes), the derivative dropped at
    :math:`|t| = 1`, where its factor vanishes."""
    if t == 1.0 or t == -1.0:
        d = 0.0
    return g * (v - t * d), g * d
