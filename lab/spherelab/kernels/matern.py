r"""The Euclidean Matérn kernels restricted to the sphere (chordal distance), nu in {1/2, 3/2, 5/2, inf}."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import Hyper, check_length
from .base import QuadratureSpectrum
from .matern_jit import NU_CODES

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


class Matern(QuadratureSpectrum):
    r"""Euclidean Matérn kernel restricted to the sphere: :math:`\kappa(t) = m_\nu(\rho/\ell)`
    at the chordal distance :math:`\rho = \sqrt{2 - 2t}`, with
    :math:`m_{1/2} = e^{-r}`, :math:`m_{3/2} = (1 + \sqrt3 r)e^{-\sqrt3 r}`,
    :math:`m_{5/2} = (1 + \sqrt5 r + \tfrac53 r^2)e^{-\sqrt5 r}`, :math:`m_\infty = e^{-r^2/2}`.
    Positive definite on every sphere (Schoenberg), so :math:`\lambda_\ell \ge 0`; the spectrum
    is the Funk–Hecke quadrature in the angle variable, where the shape is analytic.
    This is the stationary kernel of the spectra-mismatch analysis (Dutordoir, PhD report §4.3.3,
    Tiao, thesis §3.4)."""

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

    def _key(self):
        return ("Matern", self.nu, self.lengthscale)

    def _fused_code(self):
        return NU_CODES.get(self.nu) if self.fused else None

    def _r(self, t):
        return np.sqrt(np.maximum(2.0 - 2.0 * np.clip(t, -1.0, 1.0), 0.0)) / self.lengthscale

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

    def _shape(self, t):
        return self._m_and_dm(self._r(t))[0]

    def _shape_grads(self, t):
        r = self._r(t)
        _, dm = self._m_and_dm(r)
        return {"lengthscale": -dm * r / self.lengthscale}

    def _shape_dt(self, t):
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

    def _shape_all(self, t):
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



