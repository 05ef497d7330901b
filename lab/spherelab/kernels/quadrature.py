r"""Kernels whose spectrum is the Funk–Hecke quadrature of their shape (Matérn, the deep arc-cosine
family, the NTK): :class:`QuadratureSpectrum` and the cached :func:`quadrature_spectrum`, which
keeps the digits of the small levels of a kernel near 1 everywhere (a long lengthscale) by
integrating what those levels are made of."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..sphere.funk_hecke import apply_parity, funk_hecke_with_rule
from .base import ZonalKernel

__all__ = ["QuadratureSpectrum", "quadrature_spectrum"]


class QuadratureSpectrum(ZonalKernel):
    """Kernels whose spectrum is the Funk–Hecke quadrature of their shape."""

    parity: str | None = None
    #: points of [-1, 1] where the quadrature splits its interval (where the shape changes scale)
    breakpoints: tuple = ()

    def _spectrum(self, dim, L):
        return quadrature_spectrum(self, dim, L)[0]

    def _spectrum_floor(self, dim, L):
        return quadrature_spectrum(self, dim, L)[2]

    def _spectrum_grads(self, dim, L):
        rule = quadrature_spectrum(self, dim, L)[1]
        return {k: apply_parity(rule.apply(v), self.parity) for k, v in self._shape_grads(rule.nodes).items()}

    def __eq__(self, other):
        return isinstance(other, ZonalKernel) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


@lru_cache(maxsize=256)
def quadrature_spectrum(kernel: QuadratureSpectrum, dim: int, L: int):
    r"""``(coefficients, rule, floor)`` of the kernel's shape on :math:`S^{d-1}` (variance 1).

    ``floor[l]`` bounds what level l's value owes to the quadrature: the convergence estimate
    (successive node counts) plus the rounding of the weighted sum,
    :math:`8\varepsilon\sum_i |w_i P_l(t_i)\,v_i|` over the values :math:`v_i` integrated for that
    level. A level below its floor is indistinguishable from zero: plots and analyses show only
    levels above it. Values within the floor below zero are returned as 0, so that no spectrum is
    negative (they were round-off of both signs at the structural zeros of the one-layer NTK and
    at the high levels of fast-decaying spectra)."""
    coeffs, err, rule = funk_hecke_with_rule(kernel._shape, dim, L, parity=kernel.parity,
                                             kinks=getattr(kernel, "breakpoints", ()))
    weights = np.abs(rule.matrix)
    eps = np.finfo(np.float64).eps
    floor = np.asarray(err, dtype=np.float64) + 8.0 * eps * (np.abs(kernel._shape(rule.nodes)) @ weights)
    excess = getattr(kernel, "_shape_minus_one", None)
    values = excess(rule.nodes) if excess is not None and L >= 1 else None
    if values is not None:
        # the levels >= 1 from kappa - 1 (the constant projects on level 0 only): a kernel near 1
        # everywhere (a long lengthscale) would lose their digits to it (measured against mpmath:
        # 14 % at level 3 at lengthscale 3.4e4; tests/kernels/test_spectra.py)
        tail = apply_parity(rule.apply(values), kernel.parity)
        coeffs = np.concatenate([coeffs[:1], tail[1:]])
        floor[1:] = 8.0 * eps * (np.abs(values) @ weights)[1:]
        remainder = getattr(kernel, "_shape_remainder", None)
        for ell in range(2, L + 1):  # a long lengthscale: level l from kappa less its terms of degree < l
            values = remainder(rule.nodes, ell) if remainder is not None else None
            if values is None:
                break
            coeffs[ell] = apply_parity(rule.apply(values), kernel.parity)[ell]
            floor[ell] = 8.0 * eps * float(np.abs(values) @ weights[:, ell])
    floor = apply_parity(floor, kernel.parity)  # structural zeros are exact
    coeffs = np.where((coeffs < 0.0) & (coeffs >= -floor), 0.0, coeffs)
    for array in (coeffs, floor):
        array.setflags(write=False)
    return coeffs, rule, floor

