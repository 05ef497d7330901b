r"""Truncating an activation's Funk–Hecke series (notebook 03; Dutordoir, PhD report §4.3):
:math:`\sigma_L(t) = \sum_{\ell \le L}\sigma_\ell Z_\ell(t)` against :math:`\sigma(t)`, and the
RKHS norm :math:`\|\sigma_L\|_{\mathcal H}^2 = \sum_{\ell \le L}\sigma_\ell^2 N(\ell, d)/\lambda_\ell`
that :math:`K_{uu}` carries, against L."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..sphere.analysis import rkhs_norm_truncated, truncated_shape
from ..widgets import BlitManager, subplots

__all__ = ["TruncationExplorer"]


class TruncationExplorer:
    """Left: the activation and its truncation at L (with the largest error); right: the RKHS
    norm of the truncated units of ``norm_activations`` under the kernel, against L, with L
    marked. Fixed axes: every move redraws only its artists (blitting).

    Parameters
    ----------
    activations
        ``{name: activation}``.
    kernels
        ``{name: (lambda d: kernel)}``.
    norm_activations
        Names of the activations whose norms the right panel shows (default: the first two).
    max_level
        Largest L of the slider.
    """

    def __init__(self, activations: dict, kernels: dict[str, Callable], norm_activations=None,
                 max_level: int = 40, activation: str | None = None, kernel: str | None = None) -> None:
        import ipywidgets as widgets
        import matplotlib.pyplot as plt

        self.activations, self.kernels, self.max_level = activations, kernels, max_level
        self.act = widgets.Dropdown(options=list(activations), value=activation or next(iter(activations)),
                                    description="activation")
        self.kernel = widgets.Dropdown(options=list(kernels), value=kernel or next(iter(kernels)), description="kernel")
        self.dim = widgets.IntSlider(value=3, min=2, max=12, description="dimension d")
        self.L = widgets.IntSlider(value=6, min=0, max=max_level, description="levels L")
        self.t = np.linspace(-1, 1, 401)
        self.fig, (self.ax_shape, self.ax_norm) = subplots(1, 2, figsize=(8.5, 3.4))
        (self.exact,) = self.ax_shape.plot(self.t, np.zeros_like(self.t), "k-", lw=2, label=r"$\sigma(t)$")
        (self.trunc,) = self.ax_shape.plot(self.t, np.zeros_like(self.t), "-", lw=1.5, label=r"$\sigma_L(t)$")
        self.ax_shape.set_xlabel("t = ŵᵀx")
        self.ax_shape.set_ylabel("unit's value")
        self.ax_shape.legend(loc="upper left", fontsize=8)
        self.info = self.ax_shape.text(0.98, 0.04, "", transform=self.ax_shape.transAxes, ha="right", fontsize=9)
        self.norm_lines = {}
        for name in norm_activations or list(activations)[:2]:
            (self.norm_lines[name],) = self.ax_norm.semilogy([], [], ".-", label=name)
        self.marker = self.ax_norm.axvline(0, color="gray", ls=":")
        self.ax_shape.set_ylim(-1.2, 1.4)
        self.ax_norm.set_xlim(-0.5, max_level + 0.5)
        self.ax_norm.set_ylim(1e-2, 1e14)
        self.ax_norm.set_xlabel("truncation level L")
        self.ax_norm.set_ylabel(r"$\|\sigma_L\|^2_{\mathcal{H}}$")
        self.ax_norm.legend(loc="upper left", fontsize=8)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.3)
        self.ax_norm.yaxis.set_minor_locator(plt.NullLocator())
        self.ax_norm.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0e}"))  # no mathtext
        self.blit = BlitManager(self.fig, [self.exact, self.trunc, self.info, self.marker, self.ax_norm.title,
                                           self.ax_shape.title, *self.norm_lines.values()])
        for w in (self.act, self.dim):
            w.observe(self.update_shape, names="value")
        for w in (self.kernel, self.dim):
            w.observe(self.update_norms, names="value")
        self.L.observe(self.update_level, names="value")
        self.update_norms()
        self.update_shape()

    def widget(self):
        """The controls, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox([self.act, self.kernel]), widgets.HBox([self.dim, self.L])])

    def update_shape(self, change=None) -> None:
        act = self.activations[self.act.value]
        self.coeffs = act.coefficients(self.dim.value, self.max_level)
        self.exact.set_ydata(act.shape(self.t))
        self.ax_shape.set_title(self.act.value, fontsize=9)
        self.update_level()

    def update_norms(self, change=None) -> None:
        d = self.dim.value
        lam = self.kernels[self.kernel.value](d).spectrum(d, self.max_level)
        for name, line in self.norm_lines.items():
            norms = rkhs_norm_truncated(self.activations[name].coefficients(d, self.max_level), lam, d)
            line.set_data(np.arange(self.max_level + 1), norms)
        self.ax_norm.set_title(f"{self.kernel.value}, d = {d}", fontsize=9)
        self.blit.update()

    def update_level(self, change=None) -> None:
        L = self.L.value
        approx = truncated_shape(self.coeffs, self.dim.value, self.t, L)
        self.trunc.set_ydata(approx)
        self.err = float(np.abs(approx - self.activations[self.act.value].shape(self.t)).max())
        self.info.set_text(f"$L$ = {L}: max $|\\sigma - \\sigma_L|$ = {self.err:.2e}")
        self.marker.set_xdata([L, L])
        self.blit.update()
