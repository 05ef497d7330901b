r"""The evaluation plan of the spherical harmonics (:mod:`.harmonics`): for every feature, its
normalising constant (rational, rounded once in double-double) and the slots of the per-point
factor buffer whose product it is, level by level of the Gelfand–Tsetlin chain
:math:`S^1 \subset S^2 \subset \dots \subset S^{d-1}` (Dutordoir, PhD report, App. A; Avery 1989).
Built once per (d, L) and cached."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..backend.jit import jit

__all__ = ["Plan", "build_plan", "labels"]


@dataclass(frozen=True)
class Plan:
    """How to assemble every feature from a per-point buffer of factor values."""

    dim: int
    max_degree: int
    degrees: np.ndarray  # (M,) int64
    const: np.ndarray  # (M,) float64: the feature's normalising constant (all levels)
    index: np.ndarray  # (M, P) int32: buffer slots to multiply (slot 0 holds 1.0)
    buffer_size: int


def _squared_scale(k: int, m: int, n: int) -> float:
    r"""Square of the constant turning :math:`\rho^n P_n^\lambda(x_k/\rho)` into an orthonormal
    factor, :math:`C_n^\lambda(1)^2 / (\omega_k h_n^\lambda)`, :math:`\lambda = m + (k-2)/2`.

    It is rational: :math:`\tfrac{(2\lambda)_n}{n!}\,\tfrac{n+\lambda}{\lambda}\,
    \tfrac{(k/2)_m}{((k-1)/2)_m}`. Evaluating it exactly (then rounding once) instead of through
    differences of ``lgamma`` keeps every constant within one ulp; lgamma differences drift by
    ~1e-14 relative, which accumulates over thousands of harmonics in the addition theorem.
    """
    two_lam = 2 * m + k - 2
    value = Fraction(2 * n + two_lam, two_lam)
    for i in range(n):
        value *= Fraction(two_lam + i, i + 1)
    for i in range(m):
        value *= Fraction(k + 2 * i, k - 1 + 2 * i)
    return float(value)


@jit(parallel=False)
def _two_prod(a, b):  # pragma: no cover - compiled
    """Error-free product: a * b = p + e exactly (Dekker splitting; no FMA needed)."""
    p = a * b
    ca = 134217729.0 * a
    ah = ca - (ca - a)
    al = a - ah
    cb = 134217729.0 * b
    bh = cb - (cb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@jit(parallel=False)
def _extend_level(deg, c_hi, c_lo, index, count, L, base, scale2):  # pragma: no cover
    """Solid harmonics of level k from those of level k - 1 (both ordered by degree).

    Level-k entries of degree l are (l, parent) for every parent of degree <= l, in parent
    order; the parent's squared constant is multiplied (in double-double) by the factor's
    squared constant scale2[m, n], and a factor with n >= 1 takes the next free slot.
    """
    n_parent = deg.shape[0]
    upto = np.zeros(L + 1, dtype=np.int64)  # number of parents of degree <= l (a prefix)
    for p in range(n_parent):
        upto[deg[p]] += 1
    for ell in range(1, L + 1):
        upto[ell] += upto[ell - 1]
    size = 0
    for ell in range(L + 1):
        size += upto[ell]
    P = index.shape[1]
    new_deg = np.empty(size, dtype=np.int64)
    new_hi = np.empty(size)
    new_lo = np.empty(size)
    new_index = np.empty((size, P), dtype=np.int32)
    new_count = np.empty(size, dtype=np.int64)
    row = 0
    for ell in range(L + 1):
        for p in range(upto[ell]):
            m = deg[p]
            n = ell - m
            y = scale2[m, n]
            hi, e = _two_prod(c_hi[p], y)
            e += c_lo[p] * y
            s = hi + e
            new_hi[row] = s
            new_lo[row] = e - (s - hi)
            new_deg[row] = ell
            for q in range(P):
                new_index[row, q] = index[p, q]
            c = count[p]
            if n > 0:
                new_index[row, c] = base + m * L - m * (m - 1) // 2 + n - 1
                c += 1
            new_count[row] = c
            row += 1
    return new_deg, new_hi, new_lo, new_index, new_count


def _dd_sqrt(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """sqrt(hi + lo) rounded to double (one Newton step on the double-double value)."""
    s = np.sqrt(hi)
    p = s * s
    # exact residual hi - s^2 by splitting s (vectorised Dekker)
    cs = 134217729.0 * s
    sh = cs - (cs - s)
    sl = s - sh
    e = ((sh * sh - p) + 2.0 * sh * sl) + sl * sl
    return s + ((hi - p) - e + lo) / (2.0 * s)


@lru_cache(maxsize=32)
def build_plan(dim: int, L: int) -> Plan:
    P = max(1, min(L, dim - 1))
    T = L * (L + 1) // 2  # (m, n >= 1) pairs per level
    # Level 2 (the circle): [1, cos 1, sin 1, cos 2, sin 2, ...], already ordered by degree.
    n2 = 2 * L + 1
    deg = np.zeros(n2, dtype=np.int64)
    deg[1::2] = deg[2::2] = np.arange(1, L + 1)
    # Squared per-feature constants in double-double, one rounding at the end: every feature
    # gets its own correctly rounded constant, so rounding errors do not correlate across the
    # thousands of harmonics that share a factor (which would bias the addition theorem).
    const_hi = np.full(n2, 2.0)
    const_hi[0] = 1.0
    const_lo = np.zeros(n2)
    index = np.zeros((n2, P), dtype=np.int32)
    index[1:, 0] = np.arange(1, n2)
    count = (deg > 0).astype(np.int64)

    for k in range(3, dim + 1):
        base = 1 + 2 * L + (k - 3) * T
        # scale2[m, n]: squared constant of the factor with parent degree m and step n
        scale2 = np.ones((L + 1, L + 1))
        for m in range(L + 1):
            for n in range(L - m + 1):
                scale2[m, n] = _squared_scale(k, m, n)
        deg, const_hi, const_lo, index, count = _extend_level(
            deg, const_hi, const_lo, index, count, L, base, scale2
        )

    const = _dd_sqrt(const_hi, const_lo)
    buffer_size = 1 + 2 * L + max(dim - 2, 0) * T
    for arr in (deg, const, index):
        arr.setflags(write=False)
    return Plan(dim, L, deg, const, index, buffer_size)


def labels(dim: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Gelfand–Tsetlin labels in column order (same enumeration as :func:`build_plan`)."""
    deg = np.zeros(2 * L + 1, dtype=np.int64)
    deg[1::2] = deg[2::2] = np.arange(1, L + 1)
    path = deg[:, None]
    trig = np.zeros(deg.size, dtype=np.int8)
    trig[2::2] = 1
    for _ in range(3, dim + 1):
        order = np.concatenate([np.flatnonzero(deg <= ell) for ell in range(L + 1)])
        new_deg = np.concatenate([np.full(int((deg <= ell).sum()), ell) for ell in range(L + 1)])
        path = np.column_stack([new_deg, path[order]])
        trig = trig[order]
        deg = new_deg
    return path, trig
