r"""The Euclidean Matérn kernels restricted to the sphere (chordal distance), nu in {1/2, 3/2, 5/2, inf}."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from .._state import Hyper
from .._validation import check_length
from .bessel import ive_large, ratio_complement
from .matern_jit import NU_CODES
from .matern_series import series_levels
from .quadrature import QuadratureSpectrum, quadrature_floor, quadrature_spectrum

__all__ = ["Matern"]

_NUS = {0.5: "1/2", 1.5: "3/2", 2.5: "5/2", math.inf: "inf"}


def _check_nu(nu: Any, name: str = "nu") -> float:
    try:
        v = float(nu)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be one of 1/2, 3/2, 5/2 or inf, got {nu!r}") from None
    if v not in _NUS:
        raise ValueError(f"{name} must be one of 1/2, 3/2, 5/2 or inf, got {nu!r}")
    return v


def _taylor(prefactor: tuple[Fraction, ...], terms: int = 40) -> np.ndarray:
    """Taylor coefficients c_0..c_{terms-1} of p(a) e^{-a}, p a Matern polynomial prefactor, summed in
    exact rationals: in floats the Matern-5/2 c_3 (= 1/2 - 1/6 - 1/3 = 0) came out 5.6e-17, a false
    a^3 term that swamped the true a^5 of level 3 at long lengthscales (6e-9 off at 1e4)."""
    return np.array([float(sum(p * Fraction((-1) ** (k - i), math.factorial(k - i))
                               for i, p in enumerate(prefactor) if i <= k)) for k in range(terms)])


#: kappa = sum_k c_k a^k: a = sqrt(2 nu) r for nu = 1/2, 3/2, 5/2; a = r and exp(-a^2 / 2) for nu = inf
_TAYLOR = {0.5: _taylor((Fraction(1),)), 1.5: _taylor((Fraction(1), Fraction(1))),
           2.5: _taylor((Fraction(1), Fraction(1), Fraction(1, 3))),
           np.inf: np.array([(-0.5) ** (k // 2) / math.factorial(k // 2) if k % 2 == 0 else 0.0 for k in range(40)])}


def _series(coeffs: np.ndarray, a: np.ndarray, skip_even_below: int) -> np.ndarray:
    """sum_k c_k a^k over k, leaving out the even k < ``skip_even_below`` (Horner, highest first)."""
    c = coeffs.copy()
    c[0:skip_even_below:2] = 0.0
    acc = np.zeros_like(a)
    for ck in c[::-1]:
        acc = acc * a + ck
    return acc


class Matern(QuadratureSpectrum):
    r"""Euclidean Matérn kernel restricted to the sphere: :math:`\kappa(t) = m_\nu(\rho/\ell)`
    at the chordal distance :math:`\rho = \sqrt{2 - 2t}`, with
    :math:`m_{1/2} = e^{-r}`, :math:`m_{3/2} = (1 + \sqrt3 r)e^{-\sqrt3 r}`,
    :math:`m_{5/2} = (1 + \sqrt5 r + \tfrac53 r^2)e^{-\sqrt5 r}`, :math:`m_\infty = e^{-r^2/2}`.
    Positive definite on every sphere (Schoenberg), so :math:`\lambda_\ell \ge 0`; the spectrum
    is the Funk–Hecke quadrature in the angle variable, where the shape is analytic.
    This is the stationary kernel of the spectra-mismatch analysis (Dutordoir, PhD report §4.3.3,
    Tiao, thesis §3.4).

    Parameters
    ----------
    nu
        Smoothness: 1/2, 3/2, 5/2 or ``numpy.inf`` (squared exponential, whose spectrum is in
        closed form).
    lengthscale
        :math:`\ell` (> 0), in units of the chordal distance on the unit sphere.
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> k = sl.kernels.Matern(1.5, 0.5)
    >>> np.round(k.K(np.array([[0.0], [1.0]])), 4).tolist()   # k(x, x) = r^2 kappa(1), r^2 = x^2 + b^2
    [[1.0, 0.3643], [0.3643, 2.0]]
    """

    shape_params = ("lengthscale",)
    structure = ("nu",)
    nu = Hyper(_check_nu, "smoothness: 1/2, 3/2, 5/2 or inf")
    lengthscale = Hyper(check_length, "lengthscale of the chordal distance, in [1e-100, 1e100]")
    #: use the compiled kernels of :mod:`.matern_jit` (the tests switch it off to compare paths)
    fused = True

    def __init__(
        self,
        nu: float = 1.5,
        lengthscale: float = 1.0,
        variance: float = 1.0,
        bias: float = 1.0,
        input_scale: Any = 1.0,
    ):
        self.nu = nu
        self.lengthscale = lengthscale
        super().__init__(variance, bias, input_scale)

    def cache_key(self):
        return ("Matern", self.nu, self.lengthscale)

    def fused_code(self):
        return NU_CODES.get(self.nu) if self.fused else None

    def fused_values(self, ops, T, r1, r2, same: bool = False, *, device: bool = False):
        r""":math:`r_i r_j\sigma^2 m(\rho_{ij})` ``(n1, n2)`` from the unit lifted rows' inner products
        ``T`` by the compiled shape: host arrays (``ops.matern_values``), or with ``device`` the
        device's (``ops.zonal_columns``); ``same``: ``T`` is a set against itself (host only)."""
        if device:
            return ops.zonal_columns(T, r1, r2, self.fused_code(), self.lengthscale, self.variance)
        return ops.matern_values(T, r1, r2, self.fused_code(), self.lengthscale, self.variance, same)

    def fused_backward(self, ops, T, G, r1, r2, same: bool = False, *, device: bool = False):
        r"""``(A, B, sums)`` of :meth:`fused_values` given :math:`\partial L/\partial K` ``G``:
        :math:`A = G\odot\sigma^2(\kappa - t\kappa')`, :math:`B = G\odot\sigma^2\kappa'` and
        ``{"variance": ..., "lengthscale": ...}``, the compiled pass's sums by their names."""
        if device:
            A, B, dvar, dlen = ops.zonal_columns_backward(T, G, r1, r2, self.fused_code(), self.lengthscale,
                                                          self.variance)
        else:
            A, B, dvar, dlen = ops.matern_backward(T, G, r1, r2, self.fused_code(), self.lengthscale,
                                                   self.variance, same)
        return A, B, {"variance": dvar, "lengthscale": dlen}

    #: the quadrature evaluates the shape at u = 1 - t: on the circle at lengthscale 2.5e-4 the
    #: rounding of t = cos(theta) near 1 cost the spectrum 1e-6 of its value (mpmath; 1.7e-5 for
    #: nu = 1/2 at 2.2e-6)
    of_gap = True

    def _r(self, t):
        return self._r_of_gap(1.0 - np.clip(t, -1.0, 1.0))

    def _r_of_gap(self, u):
        return np.sqrt(np.maximum(2.0 * u, 0.0)) / self.lengthscale

    def quadrature_shape(self, u):
        return self._m_and_dm(self._r_of_gap(u))[0]

    def quadrature_gradients(self, u):
        r = self._r_of_gap(u)
        return {"lengthscale": -self._m_and_dm(r)[1] * r / self.lengthscale}

    def _m_and_dm(self, r):
        nu = self.nu
        if nu == 0.5:
            e = np.exp(-r)
            return e, -e
        if nu == 1.5:
            a = math.sqrt(3.0) * r
            e = np.exp(-a)
            return (1.0 + a) * e, -3.0 * r * e
        if nu == 2.5:
            a = math.sqrt(5.0) * r
            e = np.exp(-a)
            return (1.0 + a + 5.0 / 3.0 * r * r) * e, -5.0 / 3.0 * r * (1.0 + a) * e
        e = np.exp(-0.5 * r * r)
        return e, -r * e

    def unit_shape(self, t, ops):
        return self.quadrature_shape(1.0 - np.clip(t, -1.0, 1.0))

    @property
    def breakpoints(self) -> tuple:
        """Where the quadrature splits [-1, 1] for a very short lengthscale: the shape falls from 1
        within an angle of order the lengthscale of t = 1, a spike no rule on the whole interval
        resolves (at lengthscale 7e-5, which an optimiser's trial point reached, 8192 nodes did
        not). Snapped to a power of two of the scale, so that the quadrature rules (cached by their
        pieces) are reused from one lengthscale to the next; none above a scale of 1e-2, where the
        whole interval converges (a new rule for every lengthscale cost 20x per spectrum). The last
        split is 128 scales out, where the shape is below 1e-24: with the last at 32 (16 after the
        snapping) the Matern-5/2 shape was still 1e-5 there, and the circle's spectrum 1e-6 off."""
        scale = self.lengthscale / math.sqrt(2.0 * self.nu) if np.isfinite(self.nu) else self.lengthscale
        if scale >= 1e-2:
            return ()
        scale = 2.0 ** math.floor(math.log2(scale))
        points = {math.cos(a * scale) for a in (2.0, 8.0, 32.0, 128.0) if a * scale < 1.0}
        return tuple(sorted(t for t in points if t < 1.0))  # below ~1e-8 rad the angle rounds to t = 1

    def shape_minus_one(self, u):
        r""":math:`\kappa - 1` at the gaps :math:`u = 1 - t`, without the cancellation of
        ``unit_shape(t) - 1`` where the distance is small against the lengthscale (then every level >= 1
        of the spectrum is a tiny fraction of the constant:
        :func:`~spherelab.kernels.quadrature.quadrature_spectrum`); ``None`` where the lengthscale
        is short (there the levels are not small and ``unit_shape`` serves)."""
        if not self._long():
            return None
        r = self._r_of_gap(u)
        if self.nu == 0.5:
            return np.expm1(-r)
        if self.nu == np.inf:
            return np.expm1(-0.5 * r * r)
        a = math.sqrt(2.0 * self.nu) * r
        out = self._m_and_dm(r)[0] - 1.0  # exact enough where a is not small
        small = a < 0.5
        if np.any(small):
            out[small] = _series(_TAYLOR[self.nu], a[small], skip_even_below=2)
        return out

    def _long(self) -> bool:
        """Whether a = sqrt(2 nu) r stays below 0.5 on the whole sphere (r <= 2 / lengthscale)."""
        return 2.0 * math.sqrt(2.0 * min(self.nu, 2.5)) / self.lengthscale < 0.5

    def shape_remainder(self, u, level: int):
        r""":math:`\kappa` at the gaps :math:`u = 1 - t` without its Taylor terms :math:`c_{2j}a^{2j}`, :math:`j < \ell`
        (:math:`a^{2j} \propto (2 - 2t)^j`: polynomials of degree :math:`j` in t, which project on
        levels :math:`\le j` only), so that level :math:`\ell` of the spectrum comes from what it
        is made of; ``None`` unless the lengthscale is long enough (a < 0.5 on the whole sphere)
        for the series to be the accurate way."""
        if not self._long():
            return None
        a = math.sqrt(2.0 * self.nu) * self._r_of_gap(u) if np.isfinite(self.nu) else self._r_of_gap(u)
        return _series(_TAYLOR[self.nu], a, skip_even_below=2 * level)

    def unit_shape_gradients(self, t, ops):
        return self.quadrature_gradients(1.0 - np.clip(t, -1.0, 1.0))

    def unit_spectrum(self, dim, L):
        if self.nu == np.inf:  # closed form: positive at every level, no quadrature floor
            return squared_exponential_spectrum(self.lengthscale, dim, L)[0]
        return _levels(self, dim, L)[0]

    def unit_spectrum_floor(self, dim, L):
        if self.nu == np.inf:
            return np.zeros(L + 1)
        return _levels(self, dim, L)[1]

    def unit_spectrum_gradients(self, dim, L):
        if self.nu == np.inf:
            return {"lengthscale": squared_exponential_spectrum(self.lengthscale, dim, L)[1]}
        grads = super().unit_spectrum_gradients(dim, L)["lengthscale"]
        _, _, series, dlog = _levels(self, dim, L)
        return {"lengthscale": np.where(series, -dlog / self.lengthscale, grads)}

    def unit_shape_dt(self, t, ops):
        # d/dt m(r) = m'(r) dr/dt, dr/dt = -1 / (l^2 r): finite except nu = 1/2 at t = 1
        r = self._r(t)
        l2 = self.lengthscale**2
        nu = self.nu
        if nu == 0.5:
            with np.errstate(divide="ignore"):
                return np.exp(-r) / (l2 * r)
        if nu == 1.5:
            return 3.0 * np.exp(-math.sqrt(3.0) * r) / l2
        if nu == 2.5:
            a = math.sqrt(5.0) * r
            return 5.0 / 3.0 * (1.0 + a) * np.exp(-a) / l2
        return np.exp(-0.5 * r * r) / l2

    def unit_shape_all(self, t, ops):
        # one distance and one exponential for kappa, kappa' and d kappa / d lengthscale
        r = self._r(t)
        l = self.lengthscale
        l2 = l * l
        if self.nu == 0.5:
            e = np.exp(-r)
            m, dm = e, -e
            with np.errstate(divide="ignore"):
                dt = e / (l2 * r)
        elif self.nu == 1.5:
            e = np.exp(-math.sqrt(3.0) * r)
            m, dm, dt = (1.0 + math.sqrt(3.0) * r) * e, -3.0 * r * e, 3.0 / l2 * e
        elif self.nu == 2.5:
            e = np.exp(-math.sqrt(5.0) * r)
            p = (1.0 + math.sqrt(5.0) * r) * e
            m, dm, dt = p + 5.0 / 3.0 * r * r * e, -5.0 / 3.0 * r * p, 5.0 / (3.0 * l2) * p
        else:
            e = np.exp(-0.5 * r * r)
            m, dm, dt = e, -r * e, e / l2
        return m, dt, {"lengthscale": -dm * r / l}





@lru_cache(maxsize=256)
def squared_exponential_spectrum(lengthscale: float, dim: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigenvalues of :math:`\kappa(t) = e^{-(2 - 2t)/(2\ell^2)} = e^{-z}e^{zt}`, :math:`z = \ell^{-2}`, on
    :math:`S^{d-1}` and their derivatives in :math:`\ell`: ``(lam (L + 1,), dlam/dl (L + 1,))``.

    The Gegenbauer expansion of :math:`e^{zt}` (Watson 1944 §11.5; Dutordoir et al. 2020 App. B
    for the normalised harmonics) gives
    :math:`\lambda_n = e^{-z}\,\Gamma(\alpha+1)(2/z)^{\alpha} I_{n+\alpha}(z)`, :math:`\alpha = (d-2)/2`, here summed
    as the Bessel series
    :math:`\lambda_n = e^{-z}(z/2)^n \frac{\Gamma(\alpha+1)}{\Gamma(n+\alpha+1)}
    \sum_k \frac{(z^2/4)^k}{k!\,(n+\alpha+1)_k}`
    in logarithms: every term is positive, so no level is lost to cancellation, and no factor
    overflows in any dimension. The series needs about z terms: for a short lengthscale
    (z > 400) the exponentially scaled Bessel function (``scipy.special.ive``) serves instead, its
    power of z in logarithms. A level below the smallest float is 0, never negative.

    The derivative, :math:`d\lambda_n/d\ell = \lambda_n (2/\ell)(z q_\nu - n)` with
    :math:`q_\nu = 1 - I_{\nu+1}/I_\nu`, takes :math:`z q_\nu` from :func:`.bessel.ratio_complement`:
    written as :math:`-1 + I_{\nu+1}/I_\nu` it would lose :math:`\log_{10} z` digits.
    """
    from scipy.special import gammaln, ive, logsumexp

    z = 1.0 / float(lengthscale) ** 2
    alpha = 0.5 * (dim - 2)
    if z > 400.0:
        nu = np.arange(L + 1, dtype=np.float64) + alpha
        scaled = ive(nu, z) if z < 1e8 else ive_large(nu, z)  # SciPy's ive returns NaN near z = 1e14
        with np.errstate(divide="ignore"):
            lam = np.exp(gammaln(alpha + 1.0) + alpha * math.log(2.0 / z) + np.log(scaled))
    else:
        n = np.arange(L + 1, dtype=np.float64)[:, None]
        k = np.arange(int(np.ceil(z)) + 60, dtype=np.float64)[None, :]
        rising = gammaln(n + alpha + 1.0 + k) - gammaln(n + alpha + 1.0)  # log (n + alpha + 1)_k
        log_terms = 2.0 * k * math.log(0.5 * z) - gammaln(k + 1.0) - rising
        prefix = -z + n[:, 0] * math.log(0.5 * z) + gammaln(alpha + 1.0) - gammaln(n[:, 0] + alpha + 1.0)
        lam = np.exp(prefix + logsumexp(log_terms, axis=1))
    slope = ratio_complement(alpha, L, z) - np.arange(L + 1)
    return _frozen(lam, lam * slope * (2.0 / float(lengthscale)))


def _frozen(*arrays):
    for a in arrays:  # cached: shared by every caller
        a.setflags(write=False)
    return arrays


@lru_cache(maxsize=256)
def _levels(kernel: Matern, dim: int, L: int):
    r"""``(levels, floor, from_series, d levels / d log s)``: each level from the quadrature
    (:func:`~spherelab.kernels.quadrature.quadrature_spectrum`) or from the power series in
    :math:`s = \sqrt{2\nu}/\ell` (:func:`~spherelab.kernels.matern_series.series_levels`),
    whichever has the smaller error bound, and that bound as the level's floor."""
    coeffs, rule, parts = quadrature_spectrum(kernel, dim, L)
    floor = quadrature_floor(kernel, rule, *parts)
    s = math.sqrt(2.0 * kernel.nu) / kernel.lengthscale
    if s > 16.0:  # the terms reach e^{2s} / sqrt(2s) before they cancel: never the better way
        return coeffs, floor, np.zeros(L + 1, dtype=bool), np.zeros(L + 1)
    series, dlog, bound = series_levels(_TAYLOR[kernel.nu], s, dim, L)
    use = bound < floor
    out = (np.where(use, series, coeffs), np.where(use, bound, floor), use, np.where(use, dlog, 0.0))
    for a in out:
        a.setflags(write=False)
    return out
