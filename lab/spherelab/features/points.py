r"""Inducing points in data space: :math:`u_m = f(z_m)`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._state import Fields
from .._validation import MAX_MAGNITUDE, check_bool, check_finite_array
from ..backend.ops import Operations
from ..kernels import ZonalKernel
from .base import Features
from .device_columns import KernelColumns

__all__ = ["InducingPoints"]


class InducingPoints(Features):
    r"""Inducing points :math:`u_m = f(z_m)` in data space: :math:`K_{uu} = k(Z, Z)`,
    :math:`K_{uf} = k(Z, X)`.

    Parameters
    ----------
    Z
        ``(M, D)`` initial locations (trainable).
    fixed
        Keep the locations where they are: only the kernel's and the likelihood's parameters are
        fitted (Burt, Rasmussen & van der Wilk 2020: well-placed inputs, such as k-means centres,
        lose little, and a step costs no gradient with respect to M x D locations).

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> X, y = sl.datasets.snelson_like(100)
    >>> model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.features.InducingPoints(X[:10]), 0).fit(X, y, maxiter=20)
    >>> model.features.Z.shape
    (10, 1)
    """

    fields = Fields(config=("Z", "fixed"), transient=("num_units",))

    def __init__(self, Z: Any, fixed: bool = False) -> None:
        Z = check_finite_array(Z, "Z", ndim=2)
        if Z.shape[0] == 0 or Z.shape[1] == 0:
            raise ValueError(f"Z must hold at least one inducing input of at least one column, got shape {Z.shape}")
        top = float(np.max(np.abs(Z)))
        if top > MAX_MAGNITUDE:
            raise ValueError(f"Z has entries up to {top:.3g}: beyond {MAX_MAGNITUDE:g}, the kernel's lift overflows; "
                             "standardise the inputs (spherelab.datasets.Standardizer)")
        self.Z = Z.copy()
        self.fixed = check_bool(fixed, "fixed")
        self.num_units = self.Z.shape[0]

    @property
    def num_features(self) -> int:
        return self.Z.shape[0]

    def initialise(self, dim: int, rng: np.random.Generator) -> None:
        if self.Z.shape[1] + 1 != dim:
            raise ValueError(f"Z has {self.Z.shape[1]} columns but the data have {dim - 1}")

    def Kuu(self, kernel: ZonalKernel, *, ops: Operations | str = "cpu") -> np.ndarray:
        return kernel.K(self.Z, ops=ops)

    def Kuf(self, kernel: ZonalKernel, X: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        return kernel.K(self.Z, X, ops=ops)

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        out, dZ, _ = kernel.gradients_with_inputs(0.5 * (G + G.T), self.Z, ops=ops)
        out["Z"] = dZ
        return out

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any, *,
                      ops: Operations | str = "cpu") -> dict[str, Any]:
        X = check_finite_array(X, "X", ndim=2)
        out, dZ, dX = kernel.gradients_with_inputs(G, self.Z, X, ops=ops)
        out["Z"] = dZ
        out["X"] = dX
        return out

    def get_params(self) -> np.ndarray:
        return np.zeros(0) if self.fixed else self.Z.ravel().copy()

    def set_params(self, values: np.ndarray) -> None:
        if self.fixed:
            if np.size(values):
                raise ValueError("these inducing inputs are fixed (InducingPoints(..., fixed=True)): no parameters")
            return
        self.Z = np.asarray(values, dtype=np.float64).reshape(self.Z.shape).copy()

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        if self.fixed:
            return np.zeros(0)
        return np.asarray(grads.get("Z", np.zeros_like(self.Z))).ravel()

    def has_device_columns(self, kernel: ZonalKernel) -> bool:
        return kernel.fused_code() is not None  # the kernel's columns compiled for the device

    def device_columns(self, kernel: ZonalKernel, ops) -> KernelColumns | None:
        return KernelColumns(kernel, ops, self.Z, self.Z.shape[0]) if self.has_device_columns(kernel) else None

    def __repr__(self) -> str:
        return f"InducingPoints(M={self.Z.shape[0]}, D={self.Z.shape[1]})"
