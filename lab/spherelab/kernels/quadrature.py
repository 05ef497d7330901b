r"""Kernels whose spectrum is the Funk–Hecke quadrature of their shape (Matérn, the deep arc-cosine
family, the NTK): :class:`QuadratureSpectrum` and the cached :func:`quadrature_spectrum`, which
keeps the digits of the small levels of a kernel near 1 everywhere (a long lengthscale) by
integrating what those levels are made of."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..sphere.funk_hecke import apply_parity, funk_hecke_with_rule
from .base import ZonalKernel

__all__ = ["QuadratureSpectrum", "quadrature_spectrum", "quadrature_floor"]


class QuadratureSpectrum(ZonalKernel):
    """Kernels whose spectrum is the Funk–Hecke quadrature of their shape."""

    parity: str | None = None
    #: points of [-1, 1] where the quadrature splits its interval (where the shape changes scale)
    breakpoints: tuple = ()

    #: the shape hooks below take u = 1 - t, not t, on the quadrature's nodes (``rule.gaps``): for
    #: shapes that fall within a tiny angle of t = 1, where t itself rounds to 1
    of_gap: bool = False

    def quadrature_points(self, rule):
        """Where the quadrature evaluates this kernel's shape hooks: ``rule.gaps`` or ``rule.nodes``."""
        return rule.gaps if self.of_gap else rule.nodes

    def quadrature_shape(self, x):
        """The shape at the quadrature's points ``x`` (:meth:`quadrature_points`)."""
        return self.unit_shape(x, "cpu")

    def quadrature_gradients(self, x):
        """``{name: d shape / d name}`` at the quadrature's points ``x`` (:meth:`quadrature_points`)."""
        return self.unit_shape_gradients(x, "cpu")

    def unit_spectrum(self, dim, L):
        return quadrature_spectrum(self, dim, L)[0]

    def unit_spectrum_floor(self, dim, L):
        _, rule, parts = quadrature_spectrum(self, dim, L)
        return quadrature_floor(self, rule, *parts)

    def unit_spectrum_gradients(self, dim, L):
        rule = quadrature_spectrum(self, dim, L)[1]
        grads = self.quadrature_gradients(self.quadrature_points(rule))
        return {k: apply_parity(rule.apply(v), self.parity) for k, v in grads.items()}

    def __eq__(self, other):
        return isinstance(other, ZonalKernel) and self.cache_key() == other.cache_key()

    def __hash__(self):
        return hash(self.cache_key())


@lru_cache(maxsize=256)
def quadrature_spectrum(kernel: QuadratureSpectrum, dim: int, L: int):
    r"""``(coefficients, rule, (err, sources))`` of the kernel's shape on :math:`S^{d-1}`
    (variance 1); ``err`` and ``sources`` (which values were integrated for which levels) give the
    levels' numerical floor on demand (:func:`quadrature_floor`). Values within the floor below zero
    are returned as 0, so that no spectrum is negative (round-off of both signs was seen at the
    structural zeros of the one-layer NTK and at the high levels of fast-decaying spectra); the
    floor is computed only then, off the optimisers' path."""
    coeffs, err, rule = funk_hecke_with_rule(kernel.quadrature_shape, dim, L, parity=kernel.parity,
                                             kinks=getattr(kernel, "breakpoints", ()), of_gap=kernel.of_gap)
    at = kernel.quadrature_points(rule)
    sources = [(0, L + 1, None)]  # None: the shape itself
    excess = getattr(kernel, "shape_minus_one", None)
    values = excess(at) if excess is not None and L >= 1 else None
    if values is not None:
        # the levels >= 1 from kappa - 1 (the constant projects on level 0 only): a kernel near 1
        # everywhere (a long lengthscale) would lose their digits to it (measured against mpmath:
        # 14 % at level 3 at lengthscale 3.4e4; tests/kernels/test_spectra.py)
        tail = apply_parity(rule.apply(values), kernel.parity)
        coeffs = np.concatenate([coeffs[:1], tail[1:]])
        sources.append((1, L + 1, values))
        remainder = getattr(kernel, "shape_remainder", None)
        for ell in range(2, L + 1):  # a long lengthscale: level l from kappa less its terms of degree < l
            values = remainder(at, ell) if remainder is not None else None
            if values is None:
                break
            coeffs[ell] = apply_parity(rule.apply(values), kernel.parity)[ell]
            sources.append((ell, ell + 1, values))
    parts = (np.asarray(err, dtype=np.float64), tuple(sources))
    if np.any(coeffs < 0.0):
        floor = quadrature_floor(kernel, rule, *parts)
        coeffs = np.where((coeffs < 0.0) & (coeffs >= -floor), 0.0, coeffs)
    coeffs.setflags(write=False)
    return coeffs, rule, parts


def quadrature_floor(kernel: QuadratureSpectrum, rule, err: np.ndarray, sources) -> np.ndarray:
    r"""Per level, what its value owes to the quadrature: the convergence estimate (successive node
    counts; for levels integrated from the shape itself) plus the rounding of the weighted sum,
    :math:`8\varepsilon\sum_i |w_i P_l(t_i)\,v_i|` over the values :math:`v_i` integrated for that
    level. A level at or below its floor is indistinguishable from zero; structural zeros are exact."""
    weights = np.abs(rule.matrix)
    floor = np.empty(weights.shape[1])
    for start, stop, values in sources:
        shape = values is None
        v = kernel.quadrature_shape(kernel.quadrature_points(rule)) if shape else values
        floor[start:stop] = 8.0 * np.finfo(np.float64).eps * (np.abs(v) @ weights[:, start:stop])
        if shape:
            floor[start:stop] += err[start:stop]
    return apply_parity(floor, kernel.parity)
