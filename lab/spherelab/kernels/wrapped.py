r"""Kernels built on a base kernel whose hyper-parameters they share: the truncation
:math:`\kappa_L` (what VISH with all harmonics up to L represents) and the even/odd parts."""

from __future__ import annotations

import numpy as np

from .._validation import check_allocation, check_bool, check_degree, check_dim
from ..sphere.gegenbauer import zonal_series
from ..sphere.special import num_harmonics
from .base import ZonalKernel

__all__ = ["WrappedKernel", "Truncated", "Parity"]


class WrappedKernel(ZonalKernel):
    """A kernel built on ``base`` whose hyper-parameters are the base kernel's: reads and writes
    of ``variance``, ``bias``, ``input_scale`` and the shape parameters go to it (names in
    ``_own`` stay on the wrapper)."""

    _own: tuple[str, ...] = ("base",)

    @property
    def shape_params(self):  # type: ignore[override]
        return self.base.shape_params

    def __getattr__(self, name):
        if name in self.base.parameter_names:
            return getattr(self.base, name)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in self._own:
            object.__setattr__(self, name, value)
        else:
            setattr(self.base, name, value)


class Truncated(WrappedKernel):
    r"""The kernel :math:`\kappa_L(t) = \sum_{\ell \le L} \lambda_\ell Z_\ell(t)` of a base kernel
    truncated at degree L (``docs/design.md`` §3): a valid kernel in its own right, and exactly
    the prior that VISH with every harmonic up to degree L represents. Hyper-parameters are the
    base kernel's (reads and writes go to it).

    Parameters
    ----------
    kernel
        The base zonal kernel.
    dim
        d, the sphere's ambient dimension the truncation refers to.
    max_degree
        L.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> base = sl.kernels.Matern(2.5, 1.0)
    >>> truncated = sl.kernels.Truncated(base, 3, 6)
    >>> truncated.spectrum(3, 8)[7:].tolist(), bool(np.allclose(truncated.spectrum(3, 6), base.spectrum(3, 6)))
    ([0.0, 0.0], True)
    """

    _own = ("base", "dim", "max_degree")

    def __init__(self, kernel: ZonalKernel, dim: int, max_degree: int) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        object.__setattr__(self, "base", kernel)
        object.__setattr__(self, "dim", check_dim(dim))
        object.__setattr__(self, "max_degree", check_degree(max_degree))
        check_allocation(8.0 * 64 * (self.max_degree + 1.0), f"max_degree = {self.max_degree:,}", "lower max_degree")

    def _save_state(self):
        return {"kernel": self.base, "dim": self.dim, "max_degree": self.max_degree}


    @property
    def structure(self):  # type: ignore[override]
        return ("dim", "max_degree")


    def __copy__(self):
        import copy

        return Truncated(copy.copy(self.base), self.dim, self.max_degree)

    def cache_key(self):
        return ("Truncated", self.base.cache_key(), self.dim, self.max_degree)

    def top_degree(self) -> int | None:
        return self.max_degree

    def _levels(self):
        return self.base.unit_spectrum(self.dim, self.max_degree)

    def unit_spectrum(self, dim, L):
        if dim != self.dim:
            raise ValueError(f"this Truncated kernel was built for dim={self.dim}, asked for dim={dim}")
        out = np.zeros(L + 1)
        k = min(L, self.max_degree)
        out[: k + 1] = self._levels()[: k + 1]
        return out

    def unit_spectrum_floor(self, dim, L):
        out = np.zeros(L + 1)
        k = min(L, self.max_degree)
        out[: k + 1] = self.base.unit_spectrum_floor(self.dim, self.max_degree)[: k + 1]
        return out

    def unit_spectrum_gradients(self, dim, L):
        k = min(L, self.max_degree)
        out = {}
        for name, g in self.base.unit_spectrum_gradients(self.dim, self.max_degree).items():
            padded = np.zeros(L + 1)
            padded[: k + 1] = g[: k + 1]
            out[name] = padded
        return out

    def unit_shape(self, t, ops):
        return zonal_series(self._levels(), self.dim, t, ops=ops)

    def at_one(self) -> float:
        counts = np.array([float(num_harmonics(e, self.dim)) for e in range(self.max_degree + 1)])
        return self.variance * float(self._levels() @ counts)

    def at_one_gradients(self) -> dict[str, float]:
        counts = np.array([float(num_harmonics(e, self.dim)) for e in range(self.max_degree + 1)])
        grads = {k: self.variance * float(g @ counts)
                 for k, g in self.base.unit_spectrum_gradients(self.dim, self.max_degree).items()}
        grads["variance"] = float(self._levels() @ counts)
        return grads

    def unit_shape_dt(self, t, ops):
        return zonal_series(self._levels(), self.dim, t, derivative=True, ops=ops)[1]

    def unit_shape_gradients(self, t, ops):
        return {
            name: zonal_series(g, self.dim, t, ops=ops)
            for name, g in self.base.unit_spectrum_gradients(self.dim, self.max_degree).items()
        }


class Parity(WrappedKernel):
    r"""The even or odd part of a zonal kernel under the antipodal map :math:`\hat x \mapsto -\hat x`
    of the sphere: :math:`\kappa_\pm(t) = \tfrac12(\kappa(t) \pm \kappa(-t))`, i.e. the degrees
    of one parity only (:math:`\lambda_\ell` kept for :math:`(-1)^\ell = \pm1`, zero otherwise,
    since :math:`C_\ell^\alpha(-t) = (-1)^\ell C_\ell^\alpha(t)`).

    The antipodal map is orthogonal, so every zonal kernel is invariant under it and
    :math:`k = k_+ + k_-` is its harmonic decomposition with T = 2 (Sun et al. 2021 §3; the map acts on
    the lifted point :math:`\tilde x = [x/s, b]`, not on the data). Each part is a kernel in its
    own right (usable in every model); hyper-parameters are the base kernel's (reads and writes go
    to it), so gradients of both parts add up on the shared parameters.

    Parameters
    ----------
    kernel
        The base kernel.
    even
        ``True``: :math:`\kappa_+` (even degrees); ``False``: :math:`\kappa_-` (odd degrees).

    Examples
    --------
    >>> import spherelab as sl
    >>> even = sl.kernels.Parity(sl.kernels.Matern(2.5, 1.0), even=True)
    >>> even.spectrum(3, 3)[[1, 3]].tolist()   # the odd levels removed
    [0.0, 0.0]
    """

    _own = ("base", "even")

    def __init__(self, kernel: ZonalKernel, even: bool = True) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        object.__setattr__(self, "base", kernel)
        object.__setattr__(self, "even", check_bool(even, "even"))

    def _save_state(self):
        return {"kernel": self.base, "even": self.even}



    @property
    def _sign(self) -> float:
        return 1.0 if self.even else -1.0

    def cache_key(self):
        return ("Parity", self.base.cache_key(), self.even)

    def unit_shape(self, t, ops):
        return 0.5 * (self.base.unit_shape(t, ops) + self._sign * self.base.unit_shape(-t, ops))

    def unit_shape_dt(self, t, ops):
        # d/dt kappa(-t) = -kappa'(-t)
        return 0.5 * (self.base.unit_shape_dt(t, ops) - self._sign * self.base.unit_shape_dt(-t, ops))

    def unit_shape_gradients(self, t, ops):
        g1, g2 = self.base.unit_shape_gradients(t, ops), self.base.unit_shape_gradients(-t, ops)
        return {k: 0.5 * (g1[k] + self._sign * g2[k]) for k in g1}

    def _mask(self, v):
        out = np.array(v, dtype=np.float64, copy=True)
        out[..., (np.arange(out.shape[-1]) % 2 == 1) == self.even] = 0.0
        return out

    def unit_spectrum(self, dim, L):
        return self._mask(self.base.unit_spectrum(dim, L))

    def unit_spectrum_floor(self, dim, L):
        return self._mask(self.base.unit_spectrum_floor(dim, L))

    def unit_spectrum_gradients(self, dim, L):
        return {k: self._mask(v) for k, v in self.base.unit_spectrum_gradients(dim, L).items()}

    def __repr__(self) -> str:
        return f"Parity({self.base!r}, even={self.even})"

