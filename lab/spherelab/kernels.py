r"""Zonal kernels on :math:`S^{d-1}`: shape :math:`\kappa(t)`, spectrum :math:`\lambda_\ell`, and
their derivatives; each is also a covariance function in data space.

Conventions (``shared/design.md`` §1–2): :math:`\kappa(t) = \sum_\ell \lambda_\ell Z_\ell(t)`,
:math:`\kappa(1) = \sum_\ell \lambda_\ell N(\ell, d)` = ``variance`` (for every kernel whose series
converges). In data space an input :math:`x \in R^D` is lifted to
:math:`\tilde x = [x / s, b] \in R^{D+1}` (``input_scale`` s, ``bias`` b), :math:`r = \|\tilde x\|`,
:math:`\hat x = \tilde x / r`, and

.. math:: k(x, x') = r\, r'\, \kappa(\hat x^\top \hat x').

Every kernel exposes

* ``shape(t)``, ``shape_dt(t)`` (the t-derivative), ``shape_gradients(t)`` (dict parameter ->
  derivative),
* ``spectrum(dim, max_degree)`` and ``spectrum_gradients(dim, max_degree)``,
* ``K(X, X2=None)``, ``diag(X)`` and ``gradients(dL_dK, X, X2=None)`` — GPy's contract: the
  derivative of a scalar L with respect to every hyper-parameter (including ``bias`` and
  ``input_scale``) given :math:`\partial L / \partial K`.

Spectra are exact where the maths allows: the arc-cosine kernels are
:math:`\lambda_\ell = c_p\,\sigma_\ell^2` with :math:`\sigma_\ell` the coefficients of the unit
:math:`\max(0, t)^p` (:math:`\kappa_p(\hat x^\top \hat x') \propto
E_w[\sigma(w^\top x)\sigma(w^\top x')]` and Funk–Hecke), so they are non-negative by construction;
Matérn, deep arc-cosine and NTK spectra come from the quadrature of :mod:`spherelab.funk_hecke`
(geometric convergence, ~1e-15).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from ._matern_jit import NU_CODES, matern_backward, matern_values
from ._validation import check_degree, check_dim, check_finite_array, check_int
from .activations import ReLU, SquaredReLU, Step
from .funk_hecke import apply_parity, funk_hecke_with_rule
from .gegenbauer import zonal_series
from .special import num_harmonics

#: use the compiled Matérn kernels (``_matern_jit``); tests switch it off to compare paths
_FUSED = True

__all__ = [
    "ZonalKernel",
    "ArcCosine",
    "DeepArcCosine",
    "NTK",
    "Matern",
    "IntrinsicMatern",
    "PolynomialDecay",
    "Truncated",
    "Parity",
]


def _positive(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _arccos_shape(order: int, t: np.ndarray) -> np.ndarray:
    """Normalised arc-cosine shapes (Cho & Saul 2009), kappa(1) = 1."""
    t = np.clip(t, -1.0, 1.0)
    theta = np.arccos(t)
    s = np.sqrt(np.maximum(1.0 - t * t, 0.0))
    if order == 0:
        return 1.0 - theta / np.pi
    if order == 1:
        return (s + (np.pi - theta) * t) / np.pi
    # J_2 = 3 sin(th) cos(th) + (pi - th)(1 + 2 cos^2 th); kappa_2 = J_2 / (3 pi)
    return (3.0 * s * t + (np.pi - theta) * (1.0 + 2.0 * t * t)) / (3.0 * np.pi)


def _arccos_shape_dt(order: int, t: np.ndarray) -> np.ndarray:
    """d kappa_p / dt: kappa_1' = kappa_0, kappa_2' = (4/3) kappa_1, kappa_0' = 1/(pi sqrt(1-t^2))."""
    t = np.clip(t, -1.0, 1.0)
    if order == 0:
        with np.errstate(divide="ignore"):
            return 1.0 / (np.pi * np.sqrt(np.maximum(1.0 - t * t, 0.0)))
    if order == 1:
        return _arccos_shape(0, t)
    return 4.0 / 3.0 * _arccos_shape(1, t)


class ZonalKernel:
    """Base class. Subclasses implement the unit-variance ``_shape``, ``_shape_dt``,
    ``_shape_grads`` and ``_spectrum``/``_spectrum_grads``; ``variance``, ``bias`` and
    ``input_scale`` are handled here."""

    #: names of the shape's own hyper-parameters (besides variance, bias, input_scale)
    shape_params: tuple[str, ...] = ()

    def __init__(self, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0) -> None:
        self.variance = _positive(variance, "variance")
        b = float(bias)
        if not np.isfinite(b) or b < 0:
            raise ValueError(f"bias must be a finite number >= 0, got {bias!r}")
        self.bias = b
        scale = check_finite_array(input_scale, "input_scale")
        if scale.ndim > 1 or np.any(scale <= 0):
            raise ValueError("input_scale must be a positive scalar or a 1-d array of positives")
        self.input_scale = float(scale) if scale.ndim == 0 else scale.copy()

    # ---- to implement -----------------------------------------------------------------
    def _shape(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _shape_dt(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _shape_grads(self, t: np.ndarray) -> dict[str, np.ndarray]:
        return {}

    def _spectrum(self, dim: int, L: int) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _spectrum_grads(self, dim: int, L: int) -> dict[str, np.ndarray]:
        return {}

    def _key(self) -> tuple:
        return (type(self).__name__,) + tuple(getattr(self, p) for p in self.shape_params)

    # ---- sphere view ------------------------------------------------------------------
    @property
    def hyperparameters(self) -> dict[str, Any]:
        """All hyper-parameters by name (``input_scale`` may be an array)."""
        out = {p: getattr(self, p) for p in self.shape_params}
        out.update(variance=self.variance, bias=self.bias, input_scale=self.input_scale)
        return out

    def shape(self, t: Any) -> np.ndarray:
        r""":math:`\kappa(t)` (includes ``variance``), same shape as ``t``."""
        return self.variance * self._shape(check_finite_array(t, "t"))

    def shape_dt(self, t: Any) -> np.ndarray:
        r""":math:`d\kappa/dt`."""
        return self.variance * self._shape_dt(check_finite_array(t, "t"))

    def shape_gradients(self, t: Any) -> dict[str, np.ndarray]:
        r""":math:`\partial\kappa(t)/\partial\theta` for ``variance`` and the shape parameters."""
        t = check_finite_array(t, "t")
        grads = {k: self.variance * v for k, v in self._shape_grads(t).items()}
        grads["variance"] = self._shape(t)
        return grads

    def at_one(self) -> float:
        r""":math:`\kappa(1)`, the prior variance at unit radius (exact where the shape is a
        truncated series)."""
        return float(self.shape(np.ones(1))[0])

    def at_one_gradients(self) -> dict[str, float]:
        r""":math:`\partial\kappa(1)/\partial\theta` for ``variance`` and the shape parameters."""
        return {k: float(v[0]) for k, v in self.shape_gradients(np.ones(1)).items()}

    def spectrum(self, dim: int, max_degree: int) -> np.ndarray:
        r"""Eigenvalues :math:`\lambda_0..\lambda_L` on :math:`S^{d-1}` (``(L + 1,)``)."""
        dim, L = check_dim(dim), check_degree(max_degree)
        return self.variance * self._spectrum(dim, L)

    def spectrum_gradients(self, dim: int, max_degree: int) -> dict[str, np.ndarray]:
        r""":math:`\partial\lambda_\ell/\partial\theta` for ``variance`` and the shape
        parameters."""
        dim, L = check_dim(dim), check_degree(max_degree)
        grads = {k: self.variance * v for k, v in self._spectrum_grads(dim, L).items()}
        grads["variance"] = self._spectrum(dim, L)
        return grads

    # ---- data space -------------------------------------------------------------------
    def lift(self, X: Any, name: str = "X") -> tuple[np.ndarray, np.ndarray]:
        r"""``(r, X_hat)``: norms :math:`r = \|[x/s, b]\|` ``(N,)`` and the points on the
        sphere ``(N, D + 1)``."""
        X = check_finite_array(X, name, ndim=2)
        scale = np.asarray(self.input_scale)
        if scale.ndim == 1 and scale.shape[0] != X.shape[1]:
            raise ValueError(
                f"input_scale has {scale.shape[0]} entries but {name} has {X.shape[1]} columns"
            )
        Xt = np.concatenate([X / scale, np.full((X.shape[0], 1), self.bias)], axis=1)
        r = np.sqrt(np.einsum("ij,ij->i", Xt, Xt))
        if np.any(r == 0):
            i = int(np.flatnonzero(r == 0)[0])
            raise ValueError(
                f"row {i} of {name} vanishes after the lift [x / input_scale, bias] "
                "(a zero row with bias = 0): use a positive bias"
            )
        return r, Xt / r[:, None]

    def _fused_code(self) -> int | None:
        """Code of a fused compiled kernel for this shape (``None``: the NumPy path)."""
        return None

    def K(self, X: Any, X2: Any = None) -> np.ndarray:
        r"""Gram matrix :math:`k(X, X2)`, ``(N, N2)``."""
        r1, U1 = self.lift(X)
        r2, U2 = (r1, U1) if X2 is None else self.lift(X2, "X2")
        code = self._fused_code()
        if code is not None:
            return matern_values(U1 @ U2.T, r1, r2, code, self.lengthscale, self.variance, X2 is None)
        T = np.clip(U1 @ U2.T, -1.0, 1.0)
        if X2 is None:
            np.fill_diagonal(T, 1.0)
        return r1[:, None] * r2[None, :] * self.shape(T)

    __call__ = K

    def diag(self, X: Any) -> np.ndarray:
        r""":math:`k(x, x) = r^2 \kappa(1)`, ``(N,)``."""
        r, _ = self.lift(X)
        return r * r * float(self.shape(np.ones(1))[0])

    def diag_gradients(self, dL_ddiag: Any, X: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial k(x_n, x_n)` (``(N,)``) into every hyper-parameter:
        :math:`k(x, x) = r^2\kappa(1)`, so the shape parameters enter through :math:`\kappa(1)` and
        ``bias``, ``input_scale`` through :math:`r^2 = \|[x/s, b]\|^2`."""
        g = check_finite_array(dL_ddiag, "dL_ddiag")
        r, Xh = self.lift(X)
        out: dict[str, Any] = {k: float(g @ (r * r)) * v for k, v in self.at_one_gradients().items()}
        lg = self.lift_backward(np.asarray(X, dtype=np.float64), 2.0 * self.at_one() * (g * r)[:, None] * Xh)
        out["bias"] = lg["bias"]
        out["input_scale"] = lg["input_scale"]
        return out

    def gradients(self, dL_dK: Any, X: Any, X2: Any = None) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K` into every hyper-parameter (GPy's contract).

        With :math:`K_{ij} = r_i r_j \kappa(t_{ij})`, :math:`t_{ij} = u_{ij}/(r_i r_j)`,
        :math:`u = \tilde x_i^\top \tilde x_j`, a lift parameter p enters through
        :math:`\partial r_i/\partial p` and :math:`\partial u_{ij}/\partial p`; entries with
        :math:`t = 1` exactly (the diagonal of :math:`k(X, X)`) have :math:`\partial t = 0` and
        skip :math:`\kappa'(1)`, which is infinite for the order-0 arc-cosine and Matérn-1/2.

        Returns
        -------
        dict
            Scalars for ``variance``, ``bias`` and the shape parameters; ``input_scale`` is a
            scalar or an array like the parameter.
        """
        return self.gradients_with_inputs(dL_dK, X, X2)[0]

    def gradients_with_inputs(self, dL_dK: Any, X: Any, X2: Any = None) -> tuple[dict[str, Any], np.ndarray, Any]:
        r""":meth:`gradients` together with :math:`\partial L/\partial X` and
        :math:`\partial L/\partial X_2`, sharing one evaluation of :math:`t`, :math:`\kappa`,
        :math:`\kappa'` and :math:`\partial\kappa/\partial\theta`.

        Through the lifted rows :math:`\tilde x_i = [x_i/s, b]`:
        :math:`\partial L/\partial\tilde x_i = \sum_j A_{ij} r_j\,\tilde x_i/r_i + \sum_j B_{ij}\tilde x_j`
        with :math:`A = G\odot(\kappa - t\kappa')` and :math:`B = G\odot\kappa'`; ``bias``,
        ``input_scale`` and the inputs then follow from :meth:`lift_backward`.

        Returns
        -------
        (dict, dX ``(N, D)``, dX2 ``(N2, D)`` or ``None``)
            With ``X2=None`` (``K(X)``) ``dX`` is the total over both arguments and ``dX2`` is
            ``None``.
        """
        X = check_finite_array(X, "X", ndim=2)
        same = X2 is None
        X2 = X if same else check_finite_array(X2, "X2", ndim=2)
        G = check_finite_array(dL_dK, "dL_dK", ndim=2)
        if G.shape != (X.shape[0], X2.shape[0]):
            raise ValueError(f"dL_dK must have shape {(X.shape[0], X2.shape[0])}, got {G.shape}")
        r1, U1 = self.lift(X)
        r2, U2 = (r1, U1) if same else self.lift(X2, "X2")
        code = self._fused_code()
        if code is not None:  # one compiled pass for A, B and the hyper-parameter sums
            A, B, g_var, g_len = matern_backward(U1 @ U2.T, G, r1, r2, code, self.lengthscale, self.variance, same)
            out: dict[str, Any] = {"lengthscale": g_len, "variance": g_var}
        else:
            A, B, out = self._AB(G, U1 @ U2.T, r1, r2, same)
        Xt1 = U1 * r1[:, None]
        Xt2 = U2 * r2[:, None]
        dXt1 = ((A @ r2) / r1)[:, None] * Xt1 + B @ Xt2
        dXt2 = ((r1 @ A) / r2)[:, None] * Xt2 + B.T @ Xt1
        if same:
            dXt1 = dXt1 + dXt2
        g1 = self.lift_backward(X, dXt1)
        out["bias"] = g1["bias"]
        out["input_scale"] = g1["input_scale"]
        if same:
            return out, g1["X"], None
        g2 = self.lift_backward(X2, dXt2)
        out["bias"] += g2["bias"]
        out["input_scale"] = out["input_scale"] + g2["input_scale"]
        return out, g1["X"], g2["X"]

    def _AB(self, G, T, r1, r2, same):
        # NumPy path of gradients_with_inputs: A = G (kappa - t kappa'), B = G kappa' and the
        # hyper-parameter sums
        T = np.clip(T, -1.0, 1.0)
        if same:
            np.fill_diagonal(T, 1.0)
        kap, kap_t, grads = self._shape_all(T)
        GR = G * (r1[:, None] * r2[None, :])
        out: dict[str, Any] = {k: self.variance * float(np.vdot(GR, np.broadcast_to(v, GR.shape))) for k, v in grads.items()}
        out["variance"] = float(np.vdot(GR, kap))
        kap = self.variance * kap
        kap_t = self.variance * kap_t
        if same:  # t = 1 exactly (diagonal, repeated rows): dt = 0 there and kappa'(1) may be infinite
            kap_t = np.where(T == 1.0, 0.0, kap_t)
        A = G * (kap - T * kap_t)  # multiplies d(r_i r_j)
        B = G * kap_t  # multiplies du_ij
        if not np.all(np.isfinite(B)):
            raise FloatingPointError(
                "kappa'(t) is infinite at coincident inputs in X and X2; this kernel is not "
                "differentiable there (e.g. Matern nu=1/2, ArcCosine order 0)"
            )
        return A, B, out

    def lift_backward(self, X: np.ndarray, dXt: np.ndarray) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial\tilde x` (``(N, D + 1)``, the unnormalised lifted
        rows :math:`\tilde x = [x / s, b]`) into ``X``, ``bias`` and ``input_scale``."""
        scale = np.asarray(self.input_scale, dtype=np.float64)
        D = X.shape[1]
        s_vec = np.broadcast_to(scale, (D,))
        g_scale = -np.einsum("nk,nk->k", dXt[:, :D], X) / (s_vec * s_vec)
        return {
            "X": dXt[:, :D] / s_vec,
            "bias": float(dXt[:, D].sum()),
            "input_scale": float(g_scale.sum()) if scale.ndim == 0 else g_scale,
        }

    def _shape_all(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(kappa, kappa', d kappa / d shape-params)`` without ``variance``; subclasses fuse
        the three where they share work."""
        return self._shape(t), self._shape_dt(t), self._shape_grads(t)

    #: structural (non-trainable) attributes shown by repr
    structure: tuple[str, ...] = ()

    def __repr__(self) -> str:
        items = {s: getattr(self, s) for s in self.structure}
        items.update(self.hyperparameters)
        args = ", ".join(f"{k}={v!r}" for k, v in items.items())
        return f"{type(self).__name__}({args})"


# --------------------------------------------------------------------------------------------
# arc-cosine family
# --------------------------------------------------------------------------------------------

_ARCCOS_UNIT = {0: Step(), 1: ReLU(), 2: SquaredReLU()}


class ArcCosine(ZonalKernel):
    r"""Arc-cosine kernel of order 0, 1 or 2 (Cho & Saul 2009), normalised to
    :math:`\kappa(1) = ` ``variance``:

    .. math:: \kappa_0 = 1 - \tfrac{\theta}{\pi},\quad
              \kappa_1 = \tfrac{\sin\theta + (\pi - \theta)\cos\theta}{\pi},\quad
              \kappa_2 = \tfrac{3\sin\theta\cos\theta + (\pi-\theta)(1 + 2\cos^2\theta)}{3\pi},
              \qquad t = \cos\theta.

    Spectrum: :math:`\lambda_\ell = 2\,\sigma_\ell^2,\ 2d\,\sigma_\ell^2,\
    \tfrac{2d(d+2)}{3}\sigma_\ell^2` for the step, ReLU and squared-ReLU units (Gaussian weights
    have :math:`E\|w\|^{2p} = d(d+2)\cdots(d+2p-2)`), exact and non-negative; the d = 3 order-1
    spectrum is 0.375, 0.1667, 0.02344, 0, 0.000651 (seed 000 Table B.1).
    """

    structure = ("order",)

    def __init__(self, order: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        order = check_int(order, "order")
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order}")
        self.order = order
        super().__init__(variance, bias, input_scale)

    def _key(self) -> tuple:
        return ("ArcCosine", self.order)

    def _shape(self, t):
        return _arccos_shape(self.order, t)

    def _shape_dt(self, t):
        return _arccos_shape_dt(self.order, t)

    def _spectrum(self, dim, L):
        sigma = _ARCCOS_UNIT[self.order].coefficients(dim, L)
        factor = {0: 2.0, 1: 2.0 * dim, 2: 2.0 * dim * (dim + 2) / 3.0}[self.order]
        return factor * sigma**2


def _compose_arccos(order: int, depth: int, t: np.ndarray) -> np.ndarray:
    out = np.clip(t, -1.0, 1.0)
    for _ in range(depth):
        out = np.clip(_arccos_shape(order, out), -1.0, 1.0)
    return out


def _ntk(depth: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ReLU NTK of ``depth`` hidden layers (Jacot et al. 2018; Bietti & Mairal 2019), normalised
    to 1 at t = 1, and its t-derivative."""
    sigma = np.clip(t, -1.0, 1.0)
    d_sigma = np.ones_like(sigma)
    theta = sigma.copy()
    d_theta = np.ones_like(sigma)
    for _ in range(depth):
        k0 = _arccos_shape(0, sigma)
        k0_dt = np.where(sigma >= 1.0, 0.0, _arccos_shape_dt(0, np.minimum(sigma, 1 - 1e-300)))
        new_sigma = np.clip(_arccos_shape(1, sigma), -1.0, 1.0)
        new_d_sigma = _arccos_shape_dt(1, sigma) * d_sigma  # kappa_1' = kappa_0
        d_theta = d_theta * k0 + theta * k0_dt * d_sigma + new_d_sigma
        theta = theta * k0 + new_sigma
        sigma, d_sigma = new_sigma, new_d_sigma
    return theta / (depth + 1.0), d_theta / (depth + 1.0)


class _QuadratureSpectrum(ZonalKernel):
    """Kernels whose spectrum is the Funk–Hecke quadrature of their shape."""

    parity: str | None = None

    def _spectrum(self, dim, L):
        return _quadrature_spectrum(self, dim, L)[0]

    def _spectrum_grads(self, dim, L):
        rule = _quadrature_spectrum(self, dim, L)[1]
        return {k: apply_parity(rule.apply(v), self.parity) for k, v in self._shape_grads(rule.nodes).items()}

    def __eq__(self, other):
        return isinstance(other, ZonalKernel) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


@lru_cache(maxsize=256)
def _quadrature_spectrum(kernel: _QuadratureSpectrum, dim: int, L: int):
    coeffs, _, rule = funk_hecke_with_rule(kernel._shape, dim, L, parity=kernel.parity)
    coeffs.setflags(write=False)
    return coeffs, rule


class DeepArcCosine(_QuadratureSpectrum):
    r"""Arc-cosine kernel composed ``depth`` times, :math:`\kappa^{(D)} = \kappa_p \circ \dots
    \circ \kappa_p` (the NNGP kernel of a depth-D ReLU network for p = 1; seed 004 eq. 3).
    ``depth = 1`` is :class:`ArcCosine`."""

    parity = None
    structure = ("depth", "order")

    def __init__(self, depth: int = 2, order: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.depth = check_int(depth, "depth", minimum=1)
        order = check_int(order, "order")
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order}")
        self.order = order
        super().__init__(variance, bias, input_scale)

    def _key(self):
        return ("DeepArcCosine", self.depth, self.order)

    def _shape(self, t):
        return _compose_arccos(self.order, self.depth, t)

    def _shape_dt(self, t):
        inner = np.clip(t, -1.0, 1.0)
        deriv = np.ones_like(inner)
        for _ in range(self.depth):
            deriv = deriv * _arccos_shape_dt(self.order, inner)
            inner = np.clip(_arccos_shape(self.order, inner), -1.0, 1.0)
        return deriv


class NTK(_QuadratureSpectrum):
    r"""Neural tangent kernel of a fully-connected ReLU network with ``depth`` hidden layers,
    normalised to :math:`\kappa(1) = ` ``variance``:
    :math:`\Sigma_0 = \Theta_0 = t`, :math:`\Sigma_h = \kappa_1(\Sigma_{h-1})`,
    :math:`\Theta_h = \Theta_{h-1}\kappa_0(\Sigma_{h-1}) + \Sigma_h`,
    :math:`\kappa = \Theta_D / (D + 1)` (Jacot et al. 2018; Bietti & Mairal 2019; seed 004 Fig. 1).
    """

    structure = ("depth",)

    def __init__(self, depth: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.depth = check_int(depth, "depth", minimum=1)
        super().__init__(variance, bias, input_scale)

    def _key(self):
        return ("NTK", self.depth)

    def _shape(self, t):
        return _ntk(self.depth, t)[0]

    def _shape_dt(self, t):
        return _ntk(self.depth, t)[1]


# --------------------------------------------------------------------------------------------
# Matern restricted to the sphere
# --------------------------------------------------------------------------------------------

_NUS = {0.5: "1/2", 1.5: "3/2", 2.5: "5/2", math.inf: "inf"}


def _check_nu(nu: Any) -> float:
    try:
        v = float(nu)
    except (TypeError, ValueError):
        raise ValueError(f"nu must be one of 1/2, 3/2, 5/2 or inf, got {nu!r}") from None
    if v not in _NUS:
        raise ValueError(f"nu must be one of 1/2, 3/2, 5/2 or inf, got {nu!r}")
    return v


class Matern(_QuadratureSpectrum):
    r"""Euclidean Matérn kernel restricted to the sphere: :math:`\kappa(t) = m_\nu(\rho/\ell)`
    at the chordal distance :math:`\rho = \sqrt{2 - 2t}`, with
    :math:`m_{1/2} = e^{-r}`, :math:`m_{3/2} = (1 + \sqrt3 r)e^{-\sqrt3 r}`,
    :math:`m_{5/2} = (1 + \sqrt5 r + \tfrac53 r^2)e^{-\sqrt5 r}`, :math:`m_\infty = e^{-r^2/2}`.
    Positive definite on every sphere (Schoenberg), so :math:`\lambda_\ell \ge 0`; the spectrum
    is the Funk–Hecke quadrature in the angle variable, where the shape is analytic.
    This is the stationary kernel of the spectra-mismatch analysis (seed 000 §4.3.3,
    seed 003 §3.4)."""

    shape_params = ("lengthscale",)
    structure = ("nu",)

    def __init__(self, nu: float = 1.5, lengthscale: float = 1.0, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.nu = _check_nu(nu)
        self.lengthscale = _positive(lengthscale, "lengthscale")
        super().__init__(variance, bias, input_scale)

    def _key(self):
        return ("Matern", self.nu, self.lengthscale)

    def _fused_code(self):
        return NU_CODES.get(self.nu) if _FUSED else None

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



# --------------------------------------------------------------------------------------------
# kernels defined by their spectrum
# --------------------------------------------------------------------------------------------


class _SpectralKernel(ZonalKernel):
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

    def _raw(self, ell: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Unnormalised log-eigenvalues and their parameter derivatives at levels ``ell``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _normalised(self, dim: int, L: int):
        return _spectral_cache(self, dim, L)

    def _spectrum(self, dim, L):
        return self._normalised(dim, L)[0]

    def _spectrum_grads(self, dim, L):
        return self._normalised(dim, L)[1]

    def _series(self):
        lam, grads, tail = _shape_series(self)
        return lam, grads, tail

    def _shape(self, t):
        lam, _, _ = self._series()
        return zonal_series(lam, self.dim, t)

    def _shape_dt(self, t):
        lam, _, _ = self._series()
        return zonal_series(lam, self.dim, t, derivative=True)[1]

    def _shape_grads(self, t):
        _, grads, _ = self._series()
        return {k: zonal_series(v, self.dim, t) for k, v in grads.items()}

    def at_one(self) -> float:
        return self.variance  # normalised: sum_l lambda_l N(l, d) = variance exactly

    def at_one_gradients(self) -> dict[str, float]:
        return {"variance": 1.0, **{p: 0.0 for p in self.shape_params}}

    def shape_truncation(self) -> tuple[int, float]:
        """(degree at which the shape's series is cut, relative mass left out)."""
        lam, _, tail = self._series()
        return lam.shape[0] - 1, tail

    def __eq__(self, other):
        return isinstance(other, ZonalKernel) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


_DIRECT_LEVELS = 2048  # summed term by term; beyond, Euler-Maclaurin on the smooth tail


def _log_counts(ell: np.ndarray, dim: int) -> np.ndarray:
    """log N(l, d) for real l >= 1 (continuous in l, for the tail integral); N(0, d) = 1.

    N(l, d) = (2l + d - 2)/l * prod_{j < d-2} (l + j) / (d - 2)!: the product form stays exact
    for huge l, where lgamma(l + d - 2) - lgamma(l) would cancel catastrophically."""
    from scipy.special import gammaln

    x = np.maximum(np.asarray(ell, dtype=np.float64), 1.0)
    out = np.log(2 * x + dim - 2.0) - np.log(x) - gammaln(dim - 1.0)
    for j in range(dim - 2):
        out = out + np.log(x + j)
    return np.where(ell == 0, 0.0, out)


@lru_cache(maxsize=16)
def _log_counts_cached(dim: int, upto: int) -> np.ndarray:
    out = _log_counts(np.arange(upto + 1, dtype=np.float64), dim)
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
def _spectral_cache(kernel: _SpectralKernel, dim: int, L: int):
    """Normalised spectrum (kappa(1) = 1) and its parameter derivatives at levels 0..L."""
    upto = max(L, _DIRECT_LEVELS)
    ell = np.arange(upto + 1, dtype=np.float64)
    log_raw, dlog = kernel._raw(ell)
    shift = log_raw.max()
    w = np.exp(log_raw - shift + _log_counts_cached(dim, upto))

    def term(x, name=None):
        lr, dl = kernel._raw(x)
        val = np.exp(lr - shift + _log_counts(x, dim))
        return val if name is None else val * dl[name]

    tail, p = 0.0, np.inf
    if w[-1] > 0:
        p = -np.log(w[-1] / w[-2]) / np.log(upto / (upto - 1.0))
        if p <= 1.0 + 1e-9:
            raise ValueError(
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
def _shape_series(kernel: _SpectralKernel):
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


class IntrinsicMatern(_SpectralKernel):
    r"""Matérn (or, for ``nu = inf``, the heat / squared-exponential) kernel of the
    Laplace–Beltrami operator on :math:`S^{d-1}`:

    .. math:: \lambda_\ell \propto \Big(\frac{2\nu}{\rho^2} + \ell(\ell + d - 2)\Big)^{-(\nu +
              \frac{d-1}{2})}, \qquad \lambda_\ell^{\infty} \propto
              e^{-\rho^2 \ell(\ell + d - 2)/2},

    normalised so that :math:`\kappa(1) = \sum_\ell \lambda_\ell N(\ell, d) = ` ``variance``
    (seed 001 eqs. 33–34 use an unnormalised variant). ``lengthscale`` is :math:`\rho`. The
    spectrum depends on the dimension, so the kernel is built for one ``dim``.
    """

    shape_params = ("lengthscale",)
    structure = ("dim", "nu")

    def __init__(self, dim: int, nu: float = 1.5, lengthscale: float = 1.0, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.dim = check_dim(dim)
        v = float(nu)
        if not (v > 0):
            raise ValueError(f"nu must be > 0 (or inf), got {nu!r}")
        self.nu = v
        self.lengthscale = _positive(lengthscale, "lengthscale")
        super().__init__(variance, bias, input_scale)

    def _key(self):
        return ("IntrinsicMatern", self.dim, self.nu, self.lengthscale)

    def _raw(self, ell):
        rho = self.lengthscale
        lap = ell * (ell + self.dim - 2.0)
        if math.isinf(self.nu):
            return -0.5 * rho**2 * lap, {"lengthscale": -rho * lap}
        a = 2.0 * self.nu / rho**2
        power = self.nu + (self.dim - 1) / 2.0
        log_raw = -power * np.log(a + lap)
        # d/drho of -power log(a + lap) = -power * (da/drho) / (a + lap), da/drho = -2a/rho
        return log_raw, {"lengthscale": power * 2.0 * a / rho / (a + lap)}


class PolynomialDecay(_SpectralKernel):
    r"""Continuous-depth kernel of seed 004 (eq. 15): :math:`\lambda_\ell \propto \ell^{-\beta}`.

    Convention at :math:`\ell = 0` (where :math:`\ell^{-\beta}` is infinite): the constant level
    gets the weight of level 1, :math:`\lambda_0 = \lambda_1`, i.e.
    :math:`\lambda_\ell \propto \max(\ell, 1)^{-\beta}`. Normalised so that
    :math:`\kappa(1) = ` ``variance``. The infinite series needs :math:`\beta > d - 1` (so that
    :math:`\sum \ell^{-\beta} N(\ell, d)` converges); smaller :math:`\beta` (a "deeper"
    kernel) is rejected with that explanation unless ``max_degree`` is given: then the kernel
    is the finite series :math:`\sum_{\ell \le L}` (the prior that features truncated at degree
    L represent anyway, seed 004 §5), valid for every :math:`\beta > 0`. The spectrum depends on
    ``dim``.
    """

    shape_params = ("beta",)
    structure = ("dim", "max_degree")

    def __init__(self, dim: int, beta: float = 4.0, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0,
                 max_degree: int | None = None):
        self.dim = check_dim(dim)
        self.max_degree = None if max_degree is None else check_degree(max_degree)
        self.beta = _positive(beta, "beta")
        if self.max_degree is None and self.beta <= self.dim - 1:
            raise ValueError(
                f"beta must exceed dim - 1 = {self.dim - 1} so that sum_l l^-beta N(l, d) "
                f"converges (kappa(1) finite), got beta = {self.beta}; or truncate the series "
                "with max_degree=L (any beta > 0)"
            )
        super().__init__(variance, bias, input_scale)

    def __setattr__(self, name, value):
        # re-assignment (e.g. by an optimiser); the constructor gives the longer message
        if name == "beta" and "beta" in self.__dict__ and self.max_degree is None:
            if value <= self.dim - 1:
                raise ValueError(f"beta must exceed dim - 1 = {self.dim - 1} (or use max_degree), got {value}")
        object.__setattr__(self, name, value)

    def _key(self):
        return ("PolynomialDecay", self.dim, self.beta, self.max_degree)

    def _raw(self, ell):
        log_l = np.log(np.maximum(ell, 1.0))
        return -self.beta * log_l, {"beta": -log_l}

    def _finite(self):
        # the normalised finite series sum_{l <= L}: levels 0..L and d/dbeta
        Lk = self.max_degree
        ell = np.arange(Lk + 1, dtype=np.float64)
        log_raw, dlog = self._raw(ell)
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


class _Wrapped(ZonalKernel):
    """A kernel built on ``base`` whose hyper-parameters are the base kernel's: reads and writes
    of ``variance``, ``bias``, ``input_scale`` and the shape parameters go to it (names in
    ``_own`` stay on the wrapper)."""

    _own: tuple[str, ...] = ("base",)

    @property
    def shape_params(self):  # type: ignore[override]
        return self.base.shape_params

    def __getattr__(self, name):
        if name in ("variance", "bias", "input_scale") or name in self.base.shape_params:
            return getattr(self.base, name)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in self._own:
            object.__setattr__(self, name, value)
        else:
            setattr(self.base, name, value)


class Truncated(_Wrapped):
    r"""The kernel :math:`\kappa_L(t) = \sum_{\ell \le L} \lambda_\ell Z_\ell(t)` of a base kernel
    truncated at degree L (``shared/design.md`` §2): a valid kernel in its own right, and exactly
    the prior that VISH with every harmonic up to degree L represents. Hyper-parameters are the
    base kernel's (reads and writes go to it)."""

    _own = ("base", "dim", "max_degree")

    def __init__(self, kernel: ZonalKernel, dim: int, max_degree: int) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        object.__setattr__(self, "base", kernel)
        object.__setattr__(self, "dim", check_dim(dim))
        object.__setattr__(self, "max_degree", check_degree(max_degree))


    @property
    def structure(self):  # type: ignore[override]
        return ("dim", "max_degree")


    def __copy__(self):
        import copy

        return Truncated(copy.copy(self.base), self.dim, self.max_degree)

    def _key(self):
        return ("Truncated", self.base._key(), self.dim, self.max_degree)

    def _levels(self):
        return self.base._spectrum(self.dim, self.max_degree)

    def _spectrum(self, dim, L):
        if dim != self.dim:
            raise ValueError(f"this Truncated kernel was built for dim={self.dim}, asked for dim={dim}")
        out = np.zeros(L + 1)
        k = min(L, self.max_degree)
        out[: k + 1] = self._levels()[: k + 1]
        return out

    def _spectrum_grads(self, dim, L):
        k = min(L, self.max_degree)
        out = {}
        for name, g in self.base._spectrum_grads(self.dim, self.max_degree).items():
            padded = np.zeros(L + 1)
            padded[: k + 1] = g[: k + 1]
            out[name] = padded
        return out

    def _shape(self, t):
        return zonal_series(self._levels(), self.dim, t)

    def at_one(self) -> float:
        counts = np.array([float(num_harmonics(e, self.dim)) for e in range(self.max_degree + 1)])
        return self.variance * float(self._levels() @ counts)

    def at_one_gradients(self) -> dict[str, float]:
        counts = np.array([float(num_harmonics(e, self.dim)) for e in range(self.max_degree + 1)])
        grads = {k: self.variance * float(g @ counts)
                 for k, g in self.base._spectrum_grads(self.dim, self.max_degree).items()}
        grads["variance"] = float(self._levels() @ counts)
        return grads

    def _shape_dt(self, t):
        return zonal_series(self._levels(), self.dim, t, derivative=True)[1]

    def _shape_grads(self, t):
        return {
            name: zonal_series(g, self.dim, t)
            for name, g in self.base._spectrum_grads(self.dim, self.max_degree).items()
        }


class Parity(_Wrapped):
    r"""The even or odd part of a zonal kernel under the antipodal map :math:`\hat x \mapsto -\hat x`
    of the sphere: :math:`\kappa_\pm(t) = \tfrac12(\kappa(t) \pm \kappa(-t))`, i.e. the degrees
    of one parity only (:math:`\lambda_\ell` kept for :math:`(-1)^\ell = \pm1`, zero otherwise,
    since :math:`C_\ell^\alpha(-t) = (-1)^\ell C_\ell^\alpha(t)`).

    The antipodal map is orthogonal, so every zonal kernel is invariant under it and
    :math:`k = k_+ + k_-` is its harmonic decomposition with T = 2 (seed 002 §3; the map acts on
    the lifted point :math:`\tilde x = [x/s, b]`, not on the data). Each part is a kernel in its
    own right (usable in every model); hyper-parameters are the base kernel's (reads and writes go
    to it), so gradients of both parts add up on the shared parameters.

    Parameters
    ----------
    kernel
        The base kernel.
    even
        ``True``: :math:`\kappa_+` (even degrees); ``False``: :math:`\kappa_-` (odd degrees).
    """

    _own = ("base", "even")

    def __init__(self, kernel: ZonalKernel, even: bool = True) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab kernel, got {kernel!r}")
        object.__setattr__(self, "base", kernel)
        object.__setattr__(self, "even", bool(even))



    @property
    def _sign(self) -> float:
        return 1.0 if self.even else -1.0

    def _key(self):
        return ("Parity", self.base._key(), self.even)

    def _shape(self, t):
        return 0.5 * (self.base._shape(t) + self._sign * self.base._shape(-t))

    def _shape_dt(self, t):
        # d/dt kappa(-t) = -kappa'(-t)
        return 0.5 * (self.base._shape_dt(t) - self._sign * self.base._shape_dt(-t))

    def _shape_grads(self, t):
        g1, g2 = self.base._shape_grads(t), self.base._shape_grads(-t)
        return {k: 0.5 * (g1[k] + self._sign * g2[k]) for k in g1}

    def _mask(self, v):
        out = np.array(v, dtype=np.float64, copy=True)
        out[..., (np.arange(out.shape[-1]) % 2 == 1) == self.even] = 0.0
        return out

    def _spectrum(self, dim, L):
        return self._mask(self.base._spectrum(dim, L))

    def _spectrum_grads(self, dim, L):
        return {k: self._mask(v) for k, v in self.base._spectrum_grads(dim, L).items()}

    def __repr__(self) -> str:
        return f"Parity({self.base!r}, even={self.even})"
