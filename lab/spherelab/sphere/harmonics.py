r"""Real orthonormal spherical harmonics on :math:`S^{d-1}` in any dimension :math:`d \ge 2`.

Construction (explicit, no precomputed tables)
----------------------------------------------
We use the Gelfand–Tsetlin (hyperspherical) basis, written in Cartesian, homogeneous form so
that no angle, no division by a partial norm and no table is ever needed. Peel the coordinates
off one at a time: with :math:`\rho_k^2 = x_1^2 + \dots + x_k^2`, a *solid* harmonic of degree
:math:`m_k` in :math:`x_1..x_k` is

.. math:: H^{(k)}_{m_k, \mu}(x_1..x_k) = A^{(k)}_{n,\lambda}\; \rho_k^{\,n}\,
          C_n^{\lambda}\!\big(x_k / \rho_k\big)\; H^{(k-1)}_{m_{k-1}, \mu}(x_1..x_{k-1}),
          \qquad n = m_k - m_{k-1},\ \lambda = m_{k-1} + \tfrac{k-2}{2},

for :math:`0 \le m_{k-1} \le m_k`, starting from the circle
:math:`H^{(2)}_0 = 1`, :math:`H^{(2)}_{m,\cos} + i H^{(2)}_{m,\sin} = \sqrt2 (x_1 + i x_2)^m`.
Because the surface measure factorises as
:math:`d\bar\sigma_{k-1} = \omega_k (1-t^2)^{(k-3)/2} dt\, d\bar\sigma_{k-2}` with
:math:`t = x_k`, orthonormality of the product reduces to the orthogonality of
:math:`C_n^\lambda` for the weight :math:`(1-t^2)^{\lambda - 1/2}`, which fixes

.. math:: A^{(k)}_{n,\lambda} = \big(\omega_k\, h_n^\lambda\big)^{-1/2}, \qquad
          h_n^\lambda = \frac{\pi\, 2^{1-2\lambda}\,\Gamma(n + 2\lambda)}
                             {n!\,(n + \lambda)\,\Gamma(\lambda)^2}.

The branching rule :math:`N(\ell, k) = \sum_{m \le \ell} N(m, k-1)` shows the products span each
degree. On the unit sphere :math:`\rho_d = 1` and the :math:`d`-level products are the orthonormal
harmonics :math:`\phi_{\ell j}` (normalised measure, :math:`\phi_{0} = 1`); d = 2 gives
:math:`\sqrt2\cos\ell\theta, \sqrt2\sin\ell\theta`.

Stability: each factor :math:`\rho^n C_n^\lambda(x_k/\rho)` is evaluated by the homogeneous form of
the normalised recurrence (:math:`G_{j+1} = ((2j+2\lambda) x_k G_j - j\rho^2 G_{j-1})/(j + 2\lambda)`,
:math:`|G_j| \le \rho^j \le 1`) and multiplied by a constant computed in log space; the product of
the factors is bounded by the addition theorem, :math:`\sum_j \phi_{\ell j}(x)^2 = N(\ell, d)`, so
no intermediate overflows or cancels. The tests check the addition theorem to 1e-11 up to d = 17
and orthonormality by exact product quadrature.

Each feature is a product of at most :math:`\min(L, d-1)` non-trivial factors (every factor with
:math:`n \ge 1` uses up at least one degree), so evaluation costs :math:`O(M \min(L, d-1))` per
point plus :math:`O(d L^2)` for the factor tables, run in parallel over chunks of points.

References: Dai & Xu (2013) *Approximation theory and harmonic analysis on spheres and balls*,
Thm. 1.5.1 (hyperspherical basis); Avery (1989); Dutordoir, PhD report App. A; ``docs/design.md`` §1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from numba import prange

from .._validation import check_degree, check_dim, check_finite_array, check_points_on_sphere
from ..backend.jit import jit
from ..threads import policy
from .special import cumulative_num_harmonics, num_harmonics

__all__ = ["SphericalHarmonics"]

_CHUNK = 64  # points per parallel work item: buffers stay in L1/L2


def _physical_memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


@dataclass(frozen=True)
class _Plan:
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
def _build_plan(dim: int, L: int) -> _Plan:
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
    return _Plan(dim, L, deg, const, index, buffer_size)


def _labels(dim: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Gelfand–Tsetlin labels in column order (same enumeration as :func:`_build_plan`)."""
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


@jit(parallel=False)
def _inverse_norm_powers(x, rpow):  # pragma: no cover - compiled
    """rpow[n] = |x|^(-n), correctly rounded for |x| within rounding of 1.

    The harmonics are evaluated as homogeneous polynomials, so a row whose norm is 1 + 1e-16
    (as any normalised float row is) would scale all N(l, d) harmonics of degree l by the same
    factor 1 + l e-16: a rounding bias that accumulates in the addition theorem. |x|^2 - 1 is
    computed without rounding (Dekker products, two-sum) and the powers from it.
    """
    hi = 0.0
    lo = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        p = v * v
        cv = 134217729.0 * v
        vh = cv - (cv - v)
        vl = v - vh
        e = ((vh * vh - p) + 2.0 * vh * vl) + vl * vl
        s = hi + p
        bp = s - hi
        err = (hi - (s - bp)) + (p - bp)
        hi = s
        lo += err + e
    log_r2 = np.log1p((hi - 1.0) + lo)
    for n in range(rpow.shape[0]):
        rpow[n] = np.exp(-0.5 * n * log_r2)


@jit(parallel=False)
def _fill_factors(x, L, buf, rpow):  # pragma: no cover - compiled
    """Per-point factor values: circle powers (x1 + i x2)^m, then rho_k^n P_n^lam(x_k / rho_k),
    each divided by |x|^(its degree) so that the product is exactly scale invariant."""
    _inverse_norm_powers(x, rpow)
    _fill_core(x, L, buf, rpow)


@jit(parallel=False)
def _fill_core(x, L, buf, rpow):  # pragma: no cover - compiled
    """Factor values scaled by rpow[degree] (ones: the solid harmonics' raw factors)."""
    d = x.shape[0]
    buf[0] = 1.0
    x0 = x[0]
    x1 = x[1]
    c = 1.0
    s = 0.0
    for m in range(1, L + 1):
        c_new = c * x0 - s * x1
        s = s * x0 + c * x1
        c = c_new
        buf[2 * m - 1] = c * rpow[m]
        buf[2 * m] = s * rpow[m]
    rho2 = x0 * x0 + x1 * x1
    T = L * (L + 1) // 2
    for k in range(3, d + 1):
        xk = x[k - 1]
        rho2 += xk * xk
        base = 1 + 2 * L + (k - 3) * T
        off = 0
        for m in range(L):
            two_lam = 2.0 * m + (k - 2)
            g_prev = 1.0
            g_cur = xk
            buf[base + off] = g_cur * rpow[1]
            off += 1
            for j in range(1, L - m):
                g_next = ((2.0 * j + two_lam) * xk * g_cur - j * rho2 * g_prev) / (j + two_lam)
                g_prev = g_cur
                g_cur = g_next
                buf[base + off] = g_cur * rpow[j + 1]
                off += 1


@jit(parallel=True)
def _eval_kernel(X, L, const, index, buffer_size, out):  # pragma: no cover
    n_points = X.shape[0]
    M = index.shape[0]
    P = index.shape[1]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        rpow = np.empty(L + 1)
        start = ch * _CHUNK
        stop = min(start + _CHUNK, n_points)
        for i in range(start, stop):
            _fill_factors(X[i], L, buf, rpow)
            row = out[i]
            if P == 1:
                for f in range(M):
                    row[f] = const[f] * buf[index[f, 0]]
            elif P == 2:
                for f in range(M):
                    row[f] = const[f] * buf[index[f, 0]] * buf[index[f, 1]]
            else:
                for f in range(M):
                    v = const[f]
                    for p in range(P):
                        v *= buf[index[f, p]]
                    row[f] = v


class SphericalHarmonics:
    r"""All real orthonormal spherical harmonics of degree :math:`0..L` on :math:`S^{d-1}`.

    Calling the object on an ``(N, d)`` array of unit vectors returns the ``(N, M)`` matrix
    :math:`\Phi_{n, m} = \phi_m(x_n)`, :math:`M = \sum_{\ell \le L} N(\ell, d)`, columns ordered
    by degree. The harmonics are orthonormal for the normalised surface measure
    (:math:`\int \phi_m \phi_{m'} d\bar\sigma = \delta_{mm'}`, :math:`\phi_0 = 1`) and satisfy the
    addition theorem :math:`\sum_j \phi_{\ell j}(x)\phi_{\ell j}(x') = Z_\ell(x^\top x')`.
    Nothing is precomputed or downloaded: any (d, L) whose output fits in memory works at once.

    Parameters
    ----------
    dim
        Ambient dimension :math:`d \ge 2` (points live on :math:`S^{d-1} \subset R^d`).
    max_degree
        Largest degree L (inclusive), L >= 0.

    Attributes
    ----------
    degrees : numpy.ndarray
        ``(M,)`` degree of each column.
    num_features : int
        M.

    Examples
    --------
    >>> import numpy as np, spherelab
    >>> Y = spherelab.SphericalHarmonics(9, 4)
    >>> Y.num_features
    660
    >>> X = np.random.default_rng(0).normal(size=(5, 9))
    >>> Phi = Y(X / np.linalg.norm(X, axis=1, keepdims=True))
    >>> Phi.shape
    (5, 660)

    References
    ----------
    Dai & Xu (2013), Thm. 1.5.1; Dutordoir, PhD report App. A; see the module docstring for the construction.
    """

    def __init__(self, dim: int, max_degree: int) -> None:
        self.dim = check_dim(dim)
        self.max_degree = check_degree(max_degree)
        M = cumulative_num_harmonics(self.max_degree, self.dim)
        P = max(1, min(self.max_degree, self.dim - 1))
        plan_bytes = M * (4 * P + 16)
        if M >= 2**31 or plan_bytes > _physical_memory_bytes() // 4:
            raise ValueError(
                f"SphericalHarmonics(dim={self.dim}, max_degree={self.max_degree}) would produce "
                f"{M:,} features (one row of the output alone takes {8 * M / 2**30:,.1f} GiB); "
                "reduce max_degree or dim (see spherelab.num_harmonics)"
            )
        self._plan = _build_plan(self.dim, self.max_degree)
        self._labels: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def degrees(self) -> np.ndarray:
        """Degree of each column, shape ``(M,)``, non-decreasing."""
        return self._plan.degrees

    @property
    def multi_indices(self) -> np.ndarray:
        r"""Gelfand–Tsetlin label of each column, shape ``(M, d - 1)``: the degrees
        :math:`(m_d \ge m_{d-1} \ge \dots \ge m_2)` of the feature restricted to the nested
        spheres in :math:`(x_1..x_k)`, :math:`k = d, \dots, 2` (so column 0 is the degree).
        See :attr:`trig` for the cos/sin label in the :math:`(x_1, x_2)` plane. On
        :math:`S^2`, :math:`m_2` is the usual order :math:`|m|` about the :math:`x_3` axis."""
        return self._label_arrays()[0]

    @property
    def trig(self) -> np.ndarray:
        """``(M,)`` 0 where the feature is a cosine in the azimuth of (x_1, x_2), 1 for a sine."""
        return self._label_arrays()[1]

    def _label_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        # built on first use only: (M, d - 1) integers can be large in high dimension
        if self._labels is None:
            self._labels = _labels(self.dim, self.max_degree)
        return self._labels

    @property
    def num_features(self) -> int:
        """Total number of harmonics M."""
        return int(self._plan.degrees.shape[0])

    def degree_slice(self, degree: int) -> slice:
        """Columns holding the harmonics of one degree."""
        degree = check_degree(degree, "degree")
        if degree > self.max_degree:
            raise ValueError(f"degree must be <= max_degree = {self.max_degree}, got {degree}")
        start = cumulative_num_harmonics(degree - 1, self.dim) if degree > 0 else 0
        return slice(start, start + num_harmonics(degree, self.dim))

    def __repr__(self) -> str:
        return (
            f"SphericalHarmonics(dim={self.dim}, max_degree={self.max_degree}, "
            f"num_features={self.num_features})"
        )

    def solid_vjp(self, X: Any, W: Any) -> np.ndarray:
        r"""Vector-Jacobian product with the *solid* harmonics :math:`H_m(x) = |x|^{\ell_m}
        \phi_m(\hat x)` (homogeneous polynomials): row n of the result is
        :math:`\nabla_x \sum_m W_{nm} H_m(x_n)`, shape ``(N, d)``.

        On the unit sphere the tangential gradient of :math:`\phi_m` is
        :math:`\nabla H_m - \ell_m \phi_m x`. Computed by reverse-mode differentiation of the
        evaluation (products and factor recurrences), O(M min(L, d-1)^2 + d L^2) per point.

        Parameters
        ----------
        X
            ``(N, d)`` points (any non-zero norm; the solid harmonics are evaluated as given).
        W
            ``(N, M)`` weights.
        """
        Xa = check_finite_array(X, "X", ndim=2)
        if Xa.shape[1] != self.dim:
            raise ValueError(f"X must have {self.dim} columns, got shape {Xa.shape}")
        Wa = check_finite_array(W, "W", ndim=2)
        if Wa.shape != (Xa.shape[0], self.num_features):
            raise ValueError(f"W must have shape {(Xa.shape[0], self.num_features)}, got {Wa.shape}")
        out = np.empty(Xa.shape)
        if Xa.shape[0] == 0:
            return out
        plan = self._plan
        with policy(Xa.shape[0] * self.num_features * 8):
            _vjp_kernel(
                np.ascontiguousarray(Xa), plan.max_degree, plan.const, plan.index,
                plan.buffer_size, np.ascontiguousarray(Wa), out,
            )
        return out

    def __call__(
        self,
        X: Any,
        *,
        out: np.ndarray | None = None,
        atol: float = 1e-6,
    ) -> np.ndarray:
        r"""Evaluate every harmonic at every point.

        Parameters
        ----------
        X
            ``(N, d)`` array of unit vectors (rows with ``|norm - 1| > atol`` are rejected;
            the rest are renormalised exactly).
        out
            Optional C-contiguous float64 ``(N, M)`` array to write into.
        atol
            Tolerance on the row norms.

        Returns
        -------
        numpy.ndarray
            ``(N, M)`` float64 matrix :math:`\Phi`.
        """
        Xn = check_points_on_sphere(X, self.dim, "X", atol=atol)
        N, M = Xn.shape[0], self.num_features
        if out is None:
            need = N * M * 8
            if need > _physical_memory_bytes():
                raise MemoryError(
                    f"the output would be {N:,} x {M:,} float64 = {need / 2**30:,.1f} GiB, more "
                    "than this machine's memory; evaluate X in chunks of rows and pass out="
                )
            out = np.empty((N, M))
        elif (
            not isinstance(out, np.ndarray)
            or out.shape != (N, M)
            or out.dtype != np.float64
            or not out.flags.c_contiguous
        ):
            raise ValueError(f"out must be a C-contiguous float64 array of shape {(N, M)}")
        if N == 0:
            return out
        plan = self._plan
        args = (Xn, plan.max_degree, plan.const, plan.index, plan.buffer_size)
        # about 4 flops per feature and point (products of factors), see spherelab.threads
        with policy(N * M * 4):
            _eval_kernel(*args, out)
        return out


@jit(parallel=True)
def _vjp_kernel(X, L, const, index, buffer_size, W, grad):  # pragma: no cover - compiled
    """grad[n] = d/dx sum_m W[n, m] H_m(x) at x = X[n], H_m the solid (homogeneous degree-l)
    harmonic: reverse-mode through the feature products and the factor recurrences."""
    n_points = X.shape[0]
    d = X.shape[1]
    M = index.shape[0]
    P = index.shape[1]
    T = L * (L + 1) // 2
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        bbar = np.empty(buffer_size)
        ones = np.ones(L + 1)
        rho2bar = np.empty(d + 1)
        g = np.empty(d)
        start = ch * _CHUNK
        stop = min(start + _CHUNK, n_points)
        for i in range(start, stop):
            x = X[i]
            _fill_core(x, L, buf, ones)
            bbar[:] = 0.0
            for f in range(M):
                w = W[i, f] * const[f]
                if w == 0.0:
                    continue
                for p in range(P):
                    slot = index[f, p]
                    if slot == 0:
                        continue
                    prod = w
                    for q in range(P):
                        if q != p:
                            prod *= buf[index[f, q]]
                    bbar[slot] += prod
            for j in range(d):
                g[j] = 0.0
                rho2bar[j] = 0.0
            rho2bar[d] = 0.0
            # level recurrences, from the last level down (rho_k^2 adjoints collected per k)
            rho2 = 0.0
            for j in range(d):
                rho2 += x[j] * x[j]
            for k in range(d, 2, -1):
                xk = x[k - 1]
                base = 1 + 2 * L + (k - 3) * T
                off = 0
                for m in range(L):
                    nmax = L - m
                    two_lam = 2.0 * m + (k - 2)
                    # recompute G_0..G_nmax for this (k, m) (cheap, avoids storing them)
                    gbar_next = 0.0  # adjoint of G_{j+1}
                    gbar_cur = bbar[base + off + nmax - 1]  # adjoint of G_nmax (slot only)
                    # walk j = nmax - 1 .. 1: G_{j+1} = a_j xk G_j - b_j rho2 G_{j-1}
                    for j in range(nmax - 1, 0, -1):
                        a_j = (2.0 * j + two_lam) / (j + two_lam)
                        b_j = j / (j + two_lam)
                        g_j = buf[base + off + j - 1]
                        g_jm1 = 1.0 if j == 1 else buf[base + off + j - 2]
                        # gbar_cur is the adjoint of G_{j+1}
                        g[k - 1] += gbar_cur * a_j * g_j
                        rho2bar[k] += -gbar_cur * b_j * g_jm1
                        new_cur = bbar[base + off + j - 1] + gbar_cur * a_j * xk + gbar_next
                        gbar_next = -gbar_cur * b_j * rho2
                        gbar_cur = new_cur
                    # G_1 = xk
                    g[k - 1] += gbar_cur
                    off += nmax
                rho2 -= xk * xk  # rho_{k-1}^2 for the next (lower) level
            # circle: (c_m + i s_m) = (x0 + i x1)^m, slots 2m-1 (cos) and 2m (sin)
            x0 = x[0]
            x1 = x[1]
            cbar = 0.0
            sbar = 0.0
            for m in range(L, 0, -1):
                cbar += bbar[2 * m - 1]
                sbar += bbar[2 * m]
                if m == 1:
                    g[0] += cbar
                    g[1] += sbar
                else:
                    c_prev = buf[2 * m - 3]
                    s_prev = buf[2 * m - 2]
                    g[0] += cbar * c_prev + sbar * s_prev
                    g[1] += -cbar * s_prev + sbar * c_prev
                    new_c = cbar * x0 + sbar * x1
                    new_s = -cbar * x1 + sbar * x0
                    cbar = new_c
                    sbar = new_s
            # rho_k^2 = sum_{j <= k} x_j^2
            acc = 0.0
            for k in range(d, 0, -1):
                if k >= 3:
                    acc += rho2bar[k]
                g[k - 1] += 2.0 * x[k - 1] * acc
            for j in range(d):
                grad[i, j] = g[j]
