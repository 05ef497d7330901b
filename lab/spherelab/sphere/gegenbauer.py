r"""Gegenbauer engine: tables, derivatives and Clenshaw series, stable in any dimension.

Everything is evaluated through the *normalised* polynomials

.. math:: P_n^{\alpha}(t) = C_n^{\alpha}(t) / C_n^{\alpha}(1), \qquad |P_n^{\alpha}(t)| \le 1
          \text{ on } [-1, 1],

by the three-term recurrence (never from monomial coefficients, which lose all accuracy by
degree ~30):

.. math:: P_0 = 1,\quad P_1 = t,\quad
          P_{k+1} = \frac{(2k + 2\alpha)\, t\, P_k - k\, P_{k-1}}{k + 2\alpha}\quad(k \ge 1).

At :math:`\alpha = 0` (:math:`d = 2`, the circle) this is exactly the Chebyshev recurrence, so
:math:`P_n^0 = T_n`: the normalised form *is* the :math:`\alpha \to 0` limit, with no special case.
Unnormalised values are :math:`C_n^\alpha(1) P_n^\alpha` with :math:`C_n^\alpha(1)` taken from log
space. Derivatives use :math:`\tfrac{d}{dt} P_n^{\alpha}
= \tfrac{n (n + 2\alpha)}{2\alpha + 1} P_{n-1}^{\alpha + 1}`, finite at :math:`t = \pm 1`.

Zonal functions use :math:`Z_\ell(t) = \tfrac{\ell+\alpha}{\alpha} C_\ell^\alpha(t)
= N(\ell, d)\, P_\ell^{\alpha}(t)` (``docs/design.md`` §1), which again needs no limit at d = 2.

References: DLMF §18.9 (recurrences), §18.17; Clenshaw (1955); Dutordoir, PhD report App. A.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .._validation import check_allocation, check_bool, check_degree, check_dim, check_finite_array, check_nonnegative
from ..backend.ops import Operations, as_operations
from ..threads import policy
from .gegenbauer_jit import elementwise_kernel, moments_kernel
from .special import alpha_of_dim, num_harmonics

__all__ = [
    "gegenbauer",
    "gegenbauer_table",
    "normalized_gegenbauer_table",
    "normalized_gegenbauer_derivative_table",
    "gegenbauer_series",
    "zonal_table",
    "zonal_series",
    "zonal_series_vjp",
]


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


def _check_alpha(alpha: Any) -> float:
    try:
        return check_nonnegative(alpha, "alpha")
    except ValueError:
        raise ValueError(f"alpha must be a finite number >= 0 (alpha = (d - 2)/2 for d >= 2), got {alpha!r}") from None


def _finite(values: np.ndarray, what: str, hint: str) -> np.ndarray:
    """``values`` when every one is finite; else an ``OverflowError`` saying what overflowed (a
    polynomial of degree n grows like :math:`|2t|^n` off [-1, 1], and :math:`C_n^\alpha(1)` like
    :math:`n^{2\alpha - 1}`) instead of an inf or NaN among the results."""
    if not np.all(np.isfinite(values)):
        raise OverflowError(f"{what} overflow float64 (beyond 1.8e308): {hint}")
    return values


def _flat_t(t: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    arr = check_finite_array(t, "t")
    return np.ascontiguousarray(arr.reshape(-1)), arr.shape


def _table_degree(max_degree: Any, points: int) -> int:
    """``max_degree`` of a table of ``points`` x (L + 1) values, refused before it is allocated
    when it cannot fit in memory."""
    L = check_degree(max_degree)
    check_allocation(16.0 * max(points, 1) * (L + 1.0), f"max_degree = {L:,} ({L + 1:,} degrees at {points:,} points)",
                     "lower max_degree")
    return L


def normalized_gegenbauer_table(max_degree: int, alpha: float, t: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
    r"""All normalised polynomials :math:`P_0^\alpha(t), \dots, P_L^\alpha(t)` at once.

    Parameters
    ----------
    max_degree
        L >= 0.
    alpha
        :math:`\alpha \ge 0`; :math:`\alpha = 0` gives the Chebyshev polynomials :math:`T_n`.
    t
        Array of any shape (any finite reals; on [-1, 1] every value is bounded by 1).
    ops
        The operations (or the name of the device) that compute it (:func:`spherelab.backend.resolve`).

    Returns
    -------
    numpy.ndarray
        Shape ``t.shape + (L + 1,)``.
    """
    a = _check_alpha(alpha)
    flat, shape = _flat_t(t)
    L = _table_degree(max_degree, flat.shape[0])
    table = as_operations(ops).gegenbauer_table(L, a, flat)
    if flat.size and float(np.max(np.abs(flat))) > 1.0:  # (bounded by 1 on [-1, 1]: nothing to check there)
        table = _finite(table, f"P_n^alpha(t) for n <= {L} at |t| up to {float(np.max(np.abs(flat))):.3g}",
                        "a polynomial of degree n grows like |2t|^n off [-1, 1]; keep t on the sphere's [-1, 1]")
    return table.reshape(shape + (L + 1,))


def normalized_gegenbauer_derivative_table(max_degree: int, alpha: float, t: Any, *,
                                           ops: Operations | str = "cpu") -> np.ndarray:
    r"""Derivatives :math:`\tfrac{d}{dt} P_n^\alpha(t)` for n = 0..L; shape ``t.shape + (L+1,)``.

    Uses :math:`\tfrac{d}{dt}P_n^\alpha = \tfrac{n(n+2\alpha)}{2\alpha+1} P_{n-1}^{\alpha+1}`,
    exact and finite at :math:`t = \pm 1` (:math:`P_n^{\alpha\prime}(1) = n(n+2\alpha)/(2\alpha+1)`);
    computed by ``ops`` (an :class:`~spherelab.backend.Operations` or a device name).
    """
    a = _check_alpha(alpha)
    flat, shape = _flat_t(t)
    L = _table_degree(max_degree, flat.shape[0])
    return as_operations(ops).gegenbauer_derivative_table(L, a, flat).reshape(shape + (L + 1,))


def gegenbauer_table(max_degree: int, alpha: float, t: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
    r"""All Gegenbauer polynomials :math:`C_0^\alpha(t), \dots, C_L^\alpha(t)`.

    Computed as :math:`C_n^\alpha(1) P_n^\alpha(t)`; values can overflow to ``inf`` for very
    large :math:`\alpha` and n (use :func:`normalized_gegenbauer_table` there). At
    :math:`\alpha = 0` returns the strict limit :math:`C_n^0 = 0` for n >= 1 (as
    ``scipy.special.eval_gegenbauer`` does); the meaningful d = 2 objects are
    :math:`P_n^0 = T_n` and :math:`Z_\ell = 2T_\ell`.
    """
    table = normalized_gegenbauer_table(max_degree, alpha, t, ops=ops)
    at_one = _finite(_gegenbauer_at_one(table.shape[-1] - 1, _check_alpha(alpha)),
                     f"C_n^alpha(1) for n <= {table.shape[-1] - 1}, alpha = {alpha}",
                     "use normalized_gegenbauer_table (P_n = C_n / C_n(1), bounded by 1 on [-1, 1])")
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite(table * at_one, f"C_n^alpha(t) for n <= {table.shape[-1] - 1}, alpha = {alpha}",
                       "use normalized_gegenbauer_table (P_n = C_n / C_n(1), bounded by 1 on [-1, 1])")


def _gegenbauer_at_one(max_degree: int, alpha: float) -> np.ndarray:
    """C_n^a(1) = (2a)_n / n!, n = 0..L, as a running product (accurate to ~sqrt(n) ulps)."""
    k = np.arange(max_degree, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.concatenate([[1.0], np.cumprod((2.0 * alpha + k) / (k + 1.0))])


def gegenbauer(n: Any, alpha: Any, t: Any) -> np.ndarray:
    r"""Elementwise Gegenbauer polynomial :math:`C_n^{\alpha}(t)` (arguments broadcast).

    Parameters
    ----------
    n
        Non-negative integer degree(s).
    alpha
        :math:`\alpha \ge 0`. At 0 the strict limit is returned (:math:`C_n^0 = 0`, n >= 1),
        matching ``scipy.special.eval_gegenbauer``.
    t
        Finite real argument(s): the polynomial's value anywhere (outside [-1, 1] it grows like
        :math:`|t|^n`); NaN, infinities and complex numbers are refused.

    Returns
    -------
    numpy.ndarray or float
        Error at most ~1e-13 :math:`C_n^\alpha(1)` for n <= 200, d <= 128 (tested against
        mpmath).

    Examples
    --------
    >>> float(gegenbauer(2, 1.5, 0.5))  # 1.5 * (2 * 2.5 * 0.25 - 1) = 0.375
    0.375
    """
    n_arr = np.asarray(n)
    if n_arr.dtype.kind not in "iu":
        if n_arr.dtype.kind == "f" and np.all(np.isfinite(n_arr)) and np.all(n_arr == np.round(n_arr)):
            n_arr = n_arr.astype(np.int64)
        else:
            raise TypeError(f"n must be integer degree(s), got {n!r}")
    if np.any(n_arr < 0):
        raise ValueError("n must be >= 0")
    a_arr = check_finite_array(alpha, "alpha")
    if np.any(a_arr < 0):
        raise ValueError("alpha must be >= 0 (alpha = (d - 2)/2 for d >= 2)")
    t_arr = check_finite_array(t, "t")
    # copies: writing through a broadcast view is being removed from NumPy
    n_b, a_b, t_b = (np.array(x) for x in np.broadcast_arrays(n_arr.astype(np.int64), a_arr, t_arr))
    shape = t_b.shape
    flat_n = np.ascontiguousarray(n_b.reshape(-1))
    flat_a = np.ascontiguousarray(a_b.reshape(-1))
    out = np.empty(flat_n.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        elementwise_kernel(flat_n, flat_a, np.ascontiguousarray(t_b.reshape(-1)), out)
    out = _finite(out.reshape(shape), "C_n^alpha(t)", "its magnitude grows like |2t|^n off [-1, 1] and like "
                  "n^(2 alpha - 1) at t = 1; use normalized_gegenbauer_table for large n and alpha on [-1, 1]")
    return float(out) if out.ndim == 0 else out


def gegenbauer_series(
    coeffs: Any,
    alpha: float,
    t: Any,
    *,
    normalized: bool = False,
    derivative: bool = False,
    ops: Operations | str = "cpu",
) -> Any:
    r"""Clenshaw sum :math:`\sum_{n=0}^{L} c_n C_n^\alpha(t)` (or :math:`\sum c_n P_n^\alpha(t)`
    with ``normalized=True``), and optionally its t-derivative.

    Parameters
    ----------
    coeffs
        1-d array of L + 1 coefficients.
    alpha
        :math:`\alpha \ge 0` (at 0 use ``normalized=True``: the Chebyshev series).
    t
        Array of any shape of finite reals (the series' value also outside [-1, 1]).
    normalized
        Interpret ``coeffs`` in the normalised basis :math:`P_n^\alpha`.
    derivative
        Also return :math:`\tfrac{d}{dt}` of the series.
    ops
        The operations (or the name of the device) that evaluate it.

    Returns
    -------
    values or (values, derivatives), each of shape ``t.shape``.
    """
    c = check_finite_array(coeffs, "coeffs", ndim=1)
    if c.shape[0] == 0:
        raise ValueError("coeffs must contain at least one coefficient")
    a = _check_alpha(alpha)
    normalized, derivative = check_bool(normalized, "normalized"), check_bool(derivative, "derivative")
    if not normalized:
        if a == 0.0 and c.shape[0] > 1:
            raise ValueError(
                "alpha = 0: C_n^0 vanishes for n >= 1; pass normalized=True for a Chebyshev series"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            c = c * _gegenbauer_at_one(c.shape[0] - 1, a)
        if not np.all(np.isfinite(c)):
            raise ValueError(
                "coeffs * C_n^alpha(1) overflows for this alpha; use normalized=True with "
                "coefficients in the basis P_n = C_n / C_n(1)"
            )
    flat, shape = _flat_t(t)
    out = as_operations(ops).clenshaw(np.ascontiguousarray(c), a, flat, derivative)
    if derivative:
        return out[0].reshape(shape), out[1].reshape(shape)
    return out.reshape(shape)


def zonal_table(max_degree: int, dim: int, t: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
    r"""Zonal functions :math:`Z_\ell(t) = N(\ell, d) P_\ell^\alpha(t)`, :math:`\ell = 0..L`.

    By the addition theorem :math:`Z_\ell(x^\top x') = \sum_j \phi_{\ell j}(x)\phi_{\ell j}(x')`
    and :math:`Z_\ell(1) = N(\ell, d)`; d = 2 gives :math:`Z_0 = 1`, :math:`Z_\ell = 2T_\ell`.
    Shape ``t.shape + (L + 1,)``; ``t`` any finite reals (the polynomials' values also outside
    [-1, 1], where no inner product of unit vectors lies).
    """
    dim = check_dim(dim)
    L = _table_degree(max_degree, np.size(t) if isinstance(t, np.ndarray) else 1)
    counts = num_harmonics(np.arange(L + 1), dim) if L < 64 else None
    counts = (
        counts.astype(np.float64)
        if counts is not None
        else np.array([float(num_harmonics(ell, dim)) for ell in range(L + 1)])
    )
    return normalized_gegenbauer_table(L, alpha_of_dim(dim), t, ops=ops) * counts


def zonal_series(coeffs: Any, dim: int, t: Any, *, derivative: bool = False, ops: Operations | str = "cpu") -> Any:
    r""":math:`\sum_\ell c_\ell Z_\ell(t)` by Clenshaw (e.g. a truncated Mercer kernel
    :math:`\kappa_L(t) = \sum_{\ell \le L} \lambda_\ell Z_\ell(t)`), optionally with its
    t-derivative, evaluated by ``ops``."""
    dim = check_dim(dim)
    c = check_finite_array(coeffs, "coeffs", ndim=1)
    derivative = check_bool(derivative, "derivative")
    return gegenbauer_series(c * _counts(dim, c.shape[0]), alpha_of_dim(dim), t, normalized=True, derivative=derivative,
                             ops=ops)


def zonal_series_vjp(weights: Any, dim: int, t: Any, max_degree: int) -> np.ndarray:
    r""":math:`\sum_i w_i Z_\ell(t_i)` for :math:`\ell = 0..L`, ``(L + 1,)``: the gradient of
    :func:`zonal_series` at ``t`` with respect to its coefficients, for the output weights ``w``
    (the shape of ``t``). One recurrence per point on the host, without the ``t.shape + (L + 1,)``
    table of :func:`zonal_table` (``(M, M, L + 1)`` for an M x M Gram block).
    """
    dim = check_dim(dim)
    flat, shape = _flat_t(t)
    L = _table_degree(max_degree, 64)  # (blocks of partial sums)
    w = check_finite_array(weights, "weights")
    if w.shape != shape:
        raise ValueError(f"weights must have the shape of t {shape}, got {w.shape}")
    blocks = max(1, min(64, flat.shape[0] // 4096))  # partial sums per block, added in a fixed order
    out = np.zeros((blocks, L + 1))
    with policy(flat.shape[0] * (L + 1) * 5):
        moments_kernel(flat, np.ascontiguousarray(w.reshape(-1)), L, alpha_of_dim(dim), out)
    return out.sum(axis=0) * _counts(dim, L + 1)


@functools.lru_cache(maxsize=256)
def _counts(dim: int, n: int) -> np.ndarray:
    # N(l, d) as floats for l < n (called on every series evaluation: cached)
    out = np.array([float(num_harmonics(ell, dim)) for ell in range(n)])
    out.setflags(write=False)
    return out
