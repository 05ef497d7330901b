r"""VISH degree by degree on 1-D data (notebook 04; Dutordoir et al. 2020): the fit and the
collapsed bound for every truncation degree L, against the exact GP's log marginal likelihood.

On the circle :math:`S^1` degree L gives :math:`M = 2L + 1` features, and the bound rises with L
towards the exact log marginal likelihood (a sparse model with every feature is the exact GP;
the kernel prior, whose bound is below the full GP's evidence at every degree).
Everything is computed once in the constructor — one fit at the largest degree, then the bound
and predictions at each L with those hyper-parameters, O(M^3) each — so the slider only redraws.
"""

from __future__ import annotations

import numpy as np

from ..likelihoods import Gaussian
from ..models import VISH, ExactGP
from ..widgets import BlitManager, subplots

__all__ = ["DegreeExplorer"]


class DegreeExplorer:
    """Slider over the degree L; left the predictive mean and ±2σ of y in the data's units, right
    the bound against M with the current L marked.

    Parameters
    ----------
    X, y
        1-D inputs ``(N, 1)`` and targets ``(N,)``, in their own units (standardised inside).
    kernel
        The kernel (fitted at ``max_degree`` and shared by every degree).
    max_degree
        Largest degree of the slider.
    """

    def __init__(self, X, y, kernel, max_degree: int = 40, degree: int = 6, grid_size: int = 300) -> None:
        X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
        y = np.asarray(y, dtype=np.float64)
        self.x_mean, self.x_std, self.y_mean, self.y_std = X.mean(), X.std(), y.mean(), y.std()
        Xn, yn = (X - self.x_mean) / self.x_std, (y - self.y_mean) / self.y_std
        self.model = VISH(kernel, max_degree, Gaussian(0.1), prior="kernel").fit(Xn, yn)
        noise = self.model.likelihood.variance
        grid = np.linspace(Xn.min() - 0.6, Xn.max() + 0.6, grid_size)[:, None]
        self.levels = np.arange(max_degree + 1)
        self.elbos, self.means, self.sds = [], [], []
        for L in self.levels:
            m = VISH(kernel, int(L), Gaussian(noise), prior="kernel").fit(Xn, yn, optimize=False)
            mu, var = m.predict_y(grid)
            self.elbos.append(m.elbo())
            self.means.append(mu * self.y_std + self.y_mean)
            self.sds.append(np.sqrt(var) * self.y_std)
        self.elbos = np.array(self.elbos)
        self.exact_lml = ExactGP(kernel, noise).fit(Xn, yn).log_marginal_likelihood()
        self._draw(X[:, 0], y, grid[:, 0] * self.x_std + self.x_mean, degree, max_degree)

    def _draw(self, x, y, g, degree, max_degree) -> None:
        import ipywidgets as widgets

        self.L = widgets.IntSlider(value=min(degree, max_degree), min=0, max=max_degree, description="degree L")
        self.fig, (self.ax_fit, self.ax_elbo) = subplots(1, 2, figsize=(8.5, 3.4))
        self.ax_fit.plot(x, y, "k.", ms=3, label="data")
        (self.mean,) = self.ax_fit.plot(g, np.zeros_like(g), "C0-", lw=2, label="mean")
        (self.lo,) = self.ax_fit.plot(g, np.zeros_like(g), "C0--", lw=1, label="±2σ (y)")
        (self.hi,) = self.ax_fit.plot(g, np.zeros_like(g), "C0--", lw=1)
        self.ax_fit.set_ylim(y.min() - 1.5 * y.std(), y.max() + 1.5 * y.std())
        self.ax_fit.set_xlabel("x")
        self.ax_fit.set_ylabel("y")
        self.ax_fit.legend(loc="lower left", fontsize=8)
        M = 2 * self.levels + 1
        self.ax_elbo.plot(M, self.elbos, "C1.-", label="collapsed bound (VISH)")
        self.ax_elbo.axhline(self.exact_lml, color="k", ls="--", lw=1, label="exact log marginal lik.")
        lo = np.percentile(self.elbos, 10)
        self.ax_elbo.set_ylim(lo - 0.1 * abs(lo), self.exact_lml + 0.05 * abs(self.exact_lml) + 1)
        self.ax_elbo.set_xlabel("number of features M = 2L + 1")
        self.ax_elbo.set_ylabel("bound (standardised data)")
        self.ax_elbo.legend(loc="lower right", fontsize=8)
        (self.marker,) = self.ax_elbo.plot([], [], "ro")
        self.title = self.ax_fit.set_title("", fontsize=9)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.3)
        self.blit = BlitManager(self.fig, [self.mean, self.lo, self.hi, self.marker, self.title])
        self.L.observe(self.update, names="value")
        self.update()

    def widget(self):
        """The slider, for ``display``."""
        return self.L

    def update(self, change=None) -> None:
        L = self.L.value
        mu, sd = self.means[L], self.sds[L]
        self.mean.set_ydata(mu)
        self.lo.set_ydata(mu - 2 * sd)
        self.hi.set_ydata(mu + 2 * sd)
        self.marker.set_data([2 * L + 1], [self.elbos[L]])
        self.title.set_text(f"L = {L}, M = {2 * L + 1}: bound = {self.elbos[L]:.2f}")
        self.blit.update()
