r"""Inducing features in data space for the (orthogonally-decoupled) SVGP models: activated units
(Tiao, thesis §3.2.2) and inducing points, each with :math:`K_{uu}`, :math:`K_{uf}` and the chain rule
from :math:`\partial L/\partial K_{uu}`, :math:`\partial L/\partial K_{uf}` (GPy's contract) to the
feature parameters, the kernel hyper-parameters and the inputs.

Both features, and every kernel, are *pairs of homogeneous zonal functions*
:math:`F(a, b) = \|a\|\,\|b\|\,s(\hat a^\top \hat b)`:

* :math:`k(x, x')`: :math:`(a, b) = (\tilde x, \tilde x')`, :math:`s = \kappa`;
* activated :math:`K_{uf}`: :math:`(a, b) = (w_m, \tilde x)`,
  :math:`s = g_L(t) = \sum_{\ell\le L,\lambda_\ell\ne0}\sigma_\ell Z_\ell(t)`;
* activated :math:`K_{uu}`: :math:`(a, b) = (w_m, w_{m'})`,
  :math:`s = q_L(t) = \sum_{\ell\le L,\lambda_\ell\ne0}\sigma_\ell^2/\lambda_\ell\, Z_\ell(t)`

(``docs/design.md`` §4), with :math:`\tilde x = [x / s, b]` the lifted input. The same truncation
L and the same dropped levels enter :math:`K_{uu}` and :math:`K_{uf}`, so the joint prior of (u, f)
is the covariance of a valid finite-rank model and stays positive semi-definite.

References: Sun, Shi & Grosse (2021); Dutordoir, Hensman, van der Wilk et al. (2021); Tiao, thesis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_finite_array
from ..kernels import ZonalKernel

__all__ = ["norms_and_directions", "zonal_pair", "zonal_pair_gradients", "lifted_points"]


def norms_and_directions(A: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Row norms ``(N,)`` and unit rows ``(N, d)`` of ``A``; a zero row is refused by ``name``."""
    r = np.sqrt(np.einsum("ij,ij->i", A, A))
    if np.any(r == 0):
        raise ValueError(f"{name} has a zero row (row {int(np.flatnonzero(r == 0)[0])}); its direction is undefined")
    return r, A / r[:, None]


def zonal_pair(A: np.ndarray, B: np.ndarray, shape) -> np.ndarray:
    r""":math:`F_{pq} = \|a_p\|\|b_q\|\,s(\hat a_p^\top \hat b_q)`, ``(P, Q)``; ``shape(t)`` is
    evaluated elementwise."""
    ra, Ah = norms_and_directions(A, "A")
    rb, Bh = norms_and_directions(B, "B")
    T = np.clip(Ah @ Bh.T, -1.0, 1.0)
    F = _own(shape(T), T.shape)
    F *= ra[:, None]
    F *= rb[None, :]
    return F


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
    ra, Ah = norms_and_directions(A, "A")
    rb, Bh = norms_and_directions(B, "B")
    T = np.clip(Ah @ Bh.T, -1.0, 1.0)
    s, ds = (_own(a, T.shape) for a in shape_and_dt(T))
    ds[np.abs(T) == 1.0] = 0.0
    # in place, and the norms moved onto the thin factors (matrix-vector products, no (P, Q)
    # temporaries beyond three): C = G s - t G s', H2 = G s'
    H2 = np.multiply(G, ds, out=ds)
    C = np.multiply(G, s, out=s)
    T *= H2
    C -= T
    dA = Ah * (C @ rb)[:, None] + H2 @ (rb[:, None] * Bh)
    dB = Bh * (ra @ C)[:, None] + H2.T @ (ra[:, None] * Ah)
    return dA, dB


def _own(a, shape) -> np.ndarray:
    """``a`` as a writable float array of ``shape`` (a copy only where it is not one already)."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape != shape or not a.flags.writeable:
        a = np.array(np.broadcast_to(a, shape))
    return a


def lifted_points(kernel: ZonalKernel, X: Any, name: str = "X") -> np.ndarray:
    r"""The lifted inputs :math:`\tilde x = [x / s, b]` of ``X`` (``(N, D)`` to ``(N, D + 1)``)."""
    X = check_finite_array(X, name, ndim=2)
    r, Xh = kernel.lift(X, name)
    return Xh * r[:, None]
