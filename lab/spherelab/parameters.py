r"""The one parameter registry of the models: each trainable parameter once — a name, how to read and
write its value, and a transform: ``"free"`` (as is), ``"positive"`` (optimised as :math:`u` with
value :math:`\mathrm{softplus}(u)` above a floor) or ``"tril"`` (a lower-triangular square matrix
stored by its ``tril_indices`` entries) — and the registry entries of a kernel and a likelihood.
:class:`~spherelab.models.base.Model` turns a list of them into ``get_params``/``set_params``, a
flat vector and the objective's chain rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import expit

from ._validation import check_finite_array
from .linalg import NumericalFailure

__all__ = ["softplus", "softplus_inverse", "Param", "kernel_params", "likelihood_params"]


def softplus(u):
    r""":math:`\log(1 + e^u)`, without overflow: the map from an optimiser's free value to a positive
    parameter."""
    return np.logaddexp(0.0, u)


def softplus_inverse(x):
    """The free value whose :func:`softplus` is ``x`` (``x`` itself above 30, where they agree)."""
    # a parameter at exactly 0 (bias = 0) maps to softplus(-690) = 1e-300, i.e. stays ~0
    x = np.maximum(np.asarray(x, dtype=np.float64), 1e-300)
    return np.where(x > 30, x, np.log(np.expm1(np.minimum(x, 30))))


@dataclass
class Param:
    """One registry entry: ``get()`` returns the current value (a float or an array),
    ``set(value)`` writes one of the same shape; ``kind`` is ``"free"``, ``"positive"`` or
    ``"tril"``."""

    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None]
    kind: str = "free"
    #: lower bound of a positive entry: the optimiser sees ``lower + softplus(u)``
    lower: float = 0.0

    def shape(self, value: Any = None) -> tuple:
        """The value's shape (of ``value``, when already read)."""
        return np.shape(self.get() if value is None else value)

    def validate(self, value: Any) -> Any:
        """``value`` as a float or an array of this entry's shape, or a ValueError naming it."""
        arr = check_finite_array(value, self.name)  # the dtype policy; NaN/inf named
        if arr.shape != self.shape():
            raise ValueError(f"{self.name} must have shape {self.shape()}, got {arr.shape}")
        if self.kind == "positive" and np.any(arr <= self.lower if self.lower == 0 else arr < self.lower):
            raise ValueError(f"{self.name} must be {'> 0' if self.lower == 0 else f'>= {self.lower:g}'}, got {value!r}")
        return float(arr) if arr.ndim == 0 else arr.copy()

    def pack(self) -> np.ndarray:
        v = np.asarray(self.get(), dtype=np.float64)
        if self.kind == "positive":
            return softplus_inverse(v - self.lower).ravel()
        if self.kind == "tril":
            return v[np.tril_indices(v.shape[0])]
        return v.ravel().copy()

    def size(self, shape: tuple | None = None) -> int:
        """Entries in the optimiser's vector (``shape``: the value's, when already known)."""
        shape = self.shape() if shape is None else shape
        if self.kind == "tril":
            return shape[0] * (shape[0] + 1) // 2
        return math.prod(shape)

    def value_of(self, u: np.ndarray, shape: tuple | None = None) -> Any:
        """The value the optimiser's finite coordinates ``u`` stand for, nothing written (``shape``:
        the value's, when already known); a value the transform cannot represent (overflow to inf,
        a positive one underflowing to 0) is a rejected trial point. (The setters check the rest.)"""
        shape = self.shape() if shape is None else shape
        if self.kind == "tril":
            L = np.zeros(shape)
            L[np.tril_indices(shape[0])] = u
            return L
        v = self.lower + softplus(u) if self.kind == "positive" else np.array(u, dtype=np.float64)
        if not np.all(np.isfinite(v)) or (self.kind == "positive" and self.lower == 0 and np.any(v <= 0)):
            raise NumericalFailure(f"the optimiser's value of {self.name} is not valid: {v!r} (overflow or underflow)")
        return float(v[0]) if shape == () else v.reshape(shape)

    def unpack(self, u: np.ndarray) -> None:
        self.set(self.value_of(u))

    def chain(self, grad: Any, u: np.ndarray) -> np.ndarray:
        """The gradient in the optimiser's coordinates ``u`` from the value's gradient."""
        g = np.asarray(grad, dtype=np.float64)
        if self.kind == "tril":
            return g[np.tril_indices(g.shape[0])]
        g = np.broadcast_to(g, self.shape()).ravel()
        return g * expit(u) if self.kind == "positive" else g.copy()


def kernel_params(kernel) -> list[Param]:
    """Registry entries of a kernel: ``variance``, the shape parameters, ``bias`` and
    ``input_scale`` (all positive)."""
    def entry(name):
        return Param(name, lambda: kernel.get_hyper(name), lambda v: kernel.set_hyper(name, v), "positive")

    return [entry(n) for n in kernel.parameter_names]


def likelihood_params(likelihood) -> list[Param]:
    """Registry entries of a likelihood's :attr:`~spherelab.likelihoods.Likelihood.parameters` (all
    positive, above their floor): the Gaussian noise variance as ``noise``; Bernoulli has none."""
    def entry(name, attr):
        return Param(name, lambda: getattr(likelihood, attr), lambda v: setattr(likelihood, attr, v), "positive",
                     likelihood.floor_of(name))

    return [entry(name, attr) for name, attr in likelihood.parameters.items()]
