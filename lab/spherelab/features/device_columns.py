r"""Column blocks of :math:`K_{fu}` computed on a device from the rows' lift, one kind per feature
set (:meth:`~spherelab.features.Features.device_columns`); the decoupled models' resident rows
(:class:`~spherelab.rows.device.DeviceRows`, through :class:`~spherelab.rows.device.Stacked`) stack them side by side:

* :class:`KernelColumns`: the kernel's own :math:`k(x_n, s_j)` at host inputs S (inducing points,
  orthogonal inputs, or both stacked), for a kernel with a compiled shape
  (:meth:`~spherelab.kernels.ZonalKernel.fused_code`): ``zonal_columns`` and its backward pass;
* :class:`UnitColumns`: activated units' :math:`\|w_m\|\,r_n\,g_L(\hat w_m^\top\hat x_n)` (Tiao,
  thesis eq. 3.6): ``series_columns``, one Clenshaw pass per entry, and its backward pass;
* :class:`HarmonicColumns`: spherical harmonics :math:`r_n\psi_m(\hat x_n)` (Dutordoir et al.
  2020): ``harmonic_columns`` and, backwards, the solid harmonics' VJP;
* :class:`OrbitColumns`: HVGP's components :math:`k_c(z, x_n) = \sum_s w_{c,s}\,k(zG^s, x_n)` at
  every block's inducing inputs (Sun et al. 2021, eq. 9): the kernel's columns at the orbit
  points, one ``zonal_columns`` launch, combined by the weights.

Each block is a column source of the rows floor (:mod:`spherelab.rows.device`): ``columns(ops, r,
Xh)`` -> (state, K block ``(n, width)``) and ``backward(ops, state, dK, r, Xh)`` -> (the rows'
:math:`\partial L/\partial\tilde x`, its sums by name: the kernel's hyper-parameters' as the kernel
names them, and ``"sources"``, its sources' lifted gradient, where it has sources); then
``source_gradients`` (chained through the sources' lift) and ``split`` (the feature set's parameter
gradients and the orthogonal inputs' rows) on the host.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..sphere.lift import lift_backward_rows, lifted_row_gradients
from ..sphere.series_columns import normalized_zonal
from .zonal import norms_and_directions

__all__ = ["KernelColumns", "UnitColumns", "HarmonicColumns", "OrbitColumns"]


class KernelColumns:
    """Columns :math:`k(x_n, s_j)` of ``kernel`` at host inputs ``S`` ``(P, D)``, of which the first
    ``feature_rows`` are inducing points (``Z``) and the rest orthogonal inputs."""

    def __init__(self, kernel, ops, S: np.ndarray, feature_rows: int) -> None:
        self.kernel, self.ops, self.S, self.m = kernel, ops, S, feature_rows
        r, U = kernel.lift(S, "Z")
        self.r, self.U = ops.to_device(r), ops.to_device(U)
        self.width, self.source_shape = U.shape[0], U.shape

    def stacked(self, W: np.ndarray) -> "KernelColumns":
        """One block for these inputs and the orthogonal inputs ``W`` below them (one launch)."""
        return KernelColumns(self.kernel, self.ops, np.vstack([self.S, W]), self.m)

    def columns(self, ops, r, Xh):
        T = Xh @ self.U.T
        return T, self.kernel.fused_values(ops, T, r, self.r, device=True)

    def backward(self, ops, T, dK, r, Xh):
        A, B, sums = self.kernel.fused_backward(ops, T, dK, r, self.r, device=True)
        dX, dS = lifted_row_gradients(A, B, r, Xh, self.r, self.U)
        return dX, {**sums, "sources": dS}

    def source_gradients(self, dS: np.ndarray, scale) -> dict[str, Any]:
        return lift_backward_rows(self.S, dS, scale)

    def split(self, grads: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray]:
        return ({"Z": grads["X"][: self.m]} if self.m else {}), grads["X"][self.m:]


class UnitColumns:
    """Columns :math:`\\|w_m\\|\\,r_n\\,g_L(\\hat w_m^\\top\\hat x_n)` of activated units."""

    def __init__(self, features, kernel, ops) -> None:
        rw, Wh = norms_and_directions(features.weights, "weights")
        self.coeffs, self.alpha = normalized_zonal(features.cross_series(kernel), features.weights.shape[1])
        self.r, self.U = ops.to_device(rw), ops.to_device(Wh)
        self.width, self.source_shape = Wh.shape[0], Wh.shape

    def stacked(self, W: np.ndarray) -> None:
        return None

    def columns(self, ops, r, Xh):
        T = Xh @ self.U.T
        return T, ops.series_columns(T, r, self.r, self.coeffs, self.alpha)

    def backward(self, ops, T, dK, r, Xh):
        A, B = ops.series_columns_backward(T, dK, self.coeffs, self.alpha)
        dX, dW = lifted_row_gradients(A, B, r, Xh, self.r, self.U)
        return dX, {"sources": dW}

    def source_gradients(self, dW: np.ndarray, scale) -> dict[str, Any]:
        return {"weights": dW, "bias": 0.0, "input_scale": 0.0}  # the weights live on the sphere's side

    def split(self, grads: dict[str, Any]) -> tuple[dict[str, Any], None]:
        return {"weights": grads["weights"]}, None


class HarmonicColumns:
    r"""Columns :math:`r_n\psi_m(\hat x_n)` of spherical harmonics (nothing to train: no sources)."""

    def __init__(self, features) -> None:
        self.features = features
        self.width, self.source_shape = features.num_features, None

    def stacked(self, W: np.ndarray) -> None:
        return None

    def columns(self, ops, r, Xh):
        K = self.features.device_Kuf(ops, Xh, r).T
        return K, K  # the backward pass reads the harmonics from the columns

    def backward(self, ops, K, dK, r, Xh):
        return self.features.device_Kuf_vjp(ops, Xh, dK, K, r), {}

    def source_gradients(self, dS, scale) -> dict[str, Any]:
        return {"bias": 0.0, "input_scale": 0.0}

    def split(self, grads: dict[str, Any]) -> tuple[dict[str, Any], None]:
        return {}, None


class OrbitColumns:
    r"""Columns :math:`k_c(z_{ci}, x_n)` of every block c of a harmonic kernel decomposition
    (:class:`~spherelab.groups.HarmonicComponent`, real form): with the orbit points
    :math:`S = [Z_cG^s]_{c, s}` (``(S, D)``, block c's :math:`|s|` copies of its :math:`m_c` rows),
    :math:`K_{fu}[:, c] = \sum_s w_{c,s}\,k(X, Z_cG^s)`; backwards :math:`\partial L/\partial k(X, Z_cG^s)
    = w_{c,s}\,\partial L/\partial K_{fu}[:, c]`, and an orbit point's gradient chains to its
    :math:`z` by :math:`(G^s)^\top`. The weighted sums run per block on the orbit values viewed as
    ``(n, |s|, m_c)``: :math:`O(nS)`, not the :math:`O(nSM)` of a product with the sparse weights.

    Parameters
    ----------
    components
        The decomposition's components, one per block.
    Zs
        Each block's inducing inputs ``(m_c, D)`` (host arrays).
    kernel, ops
        The base kernel (a compiled shape: :meth:`~spherelab.kernels.ZonalKernel.fused_code`) and
        the device's operations.
    """

    def __init__(self, components, Zs, kernel, ops) -> None:
        orbit, parts, self.blocks = [], [], []
        s_at = u_at = 0
        for comp, Z in zip(components, Zs):
            idx, ws = comp.weights()
            m = Z.shape[0]
            # (the block's orbit rows, its terms, m, its columns, the terms' weights)
            self.blocks.append((s_at, len(idx), m, u_at, ops.device_constant(_weights(tuple(np.real(ws).tolist())))))
            for s in idx:
                G = comp.group.matrix(s)
                orbit.append(Z @ G)  # k(z, G^s x) = k(G^-s z, x): the orbit of z, as rows
                parts.append((G, s_at, u_at, m))
                s_at += m
            u_at += m
        self.inner = KernelColumns(kernel, ops, np.vstack(orbit), 0)
        self.parts, self.dim = parts, Zs[0].shape[1]
        self.width, self.source_shape = u_at, self.inner.source_shape

    def stacked(self, W: np.ndarray) -> None:
        return None

    def columns(self, ops, r, Xh):
        T, K = self.inner.columns(ops, r, Xh)
        xp, n = ops.array_namespace(), K.shape[0]
        # block c: (n, |s|, m) orbit values, weighted over s
        sums = [w @ K[:, a:a + terms * m].reshape(n, terms, m) for a, terms, m, _, w in self.blocks]
        return T, sums[0] if len(sums) == 1 else xp.concatenate(sums, axis=1)

    def backward(self, ops, T, dK, r, Xh):
        xp, n = ops.array_namespace(), dK.shape[0]
        parts = [(w[None, :, None] * dK[:, b:b + m][:, None, :]).reshape(n, terms * m)
                 for _, terms, m, b, w in self.blocks]
        dS = parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=1)
        return self.inner.backward(ops, T, xp.ascontiguousarray(dS), r, Xh)

    def source_gradients(self, dS: np.ndarray, scale) -> dict[str, Any]:
        return self.inner.source_gradients(dS, scale)

    def split(self, grads: dict[str, Any]) -> tuple[dict[str, Any], None]:
        """``{"Z": (M, D)}``: each orbit point's gradient chained back to its block's input."""
        dZ = np.zeros((self.width, self.dim))
        for G, a, b, m in self.parts:
            dZ[b:b + m] += grads["X"][a:a + m] @ G.T
        return {"Z": dZ}, None


@functools.lru_cache(maxsize=64)
def _weights(ws: tuple) -> np.ndarray:
    """A block's orbit weights, read-only: the same weights give the same array (the device holds
    one copy, ``device_constant``)."""
    w = np.array(ws, dtype=np.float64)
    w.flags.writeable = False
    return w
