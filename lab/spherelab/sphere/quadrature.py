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

from .._validation import check_degree, check_dim, check_finite_array, check_int, check_seed, check_size

__all__ = ["sample_sphere", "product_quadrature", "lonlat_grid", "orthographic_grid"]


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
    dim = check_dim(dim)
    num_points = check_size(num_points, "num_points", minimum=0, row_bytes=16.0 * dim, what="points")
    gen = np.random.default_rng(check_seed(rng, "rng"))
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


def lonlat_grid(n_lat: int, n_lon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Cell-centred longitude/latitude grid on :math:`S^2` for maps.

    Returns
    -------
    lon : numpy.ndarray
        ``(n_lon,)`` longitudes in :math:`(-\pi, \pi)`.
    lat : numpy.ndarray
        ``(n_lat,)`` latitudes in :math:`(-\pi/2, \pi/2)`, north first (image row order).
    points : numpy.ndarray
        ``(n_lat * n_lon, 3)`` unit vectors, row-major over (lat, lon):
        :math:`(\cos\phi\cos\lambda, \cos\phi\sin\lambda, \sin\phi)`.
    """
    n_lat = check_size(n_lat, "n_lat", minimum=1, what="latitudes")
    n_lon = check_size(n_lon, "n_lon", minimum=1, row_bytes=64.0 * n_lat, what="longitudes")
    lon = -np.pi + (np.arange(n_lon) + 0.5) * (2 * np.pi / n_lon)
    lat = np.pi / 2 - (np.arange(n_lat) + 0.5) * (np.pi / n_lat)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    points = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], axis=-1)
    return lon, lat, points.reshape(-1, 3)


def orthographic_grid(
    n: int, lon0: float = 0.0, lat0: float = 0.3
) -> tuple[np.ndarray, np.ndarray]:
    r"""Points of :math:`S^2` seen in an orthographic view centred on (``lon0``, ``lat0``).

    Returns
    -------
    points : numpy.ndarray
        ``(K, 3)`` unit vectors of the visible hemisphere, one per pixel inside the disk.
    mask : numpy.ndarray
        ``(n, n)`` boolean image mask (row 0 at the top) of the pixels that ``points`` fill,
        in row-major order.
    """
    n = check_size(n, "n", minimum=2, row_bytes=64.0 * check_int(n, "n"), what="pixels a side")
    lon0, lat0 = (float(check_finite_array(a, name)) for a, name in ((lon0, "lon0"), (lat0, "lat0")))
    u = np.linspace(-1, 1, n)
    px, py = np.meshgrid(u, u[::-1])
    mask = px**2 + py**2 < 1.0
    depth = np.sqrt(1.0 - px[mask] ** 2 - py[mask] ** 2)
    # view frame: forward f (towards the viewer), east e, north v
    f = np.array([np.cos(lat0) * np.cos(lon0), np.cos(lat0) * np.sin(lon0), np.sin(lat0)])
    e = np.array([-np.sin(lon0), np.cos(lon0), 0.0])
    v = np.cross(f, e)
    points = depth[:, None] * f + px[mask][:, None] * e + py[mask][:, None] * v
    return points / np.linalg.norm(points, axis=1, keepdims=True), mask
