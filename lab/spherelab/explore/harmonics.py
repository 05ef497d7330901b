r"""The spherical harmonics of :math:`S^2` (notebook 01): a gallery on a map and a globe, and the
addition theorem :math:`\sum_j \phi_{\ell j}(x)\phi_{\ell j}(x') = Z_\ell(x^\top x')`.

All harmonics are evaluated once on the map grid (and once per globe view); a slider move
picks columns and redraws only the images, markers and titles over a cached background
(blitting). Colours are relative to each function's largest value, so the colour bar and the
axes never change.
"""

from __future__ import annotations

import numpy as np

from ..sphere import SphericalHarmonics, lonlat_grid, num_harmonics, orthographic_grid, zonal_table
from ..widgets import BlitManager, subplots

__all__ = ["HarmonicsGallery", "AdditionTheorem"]


def _label(Y: SphericalHarmonics, col: int) -> str:
    ell, m = Y.multi_indices[col]
    kind = "" if m == 0 else (" · sin" if Y.trig[col] else " · cos")
    return f"degree ℓ = {ell}, order m = {m}{kind}"


class _MapGrid:
    def __init__(self, max_degree: int, n_lat: int, n_lon: int) -> None:
        self.Y = SphericalHarmonics(3, max_degree)
        self.lon, self.lat, self.grid = lonlat_grid(n_lat, n_lon)
        self.n_lat, self.n_lon = n_lat, n_lon
        self.phi = self.Y(self.grid)  # (n_lat * n_lon, M), once
        self.extent = np.degrees([self.lon[0], self.lon[-1], self.lat[-1], self.lat[0]])


class HarmonicsGallery:
    """Sliders for the degree ℓ, the order index (0 → m = 0, then cosine/sine pairs) and the
    globe's longitude; a map and an orthographic globe of the chosen harmonic.

    Parameters
    ----------
    max_degree
        Largest degree of the slider.
    map_size
        ``(n_lat, n_lon)`` of the map grid.
    globe_size
        Pixels per side of the globe.
    """

    def __init__(self, max_degree: int = 12, map_size=(121, 242), globe_size: int = 220) -> None:
        import ipywidgets as widgets

        self.maps = m = _MapGrid(max_degree, *map_size)
        self.n_globe = globe_size
        self.degree = widgets.IntSlider(value=min(3, max_degree), min=0, max=max_degree, description="degree ℓ")
        self.order = widgets.IntSlider(value=2, min=0, max=2 * self.degree.value, description="order index")
        self.view = widgets.FloatSlider(value=0.0, min=-180, max=180, step=5, description="globe lon°",
                                        continuous_update=False)
        # the colour bar in a column of its own, right of the globe: attached to the map it sat
        # between the two panels with its label under the globe
        self.fig, (self.ax_map, self.ax_globe, cax) = subplots(
            1, 3, figsize=(8.8, 3.3), gridspec_kw={"width_ratios": [2, 1, 0.06]})
        self.im_map = self.ax_map.imshow(np.zeros((m.n_lat, m.n_lon)), extent=m.extent, cmap="RdBu_r",
                                         aspect="auto", vmin=-1, vmax=1)
        self.ax_map.set_xlabel("longitude (°)")
        self.ax_map.set_ylabel("latitude (°)")
        self.im_globe = self.ax_globe.imshow(np.zeros((globe_size, globe_size)), cmap="RdBu_r", vmin=-1, vmax=1)
        self.ax_globe.set_axis_off()
        self.ax_globe.set_title("globe (orthographic)", fontsize=8)
        bar = self.fig.colorbar(self.im_map, cax=cax)
        bar.set_label("value / its largest |value|", fontsize=8)
        self.fig.subplots_adjust(left=0.08, right=0.91, bottom=0.14, top=0.86, wspace=0.15)
        self.title = self.fig.suptitle("", fontsize=10)
        self.blit = BlitManager(self.fig, [self.im_map, self.im_globe, self.title])
        self._globe_view()
        self.degree.observe(self._on_degree, names="value")
        self.order.observe(self.redraw, names="value")
        self.view.observe(self._on_view, names="value")
        self.redraw()

    def widget(self):
        """The sliders, for ``display``."""
        import ipywidgets as widgets

        return widgets.HBox([self.degree, self.order, self.view])

    def column(self, ell: int, order: int) -> int:
        """The column of degree ``ell`` and order index ``order`` (0..2ℓ)."""
        return self.maps.Y.degree_slice(ell).start + order

    def _globe_view(self) -> None:
        self.globe_points, self.globe_mask = orthographic_grid(self.n_globe, np.radians(self.view.value), 0.35)
        self.phi_globe = self.maps.Y(self.globe_points)  # one evaluation per view

    def _on_degree(self, change=None) -> None:
        self.order.max = 2 * self.degree.value
        self.redraw()

    def _on_view(self, change=None) -> None:
        self._globe_view()
        self.redraw()

    def redraw(self, change=None) -> None:
        m = self.maps
        col = self.column(self.degree.value, min(self.order.value, 2 * self.degree.value))
        values, on_globe = m.phi[:, col], self.phi_globe[:, col]
        scale = max(float(np.abs(values).max()), float(np.abs(on_globe).max(initial=0.0)), 1e-12)
        self.im_map.set_data((values / scale).reshape(m.n_lat, m.n_lon))
        globe = np.full((self.n_globe, self.n_globe), np.nan)
        globe[self.globe_mask] = on_globe / scale
        self.im_globe.set_data(globe)
        self.title.set_text(_label(m.Y, col))
        self.blit.update()


class AdditionTheorem:
    """Sliders for the degree and the point x'; the map of :math:`\\sum_j \\phi_{\\ell j}(x)
    \\phi_{\\ell j}(x')/N(\\ell, 3)` and, against the angle γ between x and x', the same values on
    the curve :math:`Z_\\ell(\\cos\\gamma)/N(\\ell, 3)` (both in [-1, 1]); ``err`` is the largest
    deviation."""

    def __init__(self, max_degree: int = 12, map_size=(121, 242)) -> None:
        import ipywidgets as widgets

        self.maps = m = _MapGrid(max_degree, *map_size)
        self.degree = widgets.IntSlider(value=min(4, max_degree), min=0, max=max_degree, description="degree ℓ")
        self.lon = widgets.FloatSlider(value=30, min=-180, max=180, step=5, description="x' lon°")
        self.lat = widgets.FloatSlider(value=20, min=-90, max=90, step=5, description="x' lat°")
        self.fig, (self.ax_map, self.ax_curve) = subplots(1, 2, figsize=(8.5, 3.2))
        self.im = self.ax_map.imshow(np.zeros((m.n_lat, m.n_lon)), extent=m.extent, cmap="RdBu_r", aspect="auto",
                                     vmin=-1, vmax=1)
        self.ax_map.set_xlabel("longitude (°)")
        self.ax_map.set_ylabel("latitude (°)")
        (self.star,) = self.ax_map.plot([], [], "k*", ms=12)
        self.gamma = np.linspace(0, np.pi, 400)
        (self.curve,) = self.ax_curve.plot([], [], "k-", lw=2, label=r"$Z_\ell(\cos\gamma)/N$")
        (self.dots,) = self.ax_curve.plot([], [], ".", ms=2, alpha=0.4,
                                          label=r"$\sum_j \phi_{\ell j}(x)\phi_{\ell j}(x')/N$")
        self.ax_curve.set_xlabel("angle γ between x and x' (rad)")
        self.ax_curve.set_ylabel("value / N(ℓ, 3)")
        self.ax_curve.set_xlim(0, np.pi)
        self.ax_curve.set_ylim(-1.1, 1.1)
        self.ax_curve.legend(loc="upper right", fontsize=8)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.86, wspace=0.25)
        self.title = self.fig.suptitle("", fontsize=10)
        self.blit = BlitManager(self.fig, [self.im, self.star, self.curve, self.dots, self.title])
        for w in (self.degree, self.lon, self.lat):
            w.observe(self.redraw, names="value")
        self.redraw()

    def widget(self):
        """The sliders, for ``display``."""
        import ipywidgets as widgets

        return widgets.HBox([self.degree, self.lon, self.lat])

    def redraw(self, change=None) -> None:
        m, ell = self.maps, self.degree.value
        lo, la = np.radians(self.lon.value), np.radians(self.lat.value)
        xp = np.array([[np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)]])
        block = m.Y.degree_slice(ell)
        lhs = m.phi[:, block] @ m.Y(xp)[0, block]  # the sum over the degree-ℓ harmonics
        cosg = np.clip(m.grid @ xp[0], -1, 1)
        n = num_harmonics(ell, 3)
        self.err = float(np.abs(lhs - zonal_table(ell, 3, cosg)[:, ell]).max())
        self.im.set_data((lhs / n).reshape(m.n_lat, m.n_lon))
        self.star.set_data([self.lon.value], [self.lat.value])
        self.curve.set_data(self.gamma, zonal_table(ell, 3, np.cos(self.gamma))[:, ell] / n)
        self.dots.set_data(np.arccos(cosg), lhs / n)
        self.title.set_text(f"degree {ell}: N(ℓ, 3) = {n} harmonics; max |sum − Z_ℓ| = {self.err:.1e}")
        self.blit.update()
