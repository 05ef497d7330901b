r"""Where a model on two inputs lives: its posterior in data space, on a map of the sphere and on
a globe (notebook 04; Dutordoir et al. 2020 §3.2, Fig. 2).

The lift :math:`x \mapsto \tilde x = [x / s, b]`, :math:`\hat x = \tilde x / \|\tilde x\|` puts
the data plane on the upper hemisphere of :math:`S^2` (the bias is the third coordinate), and
the model is :math:`f(x) = \|\tilde x\|\, g(\hat x)` with a GP :math:`g` on the sphere. Each
point :math:`\hat x` with :math:`\hat x_3 > 0` comes from exactly one
:math:`x = s \odot \hat x_{1:2}\, b / \hat x_3` (a gnomonic projection), so :math:`g` on the upper
hemisphere is the model's own prediction there divided by :math:`r = b / \hat x_3`; the lower
hemisphere and the equator are reached by no input.
"""

from __future__ import annotations

import numpy as np

from ..sphere import lonlat_grid, orthographic_grid
from ..widgets import capped_dpi

__all__ = ["sphere_posterior", "on_sphere"]

#: points of the hemisphere closer to the equator than this (|x| / b beyond ~50 input scales)
#: are left blank: their preimages are far outside any data
_MIN_HEIGHT = 0.02


def on_sphere(model, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Posterior mean and standard deviation of :math:`g` at unit points ``(K, 3)`` of
    :math:`S^2` (NaN where :math:`\hat x_3 \le 0.02`), from ``model.predict_f`` at their
    preimages in data space. ``model`` has a zonal kernel with a lift of two inputs and a positive
    bias (``model.kernel.bias``, ``model.kernel.input_scale``)."""
    kernel = model.kernel
    bias = float(kernel.bias)
    if not bias > 0:
        raise ValueError(f"the sphere view needs a positive bias (the data's hemisphere), got {bias!r}")
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points must be (K, 3) unit vectors, got shape {points.shape}")
    scale = np.broadcast_to(np.asarray(kernel.input_scale, dtype=np.float64), (2,))
    mean = np.full(points.shape[0], np.nan)
    sd = np.full(points.shape[0], np.nan)
    up = points[:, 2] > _MIN_HEIGHT
    r = bias / points[up, 2]
    mu, var = model.predict_f(scale * points[up, :2] * r[:, None])
    mean[up], sd[up] = mu / r, np.sqrt(np.maximum(var, 0.0)) / r
    return mean, sd


def sphere_posterior(model, X, y=None, *, map_size=(45, 180), globe_size: int = 160, view=(-0.6, 0.5),
                     grid_size: int = 80):
    r"""Figure: the posterior mean (top row) and standard deviation (bottom row) of a model on two
    inputs — in data space (:math:`f`), on a longitude/latitude map of the upper hemisphere and
    on an orthographic globe (:math:`g`, the GP on the sphere), with the data and their lifted
    points.

    Parameters
    ----------
    model
        A fitted model of two inputs with a zonal kernel (e.g. :class:`~spherelab.VISH`).
    X, y
        The inputs ``(N, 2)`` it was fitted on (model units) and optional labels or targets for
        the points' colours.
    map_size
        ``(n_lat, n_lon)`` of the hemisphere map.
    globe_size
        Pixels per side of the globe.
    view
        The globe's centre ``(longitude, latitude)`` in radians.
    grid_size
        Points per side of the data-space grid.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"X must be (N, 2): the sphere view is for models of two inputs, got shape {X.shape}")
    lo, hi = X.min(0) - 0.5 * X.std(0), X.max(0) + 0.5 * X.std(0)
    g1, g2 = np.meshgrid(np.linspace(lo[0], hi[0], grid_size), np.linspace(lo[1], hi[1], grid_size))
    mu, var = model.predict_f(np.column_stack([g1.ravel(), g2.ravel()]))
    data = (mu.reshape(g1.shape), np.sqrt(np.maximum(var, 0.0)).reshape(g1.shape))
    n_lat, n_lon = map_size
    lon, lat, pts = lonlat_grid(2 * n_lat, n_lon)  # north half of a global grid: the hemisphere
    lon, lat, pts = lon, lat[:n_lat], pts[: n_lat * n_lon]
    hemisphere = [v.reshape(n_lat, n_lon) for v in on_sphere(model, pts)]
    gpts, mask = orthographic_grid(globe_size, *view)
    globe = []
    for v in on_sphere(model, gpts):
        img = np.full(mask.shape, np.nan)
        img[mask] = v
        globe.append(img)
    r, Xh = model.kernel.lift(X)
    colour = dict(c=y, cmap="coolwarm", s=4, edgecolors="none") if y is not None else dict(c="k", s=3)

    fig, axes = plt.subplots(2, 3, figsize=(9.5, 5.4), dpi=capped_dpi(9.5),
                             gridspec_kw={"width_ratios": [1.0, 1.6, 0.9]})
    names = ("mean", "standard deviation")
    for row, (name, cmap) in enumerate(zip(names, ("RdBu_r", "viridis"))):
        d, h, gl = data[row], hemisphere[row], globe[row]
        vmax = np.nanmax(np.abs(h)) if row == 0 else np.nanmax(h)
        vmin = -vmax if row == 0 else 0.0
        ax = axes[row, 0]
        im = ax.imshow(d, extent=(lo[0], hi[0], lo[1], hi[1]), origin="lower", aspect="auto", cmap=cmap)
        ax.scatter(*X.T, **colour)
        ax.set_xlabel("x₁")
        ax.set_ylabel("x₂")
        ax.set_title(f"data space: {name} of f", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.05)
        ax = axes[row, 1]
        im = ax.imshow(h, extent=np.degrees([lon[0], lon[-1], 0.0, np.pi / 2]), aspect="auto", cmap=cmap,
                       vmin=vmin, vmax=vmax)
        ax.scatter(np.degrees(np.arctan2(Xh[:, 1], Xh[:, 0])), np.degrees(np.arcsin(np.clip(Xh[:, 2], -1, 1))),
                   **{**colour, "s": 2})
        ax.set_xlabel("longitude (°)")
        ax.set_ylabel("latitude (°)")
        ax.set_title(f"upper hemisphere: {name} of g, data lifted", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.04)
        ax = axes[row, 2]
        cm = plt.get_cmap(cmap).with_extremes(bad="0.85")  # the lower hemisphere: no input maps there
        ax.imshow(gl, cmap=cm, vmin=vmin, vmax=vmax)
        ax.set_axis_off()
        ax.set_title(f"globe: {'sd' if row else 'mean'} of g (grey: no input)", fontsize=8)
    fig.suptitle(f"posterior of {type(model).__name__}: f(x) = r g(x̂), r = |[x / s, b]|, x̂ = [x / s, b] / r",
                 fontsize=9)
    fig.tight_layout()
    return fig
