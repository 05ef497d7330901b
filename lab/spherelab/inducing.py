r"""Inducing features and the covariances they need.

Spherical-harmonic features (VISH, seed 001 §3; ``shared/design.md`` §3):

.. math:: [k_u(x)]_m = \mathrm{Cov}(u_m, f(x)) = r\,\phi_m(\hat x), \qquad
          K_{uu} = \mathrm{diag}(1/\lambda_{\ell(m)}).

With a diagonal :math:`K_{uu}` the Gaussian-likelihood bound depends on the data only through
:math:`G = \Phi^\top\Phi`, :math:`c = \Phi^\top y`, :math:`y^\top y` and :math:`\sum r^2`
(:math:`\Phi_{nm} = r_n\phi_m(\hat x_n)`): :func:`harmonic_statistics` accumulates them in one
pass over chunks of rows, so memory never grows with N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import check_finite_array
from .harmonics import SphericalHarmonics
from .kernels import ZonalKernel

__all__ = ["SphericalHarmonicFeatures", "HarmonicStatistics", "harmonic_statistics"]


class SphericalHarmonicFeatures:
    """All spherical harmonics of degree 0..``max_degree`` on :math:`S^{d-1}` as inducing
    features; ``dim`` = number of inputs + 1 (the bias coordinate)."""

    def __init__(self, dim: int, max_degree: int) -> None:
        self.harmonics = SphericalHarmonics(dim, max_degree)
        self.dim = self.harmonics.dim
        self.max_degree = self.harmonics.max_degree

    @property
    def num_features(self) -> int:
        return self.harmonics.num_features

    @property
    def degrees(self) -> np.ndarray:
        return self.harmonics.degrees

    def Kuu_inverse_diag(self, kernel: ZonalKernel) -> np.ndarray:
        r""":math:`K_{uu}^{-1}` diagonal, i.e. :math:`\lambda_{\ell(m)}` per feature, ``(M,)``."""
        return kernel.spectrum(self.dim, self.max_degree)[self.degrees]

    def Kuf(self, kernel: ZonalKernel, X: Any) -> np.ndarray:
        r""":math:`K_{fu} = \Phi`, ``(N, M)`` with :math:`\Phi_{nm} = r_n \phi_m(\hat x_n)`; for
        small N only (use :func:`harmonic_statistics` for large N)."""
        r, Xh = kernel.lift(X)
        if Xh.shape[1] != self.dim:
            raise ValueError(
                f"X has {Xh.shape[1] - 1} columns but the features live on S^{self.dim - 1} "
                f"(expected {self.dim - 1} inputs)"
            )
        return self.harmonics(Xh) * r[:, None]

    #: nothing to train: the harmonics are fixed
    trainable = False

    def lift_vjp(self, Xh: np.ndarray, Phi_hat: np.ndarray, W: np.ndarray) -> np.ndarray:
        r""":math:`\sum_m W_{nm}\nabla_{\tilde x}\psi_m` for :math:`\psi_m(\tilde x) = r\phi_m(\tilde x/r)`
        at the unit points ``Xh``: with the solid harmonic :math:`H_m = r^{\ell}\phi_m`,
        :math:`\nabla\psi_m = \nabla H_m(\hat x) + (1 - \ell_m)\phi_m(\hat x)\hat x`."""
        grad = self.harmonics.solid_vjp(Xh, W)
        grad += Xh * ((W * Phi_hat) @ (1.0 - self.degrees))[:, None]
        return grad

    def __repr__(self) -> str:
        return f"SphericalHarmonicFeatures(dim={self.dim}, max_degree={self.max_degree}, M={self.num_features})"


@dataclass
class HarmonicStatistics:
    """Sufficient statistics of the collapsed bound: ``G = Phi^T Phi`` (M, M), ``c = Phi^T y``
    (M,), ``yy = y^T y``, ``sum_r2 = sum_n r_n^2``, ``n`` rows."""

    G: np.ndarray
    c: np.ndarray
    yy: float
    sum_r2: float
    n: int


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield start, min(start + size, n)


def harmonic_statistics(
    kernel: ZonalKernel,
    features: Any,
    X: Any,
    y: Any,
    *,
    chunk_size: int = 16384,
    progress: bool | None = None,
) -> HarmonicStatistics:
    """One streaming pass over (X, y): ``G``, ``c``, ``y^T y``, ``sum r^2``.

    Memory is O(chunk_size * M + M^2) whatever N. ``progress`` shows a tqdm bar (default: when
    N > 10^6).
    """
    X = check_finite_array(X, "X", ndim=2)
    y = check_finite_array(y, "y").reshape(-1)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} values")
    if X.shape[0] == 0:
        raise ValueError("X and y are empty: need at least one observation")
    if X.shape[1] + 1 != features.dim:
        raise ValueError(
            f"X has {X.shape[1]} columns; features on S^{features.dim - 1} need {features.dim - 1}"
        )
    M = features.num_features
    G = np.zeros((M, M))
    tmp = np.empty((M, M))
    c = np.zeros(M)
    sum_r2 = 0.0
    n = X.shape[0]
    if progress is None:
        progress = n > 1_000_000
    pieces = list(_chunks(n, int(chunk_size)))
    if progress:
        from tqdm.auto import tqdm

        pieces = tqdm(pieces, desc="harmonic statistics", unit="chunk")
    buf = None
    for start, stop in pieces:
        r, Xh = kernel.lift(X[start:stop])
        if buf is None or buf.shape[0] != stop - start:
            buf = np.empty((stop - start, M))
        Phi = features.harmonics(Xh, out=buf)
        Phi *= r[:, None]
        # G += Phi^T Phi by NumPy's dgemm: measured 4x faster here than SciPy's dsyrk (a
        # different OpenBLAS build), despite computing both triangles
        np.matmul(Phi.T, Phi, out=tmp)
        G += tmp
        c += Phi.T @ y[start:stop]
        sum_r2 += float(r @ r)
    G = 0.5 * (G + G.T)  # exactly symmetric
    return HarmonicStatistics(G, c, float(y @ y), sum_r2, n)
