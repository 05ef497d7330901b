"""Accuracy per second, live: spherelab's models' test NLPD against their fit's seconds on one data set.

:func:`frontier_curves` samples each model's fit along the way (the parameters at each L-BFGS-B
iterate, through ``fit``'s ``callback``; their test NLPD computed afterwards, outside the fit's clock):
VISH one fit per degree, spherical harmonics with orthogonal inducing points, and inducing points
alone (an SGPR on the sphere's kernel). :class:`FrontierExplorer` draws them for a set and a time
budget chosen with controls, the other sets' curves computed ahead on a background thread.
The full-size frontier with GPflow and GPyTorch beside them is a benchmark
(``benchmarks/speed/frontier.py``); :func:`recorded_figure` shows its recorded figure.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from ..features import InducingPoints, kmeans_centres
from ..kernels import Matern
from ..likelihoods import Gaussian
from ..models import VISH, OrthogonalSVGP
from ..models.report import capped
from ..sphere import cumulative_num_harmonics
from ..widgets import BlitManager, subplots
from .background import Precomputer, Selectable
from .fitbar import FitBar

__all__ = ["frontier_curves", "FrontierExplorer", "recorded_figure", "CONTENDERS"]

#: the contenders of :func:`frontier_curves`, in the order they are drawn
CONTENDERS = ("VISH, features prior", "VISH, kernel prior", "harmonics + orthogonal points", "inducing points")


def _kernel(D: int):
    # the inputs are standardised: the lift's input_scale sqrt(D) keeps the rows' norms near 1
    return Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))


def _scores(yte, mean, var) -> tuple[float, float]:
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yte - mean) ** 2 / var))
    return nlpd, float(np.sqrt(np.mean((yte - mean) ** 2)))


def _thin(samples: list, keep: int = 12) -> list:
    """At most ``keep`` samples, spread evenly in log-time, the last always kept."""
    if len(samples) <= keep:
        return samples
    t = np.log(np.maximum([s[0] for s in samples], 1e-3))
    marks = np.linspace(t[0], t[-1], keep)
    index = sorted({int(np.argmin(np.abs(t - m))) for m in marks} | {len(samples) - 1})
    return [samples[i] for i in index]


def _vish_curve(X, y, Xte, yte, budget, prior, seed) -> list:
    size = lambda L: cumulative_num_harmonics(L, X.shape[1] + 1)  # noqa: E731
    out, spent, L, last = [], 0.0, 1, 0.0
    # the next degree is fitted only if its time, extrapolated as M^3 (the algebra, the steepest part of
    # a fit), fits: the budget bounds the wait; degree 1's fit may carry one-time costs (compiled
    # kernels loading), so degree 2 is always tried
    while spent < budget and (L <= 2 or spent + last * (size(L) / size(L - 1)) ** 3 <= budget):
        t0 = time.perf_counter()
        model = VISH(_kernel(X.shape[1]), L, Gaussian(1.0), prior=prior).fit(X, y, seed=seed)
        last = time.perf_counter() - t0
        out.append((last, *_scores(yte, *model.predict_y(Xte))))
        spent, L = spent + last, L + 1
    return out


def _recorded(model, X, y, Xte, yte, budget, offset, seed) -> list:
    """``model.fit`` with its iterates recorded and stopped at ``budget`` (``offset`` seconds spent
    before it); each iterate's predictions after the fit, outside its clock."""
    snaps, t0 = [], time.perf_counter()

    def record(theta):
        snaps.append((offset + time.perf_counter() - t0, theta))
        return snaps[-1][0] > budget

    model.fit(X, y, maxiter=1000, seed=seed, callback=record)
    out = []
    for t, theta in _thin(snaps):
        model.set_parameter_vector(theta, model.collapsed_names)
        model.optimal_q(X, y)
        out.append((t, *_scores(yte, *model.predict_y(Xte))))
    return out


def frontier_curves(X, y, Xte, yte, budget: float = 20.0, inducing: int = 64, degree: int = 2,
                    contenders=CONTENDERS, seed: int = 0, progress=None) -> dict[str, list[tuple[float, float, float]]]:
    """Each contender's ``(seconds, test NLPD, test RMSE)`` samples along its fit, stopped near
    ``budget`` seconds. A fit's own warnings (an early stop, a degenerate hyper-parameter) are not
    printed, as in :func:`~spherelab.explore.degree_sweep`: the curves are what each fit reached.

    Parameters
    ----------
    X, y, Xte, yte
        Standardised training and test rows ``(N, D)``, ``(N,)``.
    budget
        Seconds per contender (VISH: its degrees' fits together; a degree is started only when
        its time, extrapolated from the last, fits).
    inducing
        P, the inducing variables of the two inducing-point models (the harmonics up to
        ``degree`` count towards the hybrid's P).
    contenders
        A subset of :data:`CONTENDERS`.
    progress
        ``progress(i, name)`` before the i-th contender's fit (a status line), or None.
    """
    X, y, Xte, yte = (np.asarray(a, dtype=np.float64) for a in (X, y, Xte, yte))
    unknown = [c for c in contenders if c not in CONTENDERS]
    if unknown:
        raise ValueError(f"contenders must be among {CONTENDERS}, got {unknown}")
    curves = {}
    for i, name in enumerate(contenders):
        if progress is not None:
            progress(i, name)
        with warnings.catch_warnings(), capped():  # a fit's report (fit_report_) is kept, not printed mid-figure
            warnings.simplefilter("ignore", RuntimeWarning)
            curves[name] = _curve(name, X, y, Xte, yte, budget, inducing, degree, seed)
    return curves


def _curve(name, X, y, Xte, yte, budget, inducing, degree, seed) -> list:
    if name.startswith("VISH"):
        return _vish_curve(X, y, Xte, yte, budget, name.split(", ")[1].split()[0], seed)
    t0 = time.perf_counter()
    if name == "inducing points":
        kernel = _kernel(X.shape[1])
        Z = kmeans_centres(X, min(inducing, X.shape[0]), seed=seed)  # as InducingPointRegressor starts
        model = OrthogonalSVGP(kernel, InducingPoints(Z), 0, Gaussian(1.0))
        return _recorded(model, X, y, Xte, yte, budget, time.perf_counter() - t0, seed)
    vish = VISH(_kernel(X.shape[1]), degree, Gaussian(1.0), prior="kernel").fit(X, y, seed=seed)
    first = [(time.perf_counter() - t0, *_scores(yte, *vish.predict_y(Xte)))]
    model = OrthogonalSVGP.from_vish(vish, max(inducing - vish.features.num_features, 1))
    return first + _recorded(model, X, y, Xte, yte, budget, time.perf_counter() - t0, seed)


class FrontierExplorer(Selectable):
    """A data set and a time budget chosen with controls; each contender's test NLPD against its
    fit's seconds up to that budget (log scale), the NLPD of the model each holds at the budget in
    the status line.

    Parameters
    ----------
    sets
        ``{name: (X, y, Xte, yte)}``, standardised.
    budget
        The largest time budget (each contender's curve is computed once to it; the slider shows
        a prefix).
    inducing, degree
        As in :func:`frontier_curves`.
    """

    def __init__(self, sets: dict, budget: float = 20.0, inducing: int = 64, degree: int = 2) -> None:
        import ipywidgets as widgets

        self.sets, self.budget, self.inducing, self.degree = sets, float(budget), int(inducing), int(degree)
        self.curves = Precomputer(self._compute, max_items=len(sets))
        opts = dict(continuous_update=False, style={"description_width": "initial"})  # labels read whole
        self.data = widgets.Dropdown(options=list(sets), description="data set")
        self.seconds = widgets.FloatLogSlider(value=self.budget, base=10, min=-1, max=np.log10(self.budget),
                                              description="time budget s", readout_format=".2g", **opts)
        self.status = widgets.Label()
        self.fitbar = FitBar()
        self.fig, self.ax = subplots(figsize=(8.5, 3.9))
        self.lines = {c: self.ax.plot([], [], "o-", ms=3, lw=1.5, label=c)[0] for c in CONTENDERS}
        self.ax.set_xscale("log")
        self.ax.set_xlabel("fit time, s (log scale)")
        self.ax.set_ylabel("test NLPD (lower is better)")
        self.ax.grid(alpha=0.3)
        self.fig.subplots_adjust(left=0.1, right=0.98, bottom=0.27, top=0.91)  # the legend below the axes
        self.blit = BlitManager(self.fig, [*self.lines.values(), self.ax.title])
        self.data.observe(self.show, names="value")
        self.seconds.observe(self.show, names="value")
        # the first set's fits take up to 4 x budget: computed on a worker thread in a kernel (the
        # progress bar says which fit runs), so the cell returns at once; wait() blocks for them
        self.show()

    def widget(self):
        """The controls, the status line and the progress bar, for ``display``."""
        import ipywidgets as widgets

        return widgets.VBox([widgets.HBox([self.data, self.seconds]), self.status, self.fitbar.box])

    def wait(self) -> dict:
        """Block until the selected set's curves are computed and drawn; returns them (for scripts
        and a notebook's next cell)."""
        name = self.data.value
        self._show(name, self.curves.get(name))
        return self.current

    def _compute(self, name: str) -> dict:
        def progress(i, contender):
            if self.data.value == name:
                self.fitbar.count(i, len(CONTENDERS), f"fitting {contender} on {name} "
                                  f"({i + 1} of {len(CONTENDERS)}, up to {self.budget:g} s each)")

        return frontier_curves(*self.sets[name], budget=self.budget, inducing=self.inducing, degree=self.degree,
                               progress=progress)

    def bound(self) -> float:
        """Seconds a new set's curves take at most, roughly: every contender's budget, plus the
        predictions at its recorded iterates (outside the fits' clocks)."""
        return 1.5 * len(CONTENDERS) * self.budget

    def best_within(self, curves: dict, seconds: float) -> dict[str, float]:
        """Each contender's test NLPD at ``seconds``: that of the model it holds then, its last
        sample by ``seconds`` (NaN if none) — anytime, never the best among its samples."""
        return {c: next((v for t, v, _ in reversed(s) if t <= seconds), float("nan")) for c, s in curves.items()}

    def show(self, change=None) -> None:
        """Draw the selected set's curves up to the selected budget (after their computation, on a
        worker thread in a kernel, when the set is new)."""
        name = self._want = self.data.value
        if not self.curves.ready(name):
            self.fitbar.count(0, len(CONTENDERS), f"fitting every contender on {name} (up to {self.budget:g} s each)")
            shown = getattr(self, "current", {}).get("name")
            if shown is not None:  # the figure keeps the previous set until the new one is ready
                self.status.value = f"showing {shown} while {name}'s fits run (at most {self.bound():.0f} s)"
        self.curves.when_ready(name, lambda c: self._show(name, c), self._failed, wait=self._wait)

    def _failed(self, err: BaseException) -> None:
        self.fitbar.close()
        self.status.value = f"a fit failed: {type(err).__name__}: {err}"

    def _show(self, name: str, curves: dict) -> None:
        if name != self._want:
            return
        self.fitbar.close()
        self.curves.ahead([s for s in self.sets if s != name])
        first = min((s[0][0] for s in curves.values() if s), default=np.inf)
        if np.isfinite(first) and first > 10 ** self.seconds.max:
            # a loaded machine: no contender held a model within the budget; the slider reaches
            # the first one's time (setting it redraws through show)
            self.seconds.max = float(np.log10(1.05 * first))
            self.seconds.value = 1.05 * first
            return
        limit = self.seconds.value
        shown = {c: [(t, v) for t, v, _ in curves.get(c, []) if t <= limit] for c in CONTENDERS}
        for c, line in self.lines.items():
            line.set_data([t for t, _ in shown[c]], [v for _, v in shown[c]])
        best = self.best_within(curves, limit)
        reached = [c for c in CONTENDERS if shown[c]]
        missing = [c for c in CONTENDERS if not shown[c]]
        layout = (name, tuple(reached), self._limits(curves, shown, best))
        self.ax.set_title(f"{name}: each model's test NLPD by {limit:.2g} s of fitting", fontsize=9)
        lead = min(reached, key=best.get, default=None)
        self.status.value = ("no fit has finished an iteration yet" if lead is None else
                             f"best at {limit:.2g} s: {lead}, test NLPD {best[lead]:.3f}"
                             + (f"; not reached in {limit:.2g} s: {', '.join(missing)}" if missing else ""))
        self.current = dict(name=name, curves=curves, best=best, lead=lead, missing=missing)
        if getattr(self, "_layout", None) != layout:  # axes or legend change: a full redraw
            self._layout = layout
            # below the axes, where it covers no point
            self.ax.legend(handles=[self.lines[c] for c in reached], loc="upper center", bbox_to_anchor=(0.5, -0.2),
                           ncol=4, fontsize=8, frameon=False)
            self.blit.full()
        else:
            self.blit.update()

    def _limits(self, curves: dict, shown: dict, best: dict) -> tuple:
        """Set the axes to hold every point shown up to a high quantile, and always each contender's
        best within the budget (the points the status line and a notebook's sentence cite); the
        time axis spans the whole budget. Returns the limits, to tell when they changed."""
        every = [t for s in curves.values() for t, _, _ in s]
        values = np.array([v for s in shown.values() for _, v in s])
        cited = [v for v in best.values() if np.isfinite(v)]
        xlim = (0.8 * max(min(every, default=1.0), 1e-2), 1.25 * max(self.budget, max(every, default=1.0)))
        if values.size:
            low, top = float(values.min()), max(float(np.quantile(values, 0.9)), max(cited))
            pad = 0.05 * max(top - low, 1e-3)
            ylim = (low - pad, top + pad)
        else:
            ylim = self.ax.get_ylim()
        self.ax.set_xlim(*xlim)
        self.ax.set_ylim(*ylim)
        return (*np.round(xlim, 12), *np.round(ylim, 12))


def recorded_figure(name: str = "frontier", start: str | Path = "."):
    """The recorded benchmark figure ``benchmarks/figures/NAME.svg`` of the repository holding
    ``start`` (searched upwards), as an ``IPython.display.HTML`` image scaled down to the output
    area's width where that is narrower; ``None`` outside a checkout."""
    import base64

    from IPython.display import HTML

    for folder in [Path(start).resolve(), *Path(start).resolve().parents]:
        path = folder / "benchmarks" / "figures" / f"{name}.svg"
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            return HTML(f'<img src="data:image/svg+xml;base64,{data}" alt="{name}: the recorded benchmark figure" '
                        'style="max-width: 100%; height: auto">')
    return None
