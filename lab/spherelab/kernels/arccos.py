r"""The arc-cosine family: arc-cosine kernels of order 0, 1, 2 (Cho & Saul 2009) with exact
spectra, their compositions (deep arc-cosine, Eleftheriadis et al. eq. 3) and the neural tangent kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._state import Hyper
from .._validation import check_int
from ..activations import ReLU, SquaredReLU, Step
from .base import ZonalKernel
from .quadrature import QuadratureSpectrum

__all__ = ["ArcCosine", "DeepArcCosine", "NTK"]


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



_ARCCOS_UNIT = {0: Step(), 1: ReLU(), 2: SquaredReLU()}


def _check_order(order: Any, name: str) -> int:
    order = check_int(order, name)
    if order not in (0, 1, 2):
        raise ValueError(f"{name} must be 0, 1 or 2, got {order}")
    return order


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
    spectrum is 0.375, 0.1667, 0.02344, 0, 0.000651 (Dutordoir, PhD report Table B.1).

    Parameters
    ----------
    order
        0 (step units), 1 (ReLU) or 2 (squared ReLU).
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> np.round(sl.kernels.ArcCosine(1).spectrum(3, 4), 4).tolist()   # Dutordoir, PhD report Table B.1
    [0.375, 0.1667, 0.0234, 0.0, 0.0007]
    """

    structure = ("order",)

    order = Hyper(lambda v, name: _check_order(v, name), "0, 1 or 2")

    def __init__(self, order: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.order = order
        super().__init__(variance, bias, input_scale)

    def cache_key(self) -> tuple:
        return ("ArcCosine", self.order)

    def unit_shape(self, t, ops):
        return _arccos_shape(self.order, t)

    def unit_shape_dt(self, t, ops):
        return _arccos_shape_dt(self.order, t)

    def unit_spectrum(self, dim, L):
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



class DeepArcCosine(QuadratureSpectrum):
    r"""Arc-cosine kernel composed ``depth`` times, :math:`\kappa^{(D)} = \kappa_p \circ \dots
    \circ \kappa_p` (the NNGP kernel of a depth-D ReLU network for p = 1; Eleftheriadis et al. eq. 3).
    ``depth = 1`` is :class:`ArcCosine`.

    Parameters
    ----------
    depth
        Number of compositions (layers), >= 1.
    order
        The arc-cosine order of every layer: 0, 1 or 2.
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.

    Examples
    --------
    >>> import spherelab as sl
    >>> k = sl.kernels.DeepArcCosine(depth=2)
    >>> round(k.at_one(), 12), k.spectrum(3, 3).round(4).tolist()
    (1.0, [0.5441, 0.1075, 0.0211, 0.0022])
    """

    parity = None
    structure = ("depth", "order")
    depth = Hyper(lambda v, name: check_int(v, name, minimum=1), "number of layers, >= 1")
    order = Hyper(lambda v, name: _check_order(v, name), "0, 1 or 2")

    def __init__(
        self, depth: int = 2, order: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0
    ):
        self.depth = depth
        self.order = order
        super().__init__(variance, bias, input_scale)

    def cache_key(self):
        return ("DeepArcCosine", self.depth, self.order)

    def unit_shape(self, t, ops):
        return _compose_arccos(self.order, self.depth, t)

    def unit_shape_dt(self, t, ops):
        inner = np.clip(t, -1.0, 1.0)
        deriv = np.ones_like(inner)
        for _ in range(self.depth):
            deriv = deriv * _arccos_shape_dt(self.order, inner)
            inner = np.clip(_arccos_shape(self.order, inner), -1.0, 1.0)
        return deriv


class NTK(QuadratureSpectrum):
    r"""Neural tangent kernel of a fully-connected ReLU network with ``depth`` hidden layers,
    normalised to :math:`\kappa(1) = ` ``variance``:
    :math:`\Sigma_0 = \Theta_0 = t`, :math:`\Sigma_h = \kappa_1(\Sigma_{h-1})`,
    :math:`\Theta_h = \Theta_{h-1}\kappa_0(\Sigma_{h-1}) + \Sigma_h`,
    :math:`\kappa = \Theta_D / (D + 1)` (Jacot et al. 2018; Bietti & Mairal 2019; Eleftheriadis et al. Fig. 1).

    Parameters
    ----------
    depth
        Number of hidden layers, >= 1 (one layer: odd levels >= 3 vanish exactly).
    variance
        :math:`\kappa(1)`, the prior variance at unit radius (> 0).
    bias
        b, the coordinate appended to every input by the lift :math:`\tilde x = [x / s, b]` (>= 0).
    input_scale
        s, a scalar or one positive value per input.

    Examples
    --------
    >>> import spherelab as sl
    >>> lam = sl.kernels.NTK(1).spectrum(5, 5)
    >>> bool(lam[3] == 0 and lam[5] == 0 and lam[4] > 0)
    True
    """

    structure = ("depth",)

    depth = Hyper(lambda v, name: check_int(v, name, minimum=1), "number of layers, >= 1")

    def __init__(self, depth: int = 1, variance: float = 1.0, bias: float = 1.0, input_scale: Any = 1.0):
        self.depth = depth
        super().__init__(variance, bias, input_scale)

    def cache_key(self):
        return ("NTK", self.depth)

    @property
    def parity(self):
        # one layer: kappa_1(t) + t kappa_0(t) is even plus linear (kappa_0 is a constant plus an odd
        # function), so its odd levels >= 3 vanish exactly; composing layers breaks the symmetry
        return "even_plus_linear" if self.depth == 1 else None

    def unit_shape(self, t, ops):
        return _ntk(self.depth, t)[0]

    def unit_shape_dt(self, t, ops):
        return _ntk(self.depth, t)[1]

