r"""Continuous depth and learned phases (notebook 06; Eleftheriadis et al.).

:class:`DepthExplorer`: VISH with the continuous-depth kernel :math:`\lambda_\ell \propto
\ell^{-\beta}` on 1-D data; a slider sets β and the fit, the ELBO against β and the spectrum
follow (the statistics do not depend on β, so each move is one O(M^3) factorisation).
:class:`PhaseViewer`: the directions of phase-truncated harmonics on :math:`S^2`, round by
round of training (nothing recomputed).
"""

from __future__ import annotations

import numpy as np

from ..kernels import PolynomialDecay
from ..likelihoods import Gaussian
from ..models import VISH
from ..widgets import BlitManager, figure, subplots

__all__ = ["DepthExplorer", "PhaseViewer"]


class DepthExplorer:
    """Fit VISH with ``PolynomialDecay(2, β, max_degree=L)`` on 1-D ``X``, ``y`` (standardised
    inside), record the ELBO over ``betas``, then explore β: the fit (data units), the ELBO curve
    with the learned β, and :math:`\\lambda_\\ell/\\lambda_1`.

    Attributes: ``model``, ``beta_star`` (learned), ``betas``, ``elbos``."""

    def __init__(self, X, y, max_degree: int = 30, betas=None, maxiter: int = 500) -> None:
        X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
        y = np.asarray(y, dtype=np.float64)
        self.xm, self.xs, self.ym, self.ys = X.mean(), X.std(), y.mean(), y.std()
        Xn, yn = (X - self.xm) / self.xs, (y - self.ym) / self.ys
        self.L = max_degree
        self.kernel = PolynomialDecay(2, 2.0, max_degree=max_degree)
        self.model = VISH(self.kernel, max_degree, Gaussian(0.1)).fit(Xn, yn, maxiter=maxiter)
        self.beta_star, self.elbo_star = self.kernel.beta, self.model.elbo()
        self.betas = np.linspace(0.1, 8.0, 40) if betas is None else np.asarray(betas, dtype=np.float64)
        self.elbos = []
        for b in self.betas:  # one factorisation per beta: the statistics do not depend on it
            self.kernel.beta = b
            self.elbos.append(self.model.elbo())
        self.kernel.beta = self.beta_star
        self.grid = np.linspace(Xn.min() - 0.8, Xn.max() + 0.8, 300)[:, None]
        self._draw(X[:, 0], y)

    def _draw(self, x, y) -> None:
        import ipywidgets as widgets

        lo, hi = min(float(self.betas.min()), self.beta_star), max(float(self.betas.max()), self.beta_star)
        self.beta = widgets.FloatSlider(value=self.beta_star, min=lo, max=hi, step=0.01, description="β",
                                        continuous_update=False)
        self.status = widgets.Label("smaller β: slower decay, more high-frequency freedom (a 'deeper' kernel)")
        g = self.grid[:, 0] * self.xs + self.xm
        self.fig, (self.ax_fit, self.ax_elbo, self.ax_spec) = subplots(1, 3, figsize=(9.5, 3.2))
        self.ax_fit.plot(x, y, "k.", ms=3)
        (self.mean,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=2)
        (self.lo,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=0.7)
        (self.hi,) = self.ax_fit.plot(g, 0 * g, "C0-", lw=0.7)
        self.ax_fit.set_ylim(y.min() - 1.5 * y.std(), y.max() + 1.5 * y.std())
        self.ax_fit.set_xlabel("x")
        self.ax_fit.set_ylabel("y")
        self.ax_elbo.plot(self.betas, self.elbos, "k-")
        self.ax_elbo.axvline(self.beta_star, color="C1", ls="--", label=f"learned β = {self.beta_star:.2f}")
        (self.dot,) = self.ax_elbo.plot([], [], "o", color="C0", ms=8)
        self.ax_elbo.set_xlabel("β")
        self.ax_elbo.set_ylabel("ELBO (standardised data)")
        self.ax_elbo.legend(fontsize=8)
        self.ell = np.arange(1, self.L + 1)
        (self.spec,) = self.ax_spec.semilogy(self.ell, np.ones(self.L), "C0o-", ms=3)
        self.ax_spec.set_ylim(1e-12, 1.5)
        self.ax_spec.set_xlabel("degree ℓ")
        self.ax_spec.set_ylabel(r"$\lambda_\ell/\lambda_1$")
        self.fig.tight_layout()
        # fixed axes: a move redraws only the curves, the marker and the title (blitting)
        self.blit = BlitManager(self.fig, [self.mean, self.lo, self.hi, self.dot, self.spec, self.ax_fit.title])
        self.beta.observe(self.update, names="value")
        self.update()

    def widget(self):
        """The slider and the status line, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([self.beta, self.status])

    def update(self, change=None) -> None:
        self.kernel.beta = self.beta.value
        mu, var = self.model.predict_y(self.grid)
        mu, sd = mu * self.ys + self.ym, np.sqrt(var) * self.ys
        self.mean.set_ydata(mu)
        self.lo.set_ydata(mu - 2 * sd)
        self.hi.set_ydata(mu + 2 * sd)
        lam = self.kernel.spectrum(2, self.L)
        self.spec.set_ydata(lam[1:] / lam[1])
        self.elbo = self.model.elbo()
        self.dot.set_data([self.beta.value], [self.elbo])
        self.ax_fit.set_title(f"β = {self.beta.value:.2f}: ELBO {self.elbo:.1f}", fontsize=9)
        self.blit.update()


class PhaseViewer:
    """The directions of each degree's phases on :math:`S^2` after each training round.

    Parameters
    ----------
    snapshots
        ``snapshots[k][ell]``: unit directions ``(P, 3)`` of degree ``ell`` after round k.
    points
        Lifted data on the sphere ``(N, 3)`` drawn in grey (every third).
    """

    def __init__(self, snapshots, points=None) -> None:
        import ipywidgets as widgets
        import matplotlib.pyplot as plt
        from mpl_toolkits.mplot3d import Axes3D  # noqa: F401  (registers the 3-D projection)

        self.snapshots = snapshots
        rounds = len(snapshots) - 1
        self.round = widgets.IntSlider(value=rounds, min=0, max=rounds, description="round")
        self.fig = figure(figsize=(5.2, 4.6))
        # the globe on the right, the legend in the narrow column left of it
        ax = self.fig.add_axes((0.15, -0.03, 0.85, 0.98), projection="3d")
        u, v = np.mgrid[0:2 * np.pi:40j, 0:np.pi:20j]
        ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.4)
        if points is not None:
            ax.scatter(*np.asarray(points)[::3].T, s=2, c="0.55")
        self.paths, self.heads = [], []
        colours = plt.cm.viridis(np.linspace(0, 1, len(snapshots[0])))
        for ell, col in enumerate(colours):
            if ell == 0:
                continue  # the constant needs no direction
            for j in range(snapshots[0][ell].shape[0]):
                ax.scatter(*snapshots[0][ell][j], s=30, facecolors="none", edgecolors=[col])
                (path,) = ax.plot([], [], [], color=col, lw=1.2)
                (head,) = ax.plot([], [], [], "o", color=col, ms=6, label=f"ℓ = {ell}" if j == 0 else None)
                self.paths.append((ell, j, path))
                self.heads.append((ell, j, head))
        ax.set_box_aspect((1, 1, 1), zoom=1.65)  # the sphere fills its panel, not a third of it
        ax.set_axis_off()
        self.fig.legend(*ax.get_legend_handles_labels(), loc="center left", fontsize=8, frameon=False)
        self.ax = ax
        self.round.observe(self.update, names="value")
        self.update()

    def widget(self):
        """The slider, for ``display``."""
        return self.round

    def update(self, change=None) -> None:
        k = self.round.value
        for ell, j, path in self.paths:
            trail = np.array([s[ell][j] for s in self.snapshots[: k + 1]])
            path.set_data_3d(trail[:, 0], trail[:, 1], trail[:, 2])
        for ell, j, head in self.heads:
            p = self.snapshots[k][ell][j]
            head.set_data_3d([p[0]], [p[1]], [p[2]])
        self.ax.set_title(f"phase directions after round {k} of {len(self.snapshots) - 1}", fontsize=9)
        self.fig.canvas.draw_idle()
