r"""Activated features in the orthogonally decoupled posterior on 1-D data (notebook 05; Tiao,
thesis ch. 3 eqs. 3.11–3.12, Fig. 3.8): the fit, and the five terms of the predictive variance,
for a choice of kernel, activation, number of levels L and orthogonal inputs K.

Each configuration is a full L-BFGS-B fit (about a second): sliders act on release, every
configuration is fitted once (moving back to one is instant), and the configurations one move
away from the shown one are fitted ahead on a background thread
(:class:`~spherelab.explore.background.Precomputer`), so that a move usually finds its fit
ready; otherwise a progress bar (:class:`~spherelab.explore.fitbar.FitBar`) follows its fit.
"""

from __future__ import annotations

import copy
import time
from typing import Callable

import numpy as np

from ..features import ActivatedFeatures
from ..likelihoods import Gaussian
from ..models import OrthogonalSVGP
from ..models.report import capped
from ..widgets import BlitManager, subplots
from .background import Precomputer, Selectable
from .fitbar import FitBar

__all__ = ["OrthogonalExplorer", "TERM_STYLE"]

#: colour and line style of each variance term (keys of ``OrthogonalSVGP.variance_terms``)
TERM_STYLE = {"Kff": ("C0", "-"), "-Qff": ("C0", "--"), "+QCuQ": ("#6baed6", "-"),
              "-SfvSvv^-1Svf": ("C1", "--"), "+SfvSvv^-1CvSvv^-1Svf": ("#fdae6b", "-")}
#: each term typeset (Matplotlib's mathtext) for the figure's legend
TERM_LABEL = {"Kff": r"$K_{ff}$", "-Qff": r"$-Q_{ff}$", "+QCuQ": r"$+Q\,C_u Q$",
              "-SfvSvv^-1Svf": r"$-S_{fv}S_{vv}^{-1}S_{vf}$",
              "+SfvSvv^-1CvSvv^-1Svf": r"$+S_{fv}S_{vv}^{-1}C_v S_{vv}^{-1}S_{vf}$"}


class OrthogonalExplorer(Selectable):
    """Left: data, predictive mean ±2σ (data units) and the orthogonal inputs W; right: the
    variance terms of f and their sum (standardised units).

    Parameters
    ----------
    X, y
        1-D inputs ``(N, 1)`` and targets, in their own units (standardised inside).
    kernels
        ``{name: (lambda: kernel)}``.
    activations
        ``{name: activation}``.
    units
        Activated units of the features.
    maxiter
        L-BFGS-B iterations per fit.

    Notes
    -----
    The controls are ``kernel``, ``act``, ``L``, ``K``; ``select(L=4, K=2)`` sets them and shows
    the fit before returning.
    """

    def __init__(self, X, y, kernels: dict[str, Callable], activations: dict, units: int = 10, maxiter: int = 400,
                 kernel: str | None = None, activation: str | None = None, levels: int = 8, orthogonal: int = 0):
        import ipywidgets as widgets

        X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
        y = np.asarray(y, dtype=np.float64)
        self.kernels, self.activations, self.units, self.maxiter = kernels, activations, units, maxiter
        self.xm, self.xs, self.ym, self.ys = X.mean(), X.std(), y.mean(), y.std()
        self.X, self.y = (X - self.xm) / self.xs, (y - self.ym) / self.ys
        self.grid = np.linspace(self.X.min() - 1.0, self.X.max() + 1.0, 300)[:, None]
        #: every configuration's fit, computed once (the neighbours of the shown one ahead)
        self.fits = Precomputer(self._fit, max_items=256)
        # refit on release, not on every pixel of a drag; labels wide enough to be read whole
        opts = dict(continuous_update=False, style={"description_width": "initial"})
        self.kernel = widgets.Dropdown(options=list(kernels), value=kernel or next(iter(kernels)), description="kernel")
        self.act = widgets.Dropdown(options=list(activations), value=activation or next(iter(activations)),
                                    description="activation")
        self.L = widgets.IntSlider(value=levels, min=1, max=16, description="levels L", **opts)
        self.K = widgets.IntSlider(value=orthogonal, min=0, max=16, description="orthogonal K", **opts)
        self.status = widgets.Label()
        self.fitbar = FitBar()
        g = self.grid[:, 0] * self.xs + self.xm
        self.fig, (self.ax_fit, self.ax_var) = subplots(1, 2, figsize=(9, 3.6))
        self.ax_fit.plot(X[:, 0], y, "k.", ms=3)
        (self.mean,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=2, label="mean")
        (self.lo,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=0.8, label="±2σ")
        (self.hi,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=0.8)
        (self.wmarks,) = self.ax_fit.plot([], [], "^", color="C1", ms=8, label="orthogonal inputs W")
        self.ax_fit.set_ylim(y.min() - 1.5 * y.std(), y.max() + 1.5 * y.std())
        self.ax_fit.set_xlabel("x")
        self.ax_fit.set_ylabel("y")
        self.ax_fit.legend(loc="lower left", fontsize=8)
        self.term_lines = {k: self.ax_var.plot(g, 0 * g, color=c, ls=ls, lw=1.5, label=TERM_LABEL[k])[0]
                           for k, (c, ls) in TERM_STYLE.items()}
        (self.total,) = self.ax_var.plot(g, 0 * g, "k-", lw=2.5, label="predictive variance of f")
        self.ax_var.axhline(0, color="gray", lw=0.5)
        self.ax_var.set_xlabel("x")
        self.ax_var.set_ylabel("variance term")
        self.ax_var.legend(loc="upper right", fontsize=7, ncol=2)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.9, wspace=0.25)
        self.ax_var.set_title("variance terms of f (standardised; log scale beyond the variance's)", fontsize=8)
        # the curves, markers and the left title change on a move; axes, legends and labels are
        # redrawn only when the variance panel's range must change (blitting)
        self.blit = BlitManager(self.fig, [self.mean, self.lo, self.hi, self.wmarks, self.total, self.ax_fit.title,
                                           *self.term_lines.values()])
        for w in (self.kernel, self.act, self.L, self.K):
            w.observe(self.refit, names="value")
        self._wait = True  # the first figure is complete when the constructor returns
        self.refit()
        self._wait = False

    def widget(self):
        """The controls, the status line and the progress bar, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox([self.kernel, self.act]), widgets.HBox([self.L, self.K]), self.status,
                             self.fitbar.box])

    def fit(self, kernel: str, activation: str, L: int, K: int) -> dict:
        """The fitted model of one configuration and what the figure shows (fitted once)."""
        return self.fits.get((kernel, activation, L, K))

    def _fit(self, key) -> dict:
        kernel, activation, L, K = key
        # an activation of its own: a fit holds its model's parts (spherelab.concurrency), and the
        # fits ahead run beside the one shown
        feats = ActivatedFeatures(copy.deepcopy(self.activations[activation]), self.units, L)
        model = OrthogonalSVGP(self.kernels[kernel](), feats, K, Gaussian(1.0))
        t0 = time.perf_counter()
        with capped():  # the explorer's maxiter is a cap by design; the figure shows the iterations run
            model.fit(self.X, self.y, maxiter=self.maxiter, seed=0,
                      progress=self.fitbar.follow(lambda: self._want == key))
        seconds = time.perf_counter() - t0
        mean, var = model.predict_y(self.grid)
        return dict(model=model, mean=mean, sd=np.sqrt(var), terms=model.variance_terms(self.grid),
                    elbo=model.elbo(), seconds=seconds, nit=model.optimizer_result.nit)

    def neighbours(self, key) -> list:
        """The configurations one move of one control away from ``key``, then two steps of a
        slider away (the order in which they are fitted ahead)."""
        kernel, activation, L, K = key
        near = []
        for step in (1, 2):
            near += [(kernel, activation, L + s, K) for s in (step, -step) if self.L.min <= L + s <= self.L.max]
            near += [(kernel, activation, L, K + s) for s in (step, -step) if self.K.min <= K + s <= self.K.max]
            if step == 1:
                near += [(k, activation, L, K) for k in self.kernels if k != kernel]
                near += [(kernel, a, L, K) for a in self.activations if a != activation]
        return near

    def refit(self, change=None) -> None:
        """Show the selected configuration: at once when fitted, else after its fit (the previous
        fit stays on screen, its title and the progress bar saying so, while a worker thread fits in
        a kernel)."""
        key = self._want = (self.kernel.value, self.act.value, self.L.value, self.K.value)
        if not self.fits.ready(key):
            self.fitbar.count(0, 1, f"fitting {self._title(key)}")
            self.ax_fit.set_title(f"{self._title(key)}: fitting… (the previous fit shown)", fontsize=9)
            self.blit.update()
        self.fits.when_ready(key, lambda r: self._show(key, r), self._failed, wait=self._wait)

    @staticmethod
    def _title(key) -> str:
        return f"{key[0]}, {key[1]}, L = {key[2]}, K = {key[3]}"

    def _failed(self, err: BaseException) -> None:
        self.fitbar.close()
        self.status.value = f"the fit failed: {type(err).__name__}: {err}"

    def _show(self, key, r: dict) -> None:
        if key != self._want:  # the selection moved on while this one was fitted
            return
        self.current = r
        self.fitbar.close()
        self.fits.ahead(self.neighbours(key))
        mu, sd = r["mean"] * self.ys + self.ym, r["sd"] * self.ys
        self.mean.set_ydata(mu)
        self.lo.set_ydata(mu - 2 * sd)
        self.hi.set_ydata(mu + 2 * sd)
        W = r["model"].W[:, 0] * self.xs + self.xm
        self.wmarks.set_data(W, np.full(W.shape, self.ax_fit.get_ylim()[0] + 0.1 * self.y.std() * self.ys))
        total = 0
        for k, line in self.term_lines.items():
            line.set_ydata(r["terms"][k])
            total = total + r["terms"][k]
        self.total.set_ydata(total)
        lo, hi = min(v.min() for v in r["terms"].values()), max(v.max() for v in r["terms"].values())
        self.ax_fit.set_title(self._title(key), fontsize=9)
        self.status.value = (f"ELBO {r['elbo']:.2f} (standardised data) · {r['nit']} L-BFGS-B iterations "
                             f"in {r['seconds']:.1f} s")
        # K_ff and -Q_ff can reach +-400 and cancel to a variance of order 1 (arc-cosine kernels):
        # a linear axis squashes the other three terms flat, so the axis is linear up to the
        # predictive variance's own scale and logarithmic beyond
        linthresh = 10.0 ** np.ceil(np.log10(max(float(np.max(np.abs(total))), 1e-3)))
        y0, y1 = self.ax_var.get_ylim()
        if self.ax_var.get_yscale() != "symlog" or self.ax_var.yaxis.get_transform().linthresh != linthresh \
                or lo < y0 or hi > y1 or hi - lo < 0.2 * (y1 - y0):  # a new scale or range: new axes
            self.ax_var.set_yscale("symlog", linthresh=linthresh, linscale=1.5)
            pad = 1.3
            self.ax_var.set_ylim(min(lo * pad, -0.1 * linthresh), max(hi * pad, 1.1 * linthresh))
            self.blit.full()
        else:
            self.blit.update()
