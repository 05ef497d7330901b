r"""Constants of harmonic analysis on :math:`S^{d-1}`, computed in log space.

Conventions (``docs/design.md`` §1): :math:`\alpha = (d-2)/2`; the inner product on the sphere
uses the normalised surface measure; :math:`\Omega_k = 2\pi^{(k+1)/2}/\Gamma((k+1)/2)` is the area
of :math:`S^k`; :math:`\omega_d = \Omega_{d-2}/\Omega_{d-1}`.

All ``log_*`` functions use ``lgamma`` so they never overflow, whatever the dimension or degree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import gammaln

from .._validation import check_bool, check_degree, check_dim, check_finite_array

__all__ = [
    "num_harmonics",
    "log_num_harmonics",
    "cumulative_num_harmonics",
    "log_sphere_area",
    "log_omega",
    "log_gegenbauer_at_one",
    "alpha_of_dim",
]

_LOG_PI = math.log(math.pi)


def _degrees(degree: Any, name: str) -> np.ndarray:
    """Degrees as floats: finite, integral and >= 0 (a clear error naming ``name`` otherwise)."""
    deg = check_finite_array(degree, name)
    if np.any(deg < 0) or np.any(deg != np.round(deg)):
        raise ValueError(f"{name} must be integer degree(s) >= 0, got {degree!r}")
    return deg


def alpha_of_dim(dim: int) -> float:
    r"""Gegenbauer index :math:`\alpha = (d-2)/2` of the sphere :math:`S^{d-1} \subset R^d`."""
    return (check_dim(dim) - 2) / 2.0


def _num_harmonics_int(degree: int, dim: int) -> int:
    if degree == 0:
        return 1
    if degree == 1:
        return dim
    # dim P_l - dim P_{l-2}: homogeneous polynomials of degree l minus |x|^2 times those of l - 2.
    return math.comb(degree + dim - 1, dim - 1) - math.comb(degree + dim - 3, dim - 1)


def num_harmonics(degree: Any, dim: int) -> Any:
    r"""Number :math:`N(\ell, d)` of linearly independent spherical harmonics of degree
    :math:`\ell` on :math:`S^{d-1}`.

    .. math:: N(\ell, d) = \frac{2\ell + d - 2}{\ell}\binom{\ell + d - 3}{\ell - 1},
              \qquad N(0, d) = 1,

    computed exactly in integer arithmetic as :math:`\dim\mathcal P_\ell - \dim\mathcal P_{\ell-2}`.

    Parameters
    ----------
    degree
        Non-negative integer, or an integer array (then an ``int64`` array is returned; a
        ``ValueError`` is raised if a count does not fit in 64 bits — use
        :func:`log_num_harmonics` there).
    dim
        Ambient dimension :math:`d \ge 2`.

    Returns
    -------
    int or numpy.ndarray
        Exact count(s). Example: in :math:`d = 9`, degrees 0..4 give 1, 9, 44, 156, 450
        (cumulative 1, 10, 54, 210, 660).
    """
    dim = check_dim(dim)
    try:
        scalar = np.ndim(degree) == 0
    except ValueError:  # ragged nesting
        raise TypeError(f"degree must be an integer or an integer array, got {degree!r}") from None
    if scalar:
        return _num_harmonics_int(check_degree(degree, "degree"), dim)
    deg = np.asarray(degree)
    if not np.issubdtype(deg.dtype, np.integer):
        raise TypeError(f"degree must be integers, got dtype {deg.dtype}")
    if np.any(deg < 0):
        raise ValueError("degree must be >= 0")
    out = np.empty(deg.shape, dtype=np.int64)
    for idx, value in np.ndenumerate(deg):
        count = _num_harmonics_int(int(value), dim)
        if count >= 2**63:
            raise ValueError(
                f"N({int(value)}, {dim}) = {count} does not fit in int64; use log_num_harmonics"
            )
        out[idx] = count
    return out


def cumulative_num_harmonics(max_degree: int, dim: int) -> int:
    r"""Total number :math:`M = \sum_{\ell \le L} N(\ell, d)` of harmonics of degree at most L."""
    max_degree = check_degree(max_degree)
    dim = check_dim(dim)
    # Closed form: harmonics of degree <= L on S^{d-1} span the restrictions of polynomials of
    # degree <= L, i.e. dim P_L + dim P_{L-1} homogeneous parts.
    total = math.comb(max_degree + dim - 1, dim - 1)
    if max_degree >= 1:
        total += math.comb(max_degree + dim - 2, dim - 1)
    return total


def log_num_harmonics(degree: Any, dim: int, *, real: bool = False) -> Any:
    r""":math:`\log N(\ell, d)`, finite and to full relative precision for every dimension and degree.

    :math:`N(\ell, d) = \frac{2\ell + d - 2}{\ell}\binom{\ell + d - 3}{d - 2}`, and
    :math:`\log\binom{\ell + d - 3}{d - 2} = -\log(\ell + d - 2) - \log B(\ell, d - 1)` with the
    beta function from :func:`_log_beta` (the difference :math:`\log\Gamma(\ell + d - 2) - \log\Gamma(\ell)`
    as written loses up to 8 digits at d = 1e9). ``real=True`` accepts any real :math:`\ell \ge 0`, the
    same formula continued in :math:`\ell` above 1 (the spectra's tail sums integrate it), with
    :math:`N(0, d) = 1`.
    """
    dim = check_dim(dim)
    if check_bool(real, "real"):
        deg = check_finite_array(degree, "degree")
        if np.any(deg < 0):
            raise ValueError(f"degree must be >= 0, got {degree!r}")
    else:
        deg = _degrees(degree, "degree")
    safe = np.maximum(deg, 1.0)
    if dim == 2:  # N = 2 at every degree: the general form's logs of l would cancel to it
        val = np.full_like(safe, math.log(2.0))
    else:
        val = np.log((2.0 * safe + dim - 2.0) / safe) - np.log(safe + dim - 2.0) - _log_beta(safe, dim - 1.0)
    out = np.where(deg == 0, 0.0, val)
    return float(out) if np.ndim(degree) == 0 else out


#: the Stirling series of log Gamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2), in 1 / x^2 (Abramowitz &
#: Stegun 6.1.41); at x >= 10 its eight terms leave less than 1e-17
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


def _stirling_remainder(x: np.ndarray) -> np.ndarray:
    inv2 = 1.0 / (x * x)
    acc = np.zeros_like(x)
    for c in _STIRLING[::-1]:
        acc = acc * inv2 + c
    return acc / x


def _log_beta(a: Any, b: Any) -> Any:
    r""":math:`\log B(a, b) = \log\Gamma(a) + \log\Gamma(b) - \log\Gamma(a + b)` for a, b > 0, to full relative
    precision however large either is. With :math:`a \le b`, b >= 10:
    :math:`\log\Gamma(a + b) - \log\Gamma(b) =
    (b - \tfrac12)\log(1 + a/b) + a\log(a + b) - a + \delta(a + b) - \delta(b)`
    (:math:`\delta` the Stirling remainder): no difference of two large log-gammas (SciPy's ``betaln``
    is 1.6e-10 off at (1e3, 1e9) against mpmath)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    big = hi >= 10.0
    h = np.where(big, hi, 10.0)
    rise = (h - 0.5) * np.log1p(lo / h) + lo * np.log(lo + h) - lo
    rise = rise + (_stirling_remainder(lo + h) - _stirling_remainder(h))
    out = np.where(big, gammaln(lo) - rise, gammaln(lo) + gammaln(hi) - gammaln(lo + hi))
    return float(out) if out.ndim == 0 else out


def log_sphere_area(k: Any) -> Any:
    r""":math:`\log\Omega_k`, the log surface area of :math:`S^k \subset R^{k+1}`
    (:math:`\Omega_k = 2\pi^{(k+1)/2} / \Gamma((k+1)/2)`)."""
    kk = check_finite_array(k, "k")
    if np.any(kk < 0):
        raise ValueError("k must be >= 0")
    out = math.log(2.0) + 0.5 * (kk + 1.0) * _LOG_PI - gammaln(0.5 * (kk + 1.0))
    return float(out) if np.ndim(k) == 0 else out


def log_omega(dim: int) -> float:
    r""":math:`\log\omega_d`, :math:`\omega_d = \Omega_{d-2}/\Omega_{d-1}
    = \Gamma(d/2) / (\sqrt\pi\,\Gamma((d-1)/2))`: the constant of the Funk–Hecke formula for
    the normalised measure (``docs/design.md`` §1)."""
    dim = check_dim(dim)
    return float(gammaln(dim / 2.0) - 0.5 * _LOG_PI - gammaln((dim - 1) / 2.0))


def log_gegenbauer_at_one(n: Any, alpha: Any) -> Any:
    r""":math:`\log C_n^{\alpha}(1) = \log\Gamma(n + 2\alpha) - \log n! - \log\Gamma(2\alpha)`.

    Defined for :math:`\alpha > 0`; at :math:`\alpha = 0` the strict limit
    :math:`C_n^0 \equiv 0` (:math:`n \ge 1`) gives ``-inf`` and :math:`C_0^0 = 1` gives 0.
    """
    nn = _degrees(n, "n")
    aa = check_finite_array(alpha, "alpha")
    if np.any(aa < 0):
        raise ValueError("alpha must be >= 0 (alpha = (d - 2) / 2 with d >= 2)")
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = gammaln(nn + 2.0 * aa) - gammaln(nn + 1.0) - gammaln(np.where(aa > 0, 2.0 * aa, 1.0))
    out = np.where(aa > 0, pos, np.where(nn == 0, 0.0, -np.inf))
    out = np.where(nn == 0, 0.0, out)
    return float(out) if out.ndim == 0 else out
