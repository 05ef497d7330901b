r"""Inducing features in data space for the (orthogonally-decoupled) SVGP models: activated units
(seed 003 §3.2.2) and inducing points, each with :math:`K_{uu}`, :math:`K_{uf}` and the chain rule
from :math:`\partial L/\partial K_{uu}`, :math:`\partial L/\partial K_{uf}` (GPy's contract) to the
feature parameters, the kernel hyper-parameters and the inputs.

Both features, and every kernel, are *pairs of homogeneous zonal functions*
:math:`F(a, b) = \|a\|\,\|b\|\,s(\hat a^\top \hat b)`:

=====================  =====================  ===================================================
covariance             (a, b)                 shape s
=====================  =====================  ===================================================
:math:`k(x, x')`       :math:`(\tilde x, \tilde x')`  :math:`\kappa`
activated :math:`K_{uf}`  :math:`(w_m, \tilde x)`  :math:`g_L(t) = \sum_{\ell\le L,\lambda_\ell\ne0}\sigma_\ell Z_\ell(t)`
activated :math:`K_{uu}`  :math:`(w_m, w_{m'})`  :math:`q_L(t) = \sum_{\ell\le L,\lambda_\ell\ne0}\sigma_\ell^2/\lambda_\ell\, Z_\ell(t)`
=====================  =====================  ===================================================

(``shared/design.md`` §3), with :math:`\tilde x = [x / s, b]` the lifted input. The same truncation
L and the same dropped levels enter :math:`K_{uu}` and :math:`K_{uf}`, so the joint prior of (u, f)
is the covariance of a valid finite-rank model and stays positive semi-definite.

References: Sun, Shi & Grosse (2021); Dutordoir, Hensman, van der Wilk et al. (2021); seed 003.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import check_finite_array, check_int
from .activations import Activation
from .gegenbauer import zonal_series, zonal_table
from .kernels import ZonalKernel

__all__ = ["ActivatedFeatures", "InducingPoints", "HarmonicFeatures", "zonal_pair", "zonal_pair_gradients",
           "lift_gradients"]


def _norms(A: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    r = np.sqrt(np.einsum("ij,ij->i", A, A))
    if np.any(r == 0):
        raise ValueError(f"{name} has a zero row (row {int(np.flatnonzero(r == 0)[0])}); its direction is undefined")
    return r, A / r[:, None]


def zonal_pair(A: np.ndarray, B: np.ndarray, shape) -> np.ndarray:
    r""":math:`F_{pq} = \|a_p\|\|b_q\|\,s(\hat a_p^\top \hat b_q)`, ``(P, Q)``; ``shape(t)`` is
    evaluated elementwise."""
    ra, Ah = _norms(A, "A")
    rb, Bh = _norms(B, "B")
    T = np.clip(Ah @ Bh.T, -1.0, 1.0)
    return ra[:, None] * rb[None, :] * shape(T)


def zonal_pair_gradients(G: np.ndarray, A: np.ndarray, B: np.ndarray, shape_and_dt) -> tuple[np.ndarray, np.ndarray]:
    r"""Chain :math:`G = \partial L/\partial F` into ``A`` and ``B`` for :func:`zonal_pair`:

    .. math:: \frac{\partial F_{pq}}{\partial a_p} = \|b_q\|\big[s(t)\,\hat a_p
              + s'(t)\,(\hat b_q - t\,\hat a_p)\big]

    and symmetrically for :math:`b_q`. Entries with :math:`t = \pm1` exactly get no
    :math:`s'` term (its factor vanishes there, and :math:`s'` may be infinite).

    ``shape_and_dt(t)`` returns :math:`(s(t), s'(t))` elementwise (one pass of a series
    evaluation); values at :math:`t = \pm1` are used for :math:`s` only.

    Returns
    -------
    dA ``(P, d)``, dB ``(Q, d)``
    """
    ra, Ah = _norms(A, "A")
    rb, Bh = _norms(B, "B")
    T = np.clip(Ah @ Bh.T, -1.0, 1.0)
    edge = np.abs(T) == 1.0
    s, ds = shape_and_dt(T)
    ds = np.where(edge, 0.0, ds)
    H1 = G * s
    H2 = G * ds
    C = H1 - T * H2
    dA = Ah * (C * rb[None, :]).sum(1)[:, None] + (H2 * rb[None, :]) @ Bh
    dB = Bh * (C * ra[:, None]).sum(0)[:, None] + (H2 * ra[:, None]).T @ Ah
    return dA, dB


def lift_gradients(kernel: ZonalKernel, X: np.ndarray, dXt: np.ndarray) -> dict[str, Any]:
    r"""Chain :math:`\partial L/\partial\tilde x` (``(N, D + 1)``) through
    :math:`\tilde x = [x / s, b]` into ``X``, ``bias`` and ``input_scale``
    (:meth:`~spherelab.kernels.ZonalKernel.lift_backward`)."""
    return kernel.lift_backward(X, dXt)


def _lifted(kernel: ZonalKernel, X: Any, name: str = "X") -> np.ndarray:
    X = check_finite_array(X, name, ndim=2)
    r, Xh = kernel.lift(X, name)
    return Xh * r[:, None]


def kernel_input_gradients(kernel: ZonalKernel, G: np.ndarray, X: np.ndarray, X2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\partial L/\partial X` and :math:`\partial L/\partial X_2` for
    :math:`k(X, X_2)` given ``G`` (lift parameters are in ``kernel.gradients``; use
    :meth:`~spherelab.kernels.ZonalKernel.gradients_with_inputs` to get both from one pass)."""
    _, dX, dX2 = kernel.gradients_with_inputs(G, X, X2)
    return dX, dX2


class ActivatedFeatures:
    r"""Activated inducing features: unit m is the homogeneous activation
    :math:`H_m(\tilde x) = \|w_m\|\,r\,\sigma(\hat w_m^\top \hat x)` (seed 003 eq. 3.5), with
    its harmonic expansion truncated at level ``truncation`` (L) and the levels where the kernel's
    :math:`\lambda_\ell = 0` dropped, in both covariances:

    .. math:: [K_{uf}]_{mn} = \|w_m\|\,r_n \sum_{\ell\le L,\lambda_\ell\neq0}\sigma_\ell Z_\ell(\hat w_m^\top\hat x_n),
              \qquad
              [K_{uu}]_{mm'} = \|w_m\|\|w_{m'}\|\sum_{\ell\le L,\lambda_\ell\neq0}\frac{\sigma_\ell^2}{\lambda_\ell}
              Z_\ell(\hat w_m^\top\hat w_{m'})

    (seed 003 eq. 3.6, ``shared/design.md`` §3).

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
    """

    def __init__(self, activation: Activation, num_units: int, truncation: int, weights: Any = None) -> None:
        if not isinstance(activation, Activation):
            raise TypeError(f"activation must be a spherelab Activation, got {activation!r}")
        self.activation = activation
        self.num_units = check_int(num_units, "num_units", minimum=1)
        self.truncation = check_int(truncation, "truncation", minimum=0)
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

    def _series(self, coeffs: np.ndarray, dim: int):
        return lambda t: zonal_series(coeffs, dim, t)

    def _both(self, coeffs: np.ndarray, dim: int):
        # value and t-derivative of a finite series from one Clenshaw pass (finite at t = +-1)
        return lambda t: zonal_series(coeffs, dim, t, derivative=True)

    def Kuu(self, kernel: ZonalKernel) -> np.ndarray:
        """``(M, M)``."""
        dim = self.weights.shape[1]
        q = self._coefficients(kernel, dim)[4]
        K = zonal_pair(self.weights, self.weights, self._series(q, dim))
        return 0.5 * (K + K.T)

    def Kuf(self, kernel: ZonalKernel, X: Any) -> np.ndarray:
        """``(M, N)``."""
        dim = self.weights.shape[1]
        g = self._coefficients(kernel, dim)[3]
        return zonal_pair(self.weights, _lifted(kernel, X), self._series(g, dim))

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uu}` into ``weights`` and the kernel's spectral
        hyper-parameters (through :math:`\partial q/\partial\lambda_\ell = -\sigma_\ell^2/\lambda_\ell^2`)."""
        W = self.weights
        dim = W.shape[1]
        L = self.truncation
        lam, sig, keep, _, q = self._coefficients(kernel, dim)
        dA, dB = zonal_pair_gradients(G, W, W, self._both(q, dim))
        out: dict[str, Any] = {"weights": dA + dB}
        r, Wh = _norms(W, "weights")
        T = np.clip(Wh @ Wh.T, -1.0, 1.0)
        Z = zonal_table(L, dim, T)  # (M, M, L + 1)
        dF_dq = np.einsum("ij,ijl->l", G * (r[:, None] * r[None, :]), Z)
        dq_dlam = np.where(keep, -sig * sig / np.where(keep, lam, 1.0) ** 2, 0.0)
        dlam = dF_dq * dq_dlam
        for name, v in kernel.spectrum_gradients(dim, L).items():
            out[name] = float(dlam @ v)
        return out

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uf}` (``(M, N)``) into ``weights``, the inputs
        ``X`` and the lift (``bias``, ``input_scale``)."""
        dim = self.weights.shape[1]
        g = self._coefficients(kernel, dim)[3]
        X = check_finite_array(X, "X", ndim=2)
        dA, dB = zonal_pair_gradients(G, self.weights, _lifted(kernel, X), self._both(g, dim))
        out = lift_gradients(kernel, X, dB)
        out["weights"] = dA
        return out

    def get_params(self) -> np.ndarray:
        return self.weights.ravel().copy()

    def set_params(self, values: np.ndarray) -> None:
        self.weights = np.asarray(values, dtype=np.float64).reshape(self.weights.shape).copy()

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        return np.asarray(grads.get("weights", np.zeros_like(self.weights))).ravel()

    def __repr__(self) -> str:
        return f"ActivatedFeatures({self.activation!r}, num_units={self.num_units}, truncation={self.truncation})"


class InducingPoints:
    r"""Inducing points :math:`u_m = f(z_m)` in data space: :math:`K_{uu} = k(Z, Z)`,
    :math:`K_{uf} = k(Z, X)`.

    Parameters
    ----------
    Z
        ``(M, D)`` initial locations (trainable).
    """

    def __init__(self, Z: Any) -> None:
        self.Z = check_finite_array(Z, "Z", ndim=2).copy()
        self.num_units = self.Z.shape[0]

    @property
    def num_features(self) -> int:
        return self.Z.shape[0]

    def initialise(self, dim: int, rng: np.random.Generator) -> None:
        if self.Z.shape[1] + 1 != dim:
            raise ValueError(f"Z has {self.Z.shape[1]} columns but the data have {dim - 1}")

    def Kuu(self, kernel: ZonalKernel) -> np.ndarray:
        return kernel.K(self.Z)

    def Kuf(self, kernel: ZonalKernel, X: Any) -> np.ndarray:
        return kernel.K(self.Z, X)

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray) -> dict[str, Any]:
        out, dZ, _ = kernel.gradients_with_inputs(0.5 * (G + G.T), self.Z)
        out["Z"] = dZ
        return out

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any) -> dict[str, Any]:
        X = check_finite_array(X, "X", ndim=2)
        out, dZ, dX = kernel.gradients_with_inputs(G, self.Z, X)
        out["Z"] = dZ
        out["X"] = dX
        return out

    def get_params(self) -> np.ndarray:
        return self.Z.ravel().copy()

    def set_params(self, values: np.ndarray) -> None:
        self.Z = np.asarray(values, dtype=np.float64).reshape(self.Z.shape).copy()

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        return np.asarray(grads.get("Z", np.zeros_like(self.Z))).ravel()

    def __repr__(self) -> str:
        return f"InducingPoints(M={self.Z.shape[0]}, D={self.Z.shape[1]})"


class HarmonicFeatures:
    r"""Spherical-harmonic inducing features (VISH, seed 001 §3) for the SVGP machinery of
    :class:`~spherelab.OrthogonalSVGP`: :math:`u_m = \langle f, \phi_m\rangle_{\mathcal H}`,

    .. math:: K_{uu} = \mathrm{diag}(1/\lambda_{\ell(m)}), \qquad [K_{uf}]_{mn} = r_n\,\phi_m(\hat x_n),

    for every harmonic of degree :math:`\ell \le L` whose level carries prior mass
    (:math:`\lambda_\ell > 0`; structural zeros such as the odd levels of the arc-cosine
    kernels are dropped, fixed when the model binds the kernel). Used with orthogonal inducing
    points this is VISH with the orthogonally-decoupled posterior of seed 003: the harmonics
    carry the smooth part and the K points the rest.

    Nothing to train in the features themselves; the kernel's spectral hyper-parameters reach
    :math:`K_{uu}` through :meth:`~spherelab.kernels.ZonalKernel.spectrum_gradients`, and the lift
    (``bias``, ``input_scale``) and the inputs reach :math:`K_{uf}` through the solid harmonics.

    Parameters
    ----------
    max_degree
        L.
    """

    def __init__(self, max_degree: int) -> None:
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        self.harmonics = None
        self._keep = None

    def initialise(self, dim: int, rng: np.random.Generator) -> None:
        """Build the harmonics on :math:`S^{d-1}` (d = inputs + 1)."""
        from .inducing import SphericalHarmonicFeatures

        if self.harmonics is None or self.harmonics.dim != dim:
            self.harmonics = SphericalHarmonicFeatures(dim, self.max_degree)
            self._keep = None

    def bind(self, kernel: ZonalKernel) -> None:
        r"""Fix the kept harmonics: those of the levels with :math:`\lambda_\ell > 0`."""
        lam = kernel.spectrum(self.harmonics.dim, self.max_degree)
        self._keep = np.flatnonzero(lam[self.harmonics.degrees] > 0)
        if self._keep.size == 0:
            raise ValueError("the kernel has no prior mass on any degree <= max_degree")

    def _ready(self) -> None:
        if self.harmonics is None or self._keep is None:
            raise RuntimeError("HarmonicFeatures are set up by the model (initialise, then bind the kernel)")

    @property
    def num_features(self) -> int:
        self._ready()
        return int(self._keep.size)

    @property
    def degrees(self) -> np.ndarray:
        """Degree of each kept feature, ``(M,)``."""
        self._ready()
        return self.harmonics.degrees[self._keep]

    def Kuu(self, kernel: ZonalKernel) -> np.ndarray:
        """``(M, M)`` diagonal."""
        lam = kernel.spectrum(self.harmonics.dim, self.max_degree)[self.degrees]
        return np.diag(1.0 / lam)

    def _unit_features(self, kernel: ZonalKernel, X: Any):
        X = check_finite_array(X, "X", ndim=2)
        r, Xh = kernel.lift(X)
        if Xh.shape[1] != self.harmonics.dim:
            raise ValueError(f"X has {X.shape[1]} columns; these features need {self.harmonics.dim - 1}")
        return X, r, Xh, self.harmonics.harmonics(Xh)

    def Kuf(self, kernel: ZonalKernel, X: Any) -> np.ndarray:
        """``(M, N)``."""
        self._ready()
        _, r, _, Phi = self._unit_features(kernel, X)
        return (Phi[:, self._keep] * r[:, None]).T

    def Kuu_gradients(self, kernel: ZonalKernel, G: np.ndarray) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uu}` into the spectral hyper-parameters:
        :math:`\partial L/\partial\lambda_\ell = -\sum_{m:\ell(m)=\ell} G_{mm}/\lambda_\ell^2`."""
        dim, L = self.harmonics.dim, self.max_degree
        deg = self.degrees
        lam = kernel.spectrum(dim, L)
        dlam = np.bincount(deg, weights=-np.diag(G) / lam[deg] ** 2, minlength=L + 1)
        return {name: float(dlam @ v) for name, v in kernel.spectrum_gradients(dim, L).items()}

    def Kuf_gradients(self, kernel: ZonalKernel, G: np.ndarray, X: Any) -> dict[str, Any]:
        r"""Chain :math:`\partial L/\partial K_{uf}` (``(M, N)``) into the inputs ``X`` and the lift
        (``bias``, ``input_scale``): :math:`r\phi_m(\tilde x/r)` is homogeneous of degree one in
        the lifted point, differentiated through the solid harmonics
        (:meth:`~spherelab.inducing.SphericalHarmonicFeatures.lift_vjp`)."""
        self._ready()
        X, r, Xh, Phi = self._unit_features(kernel, X)
        W = np.zeros_like(Phi)
        W[:, self._keep] = np.asarray(G).T
        dXt = self.harmonics.lift_vjp(Xh, Phi, W)
        return lift_gradients(kernel, X, dXt)

    def get_params(self) -> np.ndarray:
        return np.zeros(0)

    def set_params(self, values: np.ndarray) -> None:
        if np.size(values):
            raise ValueError("HarmonicFeatures have no parameters")

    def param_gradient(self, grads: dict[str, Any]) -> np.ndarray:
        return np.zeros(0)

    def __repr__(self) -> str:
        return f"HarmonicFeatures(max_degree={self.max_degree})"
