r"""Points and integration rules on :math:`S^{d-1}` (normalised surface measure).

* :func:`sample_sphere` — i.i.d. uniform points (Monte Carlo).
* :func:`product_quadrature` — a rule that integrates every polynomial of degree at most ``degree``
  *exactly*, in any dimension: equispaced nodes on the circle of the first two coordinates times
  Gauss–Gegenbauer nodes in each further coordinate (weight :math:`(1-t^2)^{(k-3)/2}`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import roots_gegenbauer

from ._validation import check_degree, check_dim, check_int

__all__ = ["sample_sphere", "product_quadrature"]


def sample_sphere(num_points: int, dim: int, rng: Any = None) -> np.ndarray:
    """``(num_points, dim)`` i.i.d. points uniform on :math:`S^{dim-1}` (normalised Gaussians).

    Parameters
    ----------
    num_points
        N >= 0.
    dim
        d >= 2.
    rng
        ``numpy.random.Generator``, a seed, or ``None``.
    """
    num_points = check_int(num_points, "num_points", minimum=0)
    dim = check_dim(dim)
    gen = np.random.default_rng(rng)
    x = gen.standard_normal((num_points, dim))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    while np.any(norms == 0):  # probability zero, but never return a NaN row
        bad = norms[:, 0] == 0
        x[bad] = gen.standard_normal((int(bad.sum()), dim))
        norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / norms


def product_quadrature(dim: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact quadrature on :math:`S^{d-1}` for polynomials of total degree <= ``degree``.

    Nodes are :math:`x = (\sqrt{1-t_d^2}\,\xi, t_d)` recursively, with Gauss–Gegenbauer nodes
    :math:`t_k` for the weight :math:`(1-t^2)^{(k-3)/2}` (``ceil((degree+1)/2)`` nodes, exact to
    degree ``degree``) and ``degree + 1`` equispaced angles on the circle. Odd powers of
    :math:`\sqrt{1-t^2}` integrate to zero exactly in the inner rule, so the product rule is exact.

    Returns
    -------
    points : numpy.ndarray
        ``(Q, dim)`` unit vectors, ``Q = (degree + 1) * ceil((degree + 1)/2)^(dim - 2)``.
    weights : numpy.ndarray
        ``(Q,)`` positive weights summing to 1 (normalised measure).
    """
    dim = check_dim(dim)
    degree = check_degree(degree, "degree")
    n_circle = degree + 1
    n_gauss = max(1, math.ceil((degree + 1) / 2))
    size = n_circle * n_gauss ** (dim - 2)
    if size > 50_000_000:
        raise ValueError(
            f"product_quadrature(dim={dim}, degree={degree}) needs {size:,} nodes; "
            "use Monte Carlo (sample_sphere) in this dimension"
        )
    theta = 2.0 * np.pi * np.arange(n_circle) / n_circle
    points = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    weights = np.full(n_circle, 1.0 / n_circle)
    for k in range(3, dim + 1):
        t, w = roots_gegenbauer(n_gauss, (k - 2) / 2.0)
        w = w / w.sum()
        s = np.sqrt(np.clip(1.0 - t * t, 0.0, None))
        inner = points[None, :, :] * s[:, None, None]
        last = np.broadcast_to(t[:, None, None], (t.size, points.shape[0], 1))
        points = np.concatenate([inner, last], axis=2).reshape(-1, k)
        weights = (w[:, None] * weights[None, :]).reshape(-1)
    return points, weights
