r"""Kernel spectra against activation coefficients, level by level (notebook 02): where
:math:`\lambda_\ell = 0 \ne \sigma_\ell` an activated feature's level must be dropped, where
:math:`\sigma_\ell = 0 \ne \lambda_\ell` the prior's variance stays unexplained (Tiao, thesis
ch. 3 eq. 3.6; Dutordoir, PhD report Fig. 4.6)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..sphere.analysis import mismatch_report
from ..widgets import BlitManager, subplots

__all__ = ["MismatchExplorer"]


class MismatchExplorer:
    r""":math:`\sqrt{\lambda_\ell}` of a kernel and :math:`|\sigma_\ell|` of an activation on a
    log axis, with the mismatched levels marked, for a choice of kernel, activation, dimension
    and number of levels. Spectra already computed are kept; a move that keeps the y-range
    redraws only the curves (blitting), one that changes it re-renders the axes.

    Parameters
    ----------
    kernels
        ``{name: (lambda d: kernel)}``.
    activations
        ``{name: activation}``.
    """

    def __init__(self, kernels: dict[str, Callable], activations: dict, kernel: str | None = None,
                 activation: str | None = None, dim: int = 3, levels: int = 20) -> None:
        import ipywidgets as widgets
        import matplotlib.pyplot as plt

        self.kernels, self.activations = kernels, activations
        self.kernel = widgets.Dropdown(options=list(kernels), value=kernel or next(iter(kernels)), description="kernel")
        self.act = widgets.Dropdown(options=list(activations), value=activation or next(iter(activations)),
                                    description="activation")
        self.dim = widgets.IntSlider(value=dim, min=2, max=20, description="dimension d")
        self.levels = widgets.IntSlider(value=levels, min=4, max=40, description="levels L")
        self.report = widgets.HTML()
        self.fig, self.ax = subplots(figsize=(7.5, 3.6))
        (self.k_line,) = self.ax.semilogy([], [], "o-", ms=4, label=r"$\sqrt{\lambda_\ell}$ (kernel)")
        (self.a_line,) = self.ax.semilogy([], [], "s--", ms=4, label=r"$|\sigma_\ell|$ (activation)")
        self.k_only = self.ax.scatter([], [], marker="x", s=80, c="crimson", zorder=5,
                                      label="λ = 0, σ ≠ 0: level dropped")
        self.a_only = self.ax.scatter([], [], marker="v", s=60, c="purple", zorder=5,
                                      label="σ = 0, λ ≠ 0: variance left unexplained")
        self.ax.set_xlabel("level ℓ")
        self.ax.set_ylabel("magnitude (log scale)")
        self.ax.legend(loc="upper right", fontsize=8)
        self.ax.set_xlim(-0.5, 40.5)
        self.ax.yaxis.set_minor_locator(plt.NullLocator())
        self.fig.subplots_adjust(left=0.11, right=0.98, bottom=0.13, top=0.91)
        self.blit = BlitManager(self.fig, [self.k_line, self.a_line, self.k_only, self.a_only, self.ax.title])
        self._spectra: dict = {}
        self._ylim = None
        for w in (self.kernel, self.act, self.dim, self.levels):
            w.observe(self.update, names="value")
        self.update()

    def widget(self):
        """The controls and the report, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox([self.kernel, self.act]), widgets.HBox([self.dim, self.levels]),
                             self.report])

    def spectra(self, kernel: str, activation: str, d: int, L: int) -> tuple[np.ndarray, np.ndarray]:
        """(λ_0..λ_L, σ_0..σ_L), computed once per combination, with the levels at or below their
        numerical floor (``spectrum_floor``, ``coefficients_floor``: quadrature round-off) set to 0:
        round-off is neither drawn nor counted as a level that is there."""
        key = (kernel, activation, d, L)
        if key not in self._spectra:
            k, a = self.kernels[kernel](d), self.activations[activation]
            lam, sig = k.spectrum(d, L), a.coefficients(d, L)
            self._spectra[key] = (np.where(lam > k.spectrum_floor(d, L), lam, 0.0),
                                  np.where(np.abs(sig) > a.coefficients_floor(d, L), sig, 0.0))
        return self._spectra[key]

    def update(self, change=None) -> None:
        d, L = self.dim.value, self.levels.value
        lam, sig = self.spectra(self.kernel.value, self.act.value, d, L)
        ell = np.arange(L + 1)
        k = np.sqrt(np.where(lam > 0, lam, np.nan))
        a = np.where(np.abs(sig) > 0, np.abs(sig), np.nan)
        self.k_line.set_data(ell, k)
        self.a_line.set_data(ell, a)
        values = np.concatenate([k[np.isfinite(k)], a[np.isfinite(a)]])
        lo, hi = (values.min(), values.max()) if values.size else (1e-3, 1.0)
        # decades that hold the curves, one decade of room below for the markers
        ylim = (10.0 ** (np.floor(np.log10(lo)) - 1), 10.0 ** (np.ceil(np.log10(hi)) + 0.5))
        floor = ylim[0] * 3.0
        rep = mismatch_report(lam, sig)
        for artist, lv in ((self.k_only, rep["kernel_only_zero"]), (self.a_only, rep["activation_only_zero"])):
            artist.set_offsets(np.c_[lv, np.full(lv.size, floor)])
        self.ax.set_title(f"{self.kernel.value} × {self.act.value}, d = {d}, L = {L}", fontsize=9)
        self.report.value = (
            f"<b>dropped levels</b> (λ = 0 ≠ σ): {rep['kernel_only_zero'].tolist() or 'none'}<br>"
            f"<b>unexplained levels</b> (σ = 0 ≠ λ): {rep['activation_only_zero'].tolist() or 'none'}")
        self.rep = rep
        if ylim != self._ylim:  # the axes change: a full render (then blitting again)
            self._ylim = ylim
            self.ax.set_ylim(*ylim)
            self.blit.full()
        else:
            self.blit.update()
