"""What structure and a time budget choose: an additive model's components and the budget fit's
candidates (notebook 08).

:func:`component_curves` gives each one-input component of a fitted additive VISH
(:func:`spherelab.selection.fit_additive`) as a function of its input: the posterior mean and standard
deviation of that component alone, from its own block of features. :func:`pair_gains` lays the
selection's bound gains out as a matrix. :class:`AdditiveView` draws both once. :class:`BudgetExplorer`
fits :func:`spherelab.fit` for the budget on a slider (on a worker thread, the next budget ahead) and
draws every candidate it tried, its seconds against its validation NLPD, the chosen one marked.
"""

from __future__ import annotations

import threading

import numpy as np

from ..selection import fit_budget
from ..widgets import BlitManager, capped_dpi, subplots
from .background import Precomputer, Selectable
from .fitbar import FitBar

__all__ = ["component_curves", "pair_gains", "AdditiveView", "BudgetExplorer"]


def component_curves(model, X: np.ndarray, points: int = 120) -> dict[int, tuple]:
    r"""For each one-input component c of an additive VISH (column j), ``{j: (grid, mean, sd)}``
    over the range of ``X[:, j]``: :math:`\mu_c = \Phi_c w_c` and
    :math:`\sigma_c^2 = \Phi_c\Lambda_c\Phi_c^\top - \Phi_c C_{cc}\Phi_c^\top` (the features prior's
    predictive of that component alone; the other columns do not enter it)."""
    kernel, feats = model.kernel, model.features
    w, C, lam = model.posterior_weights()
    out = {}
    for c, (group, block) in enumerate(zip(kernel.groups, feats.component_slices())):
        if len(group) != 1:
            continue
        j = group[0]
        grid = np.linspace(X[:, j].min(), X[:, j].max(), points)
        Xg = np.zeros((points, X.shape[1]))
        Xg[:, j] = grid
        Phi = feats.Kuf(kernel, Xg)[block].T
        var = np.einsum("nm,m,nm->n", Phi, lam[block], Phi) - np.einsum("nm,mk,nk->n", Phi, C[block, block], Phi)
        out[j] = (grid, Phi @ w[block], np.sqrt(np.maximum(var, 0.0)))
    return out


def pair_gains(report: dict, D: int) -> np.ndarray:
    """The selection's bound gain of each pair of columns, ``(D, D)`` symmetric (NaN: not a
    candidate), from ``fit_report_["additive"]``."""
    gains = np.full((D, D), np.nan)
    for key, value in report.get("gains", {}).items():
        cols = [int(c) for c in key.strip("()").split(",") if c.strip()]
        if len(cols) == 2:
            gains[cols[0], cols[1]] = gains[cols[1], cols[0]] = value
    return gains


class AdditiveView:
    """An additive VISH's one-input components against their inputs (mean ± 2 sd, the data's
    inputs as a rug) and, beside them, the pairs' bound gains as a heat map, the chosen pairs
    outlined. Drawn once (``plt.show()`` shows it).

    Parameters
    ----------
    model
        A VISH fitted by :func:`spherelab.selection.fit_additive`.
    X
        The training inputs (standardised), for the ranges and the rug.
    names
        The columns' names (default ``x0``, ``x1``, ...).
    """

    def __init__(self, model, X: np.ndarray, names=None) -> None:
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        D = X.shape[1]
        self.names = list(names) if names is not None else [f"x{j}" for j in range(D)]
        self.curves = component_curves(model, X)
        report = model.fit_report_["additive"]
        self.gains = pair_gains(report, D)
        self.chosen = [tuple(g) for g in report["groups"] if len(g) == 2]
        cols = min(D, 4)
        rows = -(-D // cols)
        width = min(2.3 * (cols + 1) + 0.6, 12.0)
        self.fig, axes = plt.subplots(rows, cols + 1, figsize=(width, 2.1 * rows + 0.4), dpi=capped_dpi(width),
                                      squeeze=False, gridspec_kw={"width_ratios": [1] * cols + [1.3]})
        for j in range(D):
            ax = axes[j // cols][j % cols]
            grid, mean, sd = self.curves.get(j, (None, None, None))
            if grid is not None:
                ax.fill_between(grid, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.25, lw=0)
                ax.plot(grid, mean, "C0", lw=1.5)
                ax.plot(X[:, j], np.full(X.shape[0], ax.get_ylim()[0]), "|", color="k", alpha=0.1, ms=6)
            ax.set_title(f"f({self.names[j]})", fontsize=9)
            ax.tick_params(labelsize=7)
        for j in range(D, rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        heat = axes[0][cols]
        shown = np.where(np.isfinite(self.gains), np.maximum(self.gains, 0.0), np.nan)
        image = heat.imshow(np.log10(1.0 + shown), cmap="viridis")
        for a, b in self.chosen:
            for r, c in ((a, b), (b, a)):
                heat.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="red", lw=1.5))
        heat.set_xticks(range(D), self.names, fontsize=7, rotation=90)
        heat.set_yticks(range(D), self.names, fontsize=7)
        heat.set_title("pairs: log10(1 + gain)\nchosen in red", fontsize=9)
        self.fig.colorbar(image, ax=heat, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
        for r in range(1, rows):
            axes[r][cols].set_visible(False)
        self.fig.tight_layout()


class BudgetExplorer(Selectable):
    """:func:`spherelab.fit` for the budget on the slider: every candidate it tried (its trial
    seconds against its validation NLPD, log time), the chosen one ringed, the test NLPD of the
    refitted choice in the status line. Each budget is fitted once, on a worker thread in a
    kernel, the next budget ahead — one budget's fit at a time, so that its seconds are its own.

    Parameters
    ----------
    X, y, Xte, yte
        Standardised training and test rows (the test rows only score the choice, after it).
    budgets
        The slider's seconds.
    """

    def __init__(self, X, y, Xte, yte, budgets=(1.0, 2.0, 5.0, 10.0)) -> None:
        import ipywidgets as widgets

        self.X, self.y, self.Xte, self.yte = X, y, Xte, yte
        self.budgets = tuple(float(b) for b in budgets)
        self.fits = Precomputer(self._compute, max_items=len(self.budgets))
        self._one_at_a_time = threading.Lock()
        self.seconds = widgets.SelectionSlider(options=self.budgets, value=self.budgets[0], description="budget s",
                                               continuous_update=False, style={"description_width": "initial"})
        self.status = widgets.Label()
        self.fitbar = FitBar()
        self.fig, self.ax = subplots(figsize=(8.5, 3.4))
        self.points = {kind: self.ax.plot([], [], marker, ms=6, ls="none", label=kind)[0]
                       for kind, marker in (("VISH", "o"), ("inducing points", "s"))}
        self.local = self.ax.plot([], [], "^", ms=6, ls="none", color="C2", label="+ neighbours")[0]
        self.ring = self.ax.plot([], [], "o", ms=14, mfc="none", mec="red", mew=1.5, label="chosen")[0]
        self.ax.set_xscale("log")
        self.ax.set_xlabel("trial fit time, s (log scale)")
        self.ax.set_ylabel("validation NLPD")
        self.ax.grid(alpha=0.3)
        self.ax.legend(fontsize=8, loc="upper right")
        self.fig.subplots_adjust(left=0.1, right=0.98, bottom=0.16, top=0.9)
        self.blit = BlitManager(self.fig, [*self.points.values(), self.local, self.ring, self.ax.title])
        self.seconds.observe(self.show, names="value")
        self.show()

    def widget(self):
        """The slider, the status line and the progress bar, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([self.seconds, self.status, self.fitbar.box])

    def _compute(self, seconds: float) -> dict:
        with self._one_at_a_time:  # a budget's fit alone on the cores: its seconds are its own
            model = fit_budget(self.X, self.y, seconds)
        mean, var = model.predict_y(self.Xte)
        nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (self.yte - mean) ** 2 / var))
        return {"seconds": seconds, "report": model.fit_report_["budget"], "test nlpd": nlpd}

    def wait(self) -> dict:
        """Block until the selected budget's fit is drawn; returns it."""
        seconds = self.seconds.value
        self._show(seconds, self.fits.get(seconds))
        return self.current

    def show(self, change=None) -> None:
        seconds = self._want = self.seconds.value
        if not self.fits.ready(seconds):
            self.fitbar.count(0, 1, f"spherelab.fit with {seconds:g} s")
        self.fits.when_ready(seconds, lambda fit: self._show(seconds, fit), self._failed, wait=self._wait)

    def _failed(self, err: BaseException) -> None:
        self.fitbar.close()
        self.status.value = f"the fit failed: {type(err).__name__}: {err}"

    def _show(self, seconds: float, fit: dict) -> None:
        if seconds != self._want:
            return
        self.fitbar.close()
        later = [b for b in self.budgets if b > seconds][:1]
        self.fits.ahead(later)
        tried = fit["report"]["tried"]
        for kind, line in self.points.items():
            rows = [t for t in tried if t["model"].startswith(kind) and "neighbours" not in t["model"]]
            line.set_data([t["seconds"] for t in rows], [t["validation nlpd"] for t in rows])
        rows = [t for t in tried if "neighbours" in t["model"]]
        self.local.set_data([t["seconds"] for t in rows], [t["validation nlpd"] for t in rows])
        chosen = next(t for t in tried if t["model"] == fit["report"]["chosen"]) if tried else None
        self.ring.set_data([chosen["seconds"]] if chosen else [], [chosen["validation nlpd"]] if chosen else [])
        finite = [t for t in tried if np.isfinite(t["validation nlpd"])]
        if finite:
            xs, ys = [t["seconds"] for t in finite], [t["validation nlpd"] for t in finite]
            pad = 0.08 * max(max(ys) - min(ys), 1e-3)
            self.ax.set_xlim(0.7 * max(min(xs), 1e-2), 1.4 * max(xs))
            self.ax.set_ylim(min(ys) - pad, max(ys) + pad)
        self.ax.set_title(f"spherelab.fit in {seconds:g} s: {len(tried)} candidates tried", fontsize=9)
        self.status.value = (f"chosen: {fit['report']['chosen']} ({fit['report']['why']}); its test NLPD after the "
                             f"refit on every row: {fit['test nlpd']:.3f}; the whole fit took "
                             f"{fit['report']['elapsed']:.1f} s")
        self.current = {**fit, "chosen": chosen}
        self.blit.full()
