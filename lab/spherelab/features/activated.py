r"""Activated inducing features (Tiao, thesis §3.2.2, eq. 3.6): unit m is an activation of the
projection of the lifted input on a weight :math:`w_m`, truncated at level L in both
:math:`K_{uf}` and :math:`K_{uu}`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._state import Fields
from .._validation import check_allocation, check_finite_array, check_int
from ..activations import Activation
from ..backend.ops import Operations, as_operations
from ..kernels import ZonalKernel
from ..sphere.gegenbauer import zonal_series, zonal_series_vjp
from ..sphere.lift import lifted_row_gradients
from ..sphere.series_columns import normalized_zonal
from .base import Features
from .device_columns import UnitColumns
from .zonal import norms_and_directions, zonal_pair, zonal_pair_gradients

__all__ = ["ActivatedFeatures"]


class ActivatedFeatures(Features):
    r"""Activated inducing features: unit m is the homogeneous activation
    :math:`H_m(\tilde x) = \|w_m\|\,r\,\sigma(\hat w_m^\top \hat x)` (Tiao, thesis eq. 3.5), with
    its harmonic expansion truncated at level ``truncation`` (L) and the levels where the kernel's
    :math:`\lambda_\ell = 0` dropped, in both covariances:

    .. math:: [K_{uf}]_{mn} = \|w_m\|\,r_n \sum_{\ell\le L,\lambda_\ell\neq0}\sigma_\ell Z_\ell(\hat w_m^\top\hat x_n),
              \qquad
              [K_{uu}]_{mm'} = \|w_m\|\|w_{m'}\|\sum_{\ell\le L,\lambda_\ell\neq0}\frac{\sigma_\ell^2}{\lambda_\ell}
              Z_\ell(\hat w_m^\top\hat w_{m'})

    (Tiao, thesis eq. 3.6, ``docs/design.md`` §4).

    Parameters
    ----------
    activation
        An :class:`~spherelab.activations.Activation` (ReLU, Softplus, ...).
    num_units
        M.
    truncation
        L, the highest level kept.
    weights
        ``(M, d)`` initial unit weights :math:`w_m \in \mathbb R^d` (d = inputs + 1); default:
        set by the model from the data dimension (random directions, unit norm).

    Examples
    --------
    >>> import spherelab as sl
    >>> X, y = sl.datasets.snelson_like(100)
    >>> features = sl.features.ActivatedFeatures(sl.activations.ReLU(), num_units=8, truncation=4)
    >>> model = sl.OrthogonalSVGP(sl.kernels.ArcCosine(1), features, 0).fit(X, y, maxiter=20)
    >>> model.features.num_features
    8
    """

    fields = Fields(config=("activation", "num_units", "truncation", "weights"))

    def __init__(self, activation: Activation, num_units: int, truncation: int, weights: Any = None) -> None:
        if not isinstance(activation, Activation):
            raise TypeError(f"activation must be a spherelab Activation, got {activation!r}")
        self.activation = activation
        self.num_units = check_int(num_units, "num_units", minimum=1)
        self.truncation = check_int(truncation, "truncation", minimum=0)
        check_allocation(16.0 * float(self.num_units) ** 2, f"num_units = {self.num_units:,}", "use fewer units")
        check_allocation(8.0 * 64 * (self.truncation + 1.0), f"truncation = {self.truncation:,}",
                         "lower the truncation degree")
        self.weights = None if weights is None else check_finite_array(weights, "weights", ndim=2).copy()
        if self.weights is not None and self.weights.shape[0] != self.num_units:
            raise ValueError(f"weights must have num_units = {self.num_units} rows, got {self.weights.shape[0]}")

    @property
    def num_features(self) -> int:
        return self.num_units

    def initialise(self, dim: int, rng: np.random.Generator) -> None:
        """Random unit directions on :math:`S^{d-1}` if no weights were given."""
        if self.weights is None:
            W = rng.standard_normal((self.num_units, dim))
            self.weights = W / np.linalg.norm(W, axis=1, keepdims=True)
        elif self.weights.shape[1] != dim:
            raise ValueError(f"weights have {self.weights.shape[1]} columns but the lifted inputs have d = {dim}")

    def _coefficients(self, kernel: ZonalKernel, dim: int):
        L = self.truncation
        lam = kernel.spectrum(dim, L)
        sig = self.activation.coefficients(dim, L)
        keep = lam > 0  # levels with lambda = 0 are dropped (design.md §3)
        g = np.where(keep, sig, 0.0)
        q = np.where(keep, sig * sig / np.where(keep, lam, 1.0), 0.0)
        return lam, sig, keep, g, q

    def cross_series(self, kernel: ZonalKernel) -> np.ndarray:
        r"""The zonal coefficients of :math:`K_{uf}`'s series, :math:`\sigma_\ell` where
        :math:`\lambda_\ell \neq 0` and 0 elsewhere (``(L + 1,)``): :math:`[K_{uf}]_{mn} =
        \|w_m\|\,r_n\sum_\ell g_\ell Z_\ell(\hat w_m^\top\hat x_n)`. They depend on the kernel
        only through which levels it keeps."""
        return self._coefficients(kernel, self.weights.shape[1])[3]

    def _series(self, coeffs: np.ndarray, dim: int, ops):
        return lambda t: zonal_series(coeffs, dim, t, ops=ops)

    def _both(self, coeffs: np.ndarray, dim: int, ops):
        # value and t-derivative of a finite series from one Clenshaw pass (finite at t = +-1)
        return lambda t: zonal_series(coeffs, dim, t, derivative=True, ops=ops)

    def Kuu(self, kernel: ZonalKernel, *, ops: Operations | str = "cpu") -> np.ndarray:
        """``(M, M)``."""
        dim = self.weights.shape[1]
        q = self._coefficients(kernel, dim)[4]
        K = zonal_pair(self.weights, self.weights, self._series(q, dim, ops))
        return 0.5 * (K + K.T)

    def Kuf(self, kernel: ZonalKernel, X: Any, *, ops: Operations | str = "cpu") -> np.ndarray:
        """``(M, N)``: one fused pass per entry (``series_columns``: the inner product clipped, the
        series by Clenshaw, both norms)."""
        ops, c, alpha, (rw, Wh), (rx, Xh) = self._cross(kernel, check_finite_array(X, "X", ndim=2), ops)
        return ops.to_host(ops.series_columns(Wh @ Xh.T, rw, rx, c, alpha))

    def _cross(self, kernel: ZonalKernel, X: Any, ops):
        """The operations, :math:`K_{uf}`'s series in the normalised basis, and the norms and unit
        rows of the weights and of the lifted inputs ``X`` (validated by the caller; host arrays:
        the operation takes them)."""
        c, alpha = normalized_zonal(self.cross_series(kernel), self.weights.shape[1])
        return as_operations(ops), c, alpha, norms_and_directions(self.weights, "weights"), kernel.lift(X, "X")

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray, *, ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uu}` into ``weights`` and the kernel's spectral
        hyper-parameters (through :math:`\partial q/\partial\lambda_\ell = -\sigma_\ell^2/\lambda_\ell^2`)."""
        W = self.weights
        dim = W.shape[1]
        L = self.truncation
        lam, sig, keep, _, q = self._coefficients(kernel, dim)
        dA, dB = zonal_pair_gradients(G, W, W, self._both(q, dim, ops))
        out: dict[str, Any] = {"weights": dA + dB}
        r, Wh = norms_and_directions(W, "weights")
        T = np.clip(Wh @ Wh.T, -1.0, 1.0)
        dF_dq = zonal_series_vjp(G * (r[:, None] * r[None, :]), dim, T, L)  # M x M: on the host
        dq_dlam = np.where(keep, -sig * sig / np.where(keep, lam, 1.0) ** 2, 0.0)
        dlam = dF_dq * dq_dlam
        out.update(kernel.spectrum_vjp(dim, L, dlam))
        return out

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any, *,
                      ops: Operations | str = "cpu") -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uf}` (``(M, N)``) into ``weights``, the inputs
        ``X`` and the lift (``bias``, ``input_scale``)."""
        X = check_finite_array(X, "X", ndim=2)
        ops, c, alpha, (rw, Wh), (rx, Xh) = self._cross(kernel, X, ops)
        A, B = map(ops.to_host, ops.series_columns_backward(Wh @ Xh.T, G, c, alpha))
        dW, dXt = lifted_row_gradients(A, B, rw, Wh, rx, Xh)
        out = kernel.lift_backward(X, dXt)
        out["weights"] = dW
        return out

    def get_params(self) -> np.ndarray:
        return self.weights.ravel().copy()

    def set_params(self, values: np.ndarray) -> None:
        self.weights = np.asarray(values, dtype=np.float64).reshape(self.weights.shape).copy()

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        return np.asarray(grads.get("weights", np.zeros_like(self.weights))).ravel()

    def has_device_columns(self, kernel) -> bool:
        return True

    def device_columns(self, kernel, ops) -> UnitColumns:
        return UnitColumns(self, kernel, ops)

    def __repr__(self) -> str:
        return f"ActivatedFeatures({self.activation!r}, num_units={self.num_units}, truncation={self.truncation})"
