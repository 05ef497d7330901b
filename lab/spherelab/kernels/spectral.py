r"""Kernels defined by their spectrum: the intrinsic Matérn/SE kernels of the sphere and the
continuous-depth polynomial decay (Eleftheriadis et al. eq. 15); the shape is the Mercer series."""

from __future__ import annotations

import contextlib
import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from .._state import Hyper
from .._validation import check_degree, check_dim, check_length, check_positive
from ..linalg import NumericalFailure
from ..sphere.gegenbauer import zonal_series
from ..sphere.special import log_num_harmonics, num_harmonics
from .base import ZonalKernel

__all__ = ["SpectralKernel", "IntrinsicMatern", "PolynomialDecay"]


class SpectralKernel(ZonalKernel):
    """Kernels defined by :math:`\\lambda_\\ell`; the shape is the Mercer series, truncated where
    the remaining mass :math:`\\sum_{\\ell > L} \\lambda_\\ell N(\\ell, d)` is below
    ``shape_tol * variance`` (at most ``max_shape_degree``), evaluated by Clenshaw."""

    shape_tol = 1e-8
    max_shape_degree = 4096
    #: the dimension the shape is defined on (spectra depend on it); set by the constructor
    dim: int

    def _check_dim(self, dim: int) -> None:
        if dim != self.dim:
            raise ValueError(
                f"this {type(self).__name__} was built for dim={self.dim} (its spectrum depends "
                f"on the dimension), asked for dim={dim}"
            )

    def spectrum(self, dim: int, max_degree: int) -> np.ndarray:
        self._check_dim(check_dim(dim))
        return super().spectrum(dim, max_degree)

    def spectrum_gradients(self, dim: int, max_degree: int) -> dict[str, np.ndarray]:
        self._check_dim(check_dim(dim))
        return super().spectrum_gradients(dim, max_degree)

    def log_levels(self, ell: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """To implement: the unnormalised log-eigenvalues at levels ``ell`` (any real array) and their
        derivatives by shape parameter, ``(log_levels, {name: d log_levels / d name})``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _normalised(self, dim: int, L: int):
        with self._representable():
            return _spectral_cache(self, dim, L)

    @contextlib.contextmanager
    def _representable(self):
        # extreme hyper-parameters (a lengthscale of 1e-300) overflow the spectrum's arithmetic:
        # say which kernel and why instead of a bare ZeroDivisionError (NumericalFailure is a
        # ValueError; optimisers reject such trial points)
        try:
            with np.errstate(over="raise", invalid="raise"):  # inf/inf, inf - inf: NaN would follow
                yield
        except (ZeroDivisionError, OverflowError, FloatingPointError) as err:
            raise NumericalFailure(f"{self!r}: the spectrum is not representable in float64 ({err}); bring "
                                   f"{', '.join(self.shape_params) or 'the hyper-parameters'} into a moderate "
                                   "range") from None

    def unit_spectrum(self, dim, L):
        return self._normalised(dim, L)[0]

    def unit_spectrum_gradients(self, dim, L):
        return self._normalised(dim, L)[1]

    def _series(self):
        with self._representable():
            lam, grads, tail = _shape_series(self)
        return lam, grads, tail

    def unit_shape(self, t, ops):
        lam, _, _ = self._series()
        return zonal_series(lam, self.dim, t, ops=ops)

    def unit_shape_dt(self, t, ops):
        lam, _, _ = self._series()
        return zonal_series(lam, self.dim, t, derivative=True, ops=ops)[1]

    def unit_shape_gradients(self, t, ops):
        _, grads, _ = self._series()
        return {k: zonal_series(v, self.dim, t, ops=ops) for k, v in grads.items()}

    def at_one(self) -> float:
        return self.variance  # normalised: sum_l lambda_l N(l, d) = variance exactly

    def at_one_gradients(self) -> dict[str, float]:
        return {"variance": 1.0, **{p: 0.0 for p in self.shape_params}}

    def shape_truncation(self) -> tuple[int, float]:
        """(degree at which the shape's series is cut, relative mass left out)."""
        lam, _, tail = self._series()
        return lam.shape[0] - 1, tail

    def __eq__(self, other):
        return isinstance(other, ZonalKernel) and self.cache_key() == other.cache_key()

    def __hash__(self):
        return hash(self.cache_key())


_DIRECT_LEVELS = 2048  # summed term by term; beyond, Euler-Maclaurin on the smooth tail


@lru_cache(maxsize=16)
def _log_counts_cached(dim: int, upto: int) -> np.ndarray:
    out = log_num_harmonics(np.arange(upto + 1), dim)
    out.setflags(write=False)
    return out


def _tail_sum(f, n: float, p: float) -> float:
    """Sum of f(l) over integers l > n for a smooth f decaying like l^-p, by Euler-Maclaurin:
    the integral from n to inf of f, minus f(n)/2, minus f1(n)/12, plus f3(n)/720 (f1, f3 the
    first and third derivatives). The integral is mapped to (0, 1] by x = n / v^m with
    m(p - 1) >= 2, which makes the integrand smooth, and done by 128-point Gauss-Legendre."""
    from scipy.special import roots_legendre

    m = max(1, math.ceil(2.0 / (p - 1.0)))
    u, w = roots_legendre(128)
    v = 0.5 * (u + 1.0)
    integral = float(np.sum(0.5 * w * f(n / v**m) * m * n * v ** (-m - 1.0)))
    h = 0.25
    vals = f(n + h * np.arange(-2, 3, dtype=np.float64))
    d1 = (vals[3] - vals[1]) / (2 * h)
    d3 = (vals[4] - 2 * vals[3] + 2 * vals[1] - vals[0]) / (2 * h**3)
    return integral - vals[2] / 2 - d1 / 12 + d3 / 720


@lru_cache(maxsize=256)
def _spectral_cache(kernel: SpectralKernel, dim: int, L: int):
    """Normalised spectrum (kappa(1) = 1) and its parameter derivatives at levels 0..L."""
    upto = max(L, _DIRECT_LEVELS)
    ell = np.arange(upto + 1, dtype=np.float64)
    log_raw, dlog = kernel.log_levels(ell)
    shift = log_raw.max()
    w = np.exp(log_raw - shift + _log_counts_cached(dim, upto))

    def term(x, name=None):
        lr, dl = kernel.log_levels(x)
        val = np.exp(lr - shift + log_num_harmonics(x, dim, real=True))
        return val if name is None else val * dl[name]

    tail, p = 0.0, np.inf
    if w[-1] > 0:
        p = -np.log(w[-1] / w[-2]) / np.log(upto / (upto - 1.0))
        if p <= 1.0 + 1e-9:
            # a NumericalFailure (a ValueError): a trial point of an optimiser steps back from it
            raise NumericalFailure(
                f"{kernel!r}: the series sum_l lambda_l N(l, {dim}) diverges (terms decay like "
                f"l^-{p:.2f}); this spectrum cannot be normalised to a variance in d = {dim}"
            )
        tail = _tail_sum(term, float(upto), p)
    norm = w.sum() + tail
    lam = np.exp(log_raw[: L + 1] - shift) / norm
    grads = {}
    for name, dl in dlog.items():
        dtail = _tail_sum(lambda x, n=name: term(x, n), float(upto), p) if tail else 0.0
        dnorm = (w * dl[: upto + 1]).sum() + dtail
        grads[name] = lam * (dl[: L + 1] - dnorm / norm)
        grads[name].setflags(write=False)
    lam.setflags(write=False)
    return lam, grads


@lru_cache(maxsize=64)
def _shape_series(kernel: SpectralKernel):
    dim = kernel.dim
    L = 16
    while True:
        lam, grads = _spectral_cache(kernel, dim, L)
        counts = np.array([float(num_harmonics(e, dim)) for e in range(L + 1)])
        tail = 1.0 - float((lam * counts).sum())
        if tail <= kernel.shape_tol or L >= kernel.max_shape_degree:
            break
        L *= 2
    if tail > kernel.shape_tol:
        warnings.warn(
            f"{kernel!r}: shape truncated at degree {L} leaves relative mass {tail:.1e} "
            f"(> {kernel.shape_tol:.0e}); shape values near t = 1 are low by about that much",
            RuntimeWarning,
            stacklevel=3,
        )
    return lam, grads, tail


def _check_smoothness(nu: Any, name: str) -> float:
    if isinstance(nu, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number > 0 (or inf), got {nu!r}")
    try:
        v = float(nu)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number > 0 (or inf), got {nu!r}") from None
    if not (v > 0):
        raise ValueError(f"{name} must be > 0 (or inf), got {nu!r}")
    return v


class IntrinsicMatern(SpectralKernel):
    r"""Matérn (or, for ``nu = inf``, the heat / squared-exponential) kernel of the
    Laplace–Beltrami operator on :math:`S^{d-1}`:

    .. math:: \lambda_\ell \propto \Big(\frac{2\nu}{\rho^2} + \ell(\ell + d - 2)\Big)^{-(\nu +
              \frac{d-1}{2})}, \qquad \lambda_\ell^{\infty} \propto
              e^{-\rho^2 \ell(\ell + d - 2)/2},

    normalised so that :math:`\kappa(1) = \sum_\ell \lambda_\ell N(\ell, d) = ` ``variance``.
    ``lengthscale`` is :math:`\rho`. The spectrum depends on the dimension, so the kernel is built
    for one ``dim``.

    The Matérn kernels of Dutordoir et al. 2020 (their Table 1) are not this kernel with the same
    :math:`\nu`: eqs. 33–34 evaluate the Euclidean spectral density
    :math:`S(\omega) \propto (2\nu/\rho^2 + 4\pi^2\omega^2)^{-(\nu + d/2)}` with d the *ambient*
    dimension at :math:`\omega^2 = \ell(\ell + d - 2)`, i.e. the exponent
    :math:`\nu' + (d-1)/2` with :math:`\nu' = \nu + \tfrac12` and the lengthscale
    :math:`\rho' = 2\pi\rho\sqrt{\nu'/\nu}` here; :meth:`dutordoir2020` builds it.

    Parameters
    ----------
    dim
        d, the dimension of the ambient space of the sphere (inputs + 1).
    nu
        Smoothness (> 0), or ``numpy.inf`` for the heat kernel.
    lengthscale
        :math:`\rho` (> 0), geodesic.
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> k = sl.kernels.IntrinsicMatern(3, 1.5, 1.0)
    >>> lam = k.spectrum(3, 400)
    >>> counts = np.array([sl.num_harmonics(l, 3) for l in range(401)])
    >>> round(float(lam @ counts), 4)    # kappa(1) = variance
    1.0
    """

    shape_params = ("lengthscale",)
    structure = ("dim", "nu")
    nu = Hyper(lambda v, name: _check_smoothness(v, name), "smoothness, > 0 or inf")
    lengthscale = Hyper(check_length, "lengthscale rho, in [1e-100, 1e100]")

    @classmethod
    def dutordoir2020(cls, dim: int, nu: float = 1.5, lengthscale: float = 1.0, **kwargs: Any) -> "IntrinsicMatern":
        r"""The Matérn-:math:`\nu` kernel with lengthscale :math:`\rho` of Dutordoir et al. 2020
        (eqs. 33–34, normalised): ``IntrinsicMatern(dim, nu + 1/2, 2 pi rho sqrt((nu + 1/2) / nu))``.
        Finite :math:`\nu` only (the paper's SE is the ``nu = inf`` kernel with another scale)."""
        nu = float(nu)
        if not (np.isfinite(nu) and nu > 0):
            raise ValueError(f"nu must be a finite number > 0 for the paper's Matérn kernel, got {nu!r}")
        rho = check_positive(lengthscale, "lengthscale")
        return cls(dim, nu + 0.5, 2.0 * math.pi * rho * math.sqrt((nu + 0.5) / nu), **kwargs)

    def __init__(
        self,
        dim: int,
        nu: float = 1.5,
        lengthscale: float = 1.0,
        variance: float = 1.0,
        bias: float = 1.0,
        input_scale: Any = 1.0,
    ):
        self.dim = check_dim(dim)
        self.nu = nu
        self.lengthscale = lengthscale
        super().__init__(variance, bias, input_scale)

    def cache_key(self):
        return ("IntrinsicMatern", self.dim, self.nu, self.lengthscale)

    def log_levels(self, ell):
        rho = self.lengthscale
        lap = ell * (ell + self.dim - 2.0)
        if math.isinf(self.nu):
            return -0.5 * rho**2 * lap, {"lengthscale": -rho * lap}
        a = 2.0 * self.nu / rho**2
        power = self.nu + (self.dim - 1) / 2.0
        log_raw = -power * np.log(a + lap)
        # d/drho of -power log(a + lap) = -power * (da/drho) / (a + lap), da/drho = -2a/rho
        return log_raw, {"lengthscale": power * 2.0 * a / rho / (a + lap)}


class PolynomialDecay(SpectralKernel):
    r"""Continuous-depth kernel of Eleftheriadis et al. (eq. 15): :math:`\lambda_\ell \propto \ell^{-\beta}`.

    Convention at :math:`\ell = 0` (where :math:`\ell^{-\beta}` is infinite): the constant level
    gets the weight of level 1, :math:`\lambda_0 = \lambda_1`, i.e.
    :math:`\lambda_\ell \propto \max(\ell, 1)^{-\beta}`. Normalised so that
    :math:`\kappa(1) = ` ``variance``. The infinite series needs :math:`\beta > d - 1` (so that
    :math:`\sum \ell^{-\beta} N(\ell, d)` converges); smaller :math:`\beta` (a "deeper"
    kernel) is rejected with that explanation unless ``max_degree`` is given: then the kernel
    is the finite series :math:`\sum_{\ell \le L}` (the prior that features truncated at degree
    L represent anyway, Eleftheriadis et al. §5), valid for every :math:`\beta > 0`. The spectrum depends on
    ``dim``.

    Parameters
    ----------
    dim
        d (inputs + 1).
    beta
        :math:`\beta` (> 0; > d - 1 unless ``max_degree`` is given).
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.
    max_degree
        L: the finite series up to degree L (any :math:`\beta > 0`); ``None``: the infinite series.

    Examples
    --------
    >>> import spherelab as sl
    >>> k = sl.kernels.PolynomialDecay(3, 1.5, max_degree=10)   # beta below d - 1: finite series
    >>> round(k.at_one(), 12), k.spectrum(3, 12)[11:].tolist()
    (1.0, [0.0, 0.0])
    """

    shape_params = ("beta",)
    structure = ("dim", "max_degree")

    def __init__(self, dim: int, beta: float = 4.0, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0,
                 max_degree: int | None = None):
        self.dim = check_dim(dim)
        self.max_degree = None if max_degree is None else check_degree(max_degree)
        self.beta = beta
        super().__init__(variance, bias, input_scale)

    beta = Hyper(check_positive, "decay exponent, > 0 (> dim - 1 without max_degree)")

    def __setattr__(self, name, value):
        # the convergence condition ties beta to dim: checked at every assignment of beta
        if name == "beta" and self.max_degree is None and check_positive(value, "beta") <= self.dim - 1:
            raise ValueError(
                f"beta must exceed dim - 1 = {self.dim - 1} so that sum_l l^-beta N(l, d) "
                f"converges (kappa(1) finite), got beta = {value}; or truncate the series "
                "with max_degree=L (any beta > 0)"
            )
        object.__setattr__(self, name, value)

    def cache_key(self):
        return ("PolynomialDecay", self.dim, self.beta, self.max_degree)

    def top_degree(self) -> int | None:
        return self.max_degree

    def log_levels(self, ell):
        log_l = np.log(np.maximum(ell, 1.0))
        return -self.beta * log_l, {"beta": -log_l}

    def _finite(self):
        # the normalised finite series sum_{l <= L}: levels 0..L and d/dbeta
        Lk = self.max_degree
        ell = np.arange(Lk + 1, dtype=np.float64)
        log_raw, dlog = self.log_levels(ell)
        w = np.exp(log_raw - log_raw.max() + _log_counts_cached(self.dim, Lk))
        norm = w.sum()
        lam = w / np.exp(_log_counts_cached(self.dim, Lk)) / norm
        grads = {k: lam * (dl - (w * dl).sum() / norm) for k, dl in dlog.items()}
        return lam, grads

    def _normalised(self, dim, L):
        if self.max_degree is None:
            return super()._normalised(dim, L)
        lam, grads = self._finite()
        k = min(L, self.max_degree)

        def pad(v):
            out = np.zeros(L + 1)
            out[: k + 1] = v[: k + 1]
            return out

        return pad(lam), {n: pad(g) for n, g in grads.items()}

    def _series(self):
        if self.max_degree is None:
            return super()._series()
        lam, grads = self._finite()
        return lam, grads, 0.0
