r"""The best model for the seconds a user has: :func:`fit_budget` (``spherelab.fit``).

It holds out a part of the training rows (``validation``, at most 5 000 of them) and, for about
45 % of the budget, fits candidates of growing size on the rest: VISH at degrees 2, 3, ... (features
prior), inducing points at k-means centres (64, 128, ... of them; the collapsed bound, an SGPR), and
each of them with a nearest-neighbour correction of its residual
(:class:`~spherelab.models.NeighbourResidual`). A candidate is tried only when its time,
extrapolated from the last of its kind (VISH's as :math:`M^a`, the exponent the last two fits show;
inducing points' as :math:`P^2`), fits with its refit in the time left, and a kind is left after
two sizes in a row that do not improve its validation NLPD. Each one's validation NLPD (mean
negative log predictive density of the held-out rows) decides; the chosen configuration, among
those whose refit on every row fits in the time left, is then fitted again on all the training rows
with the rest of the budget as its limit. The held-out rows are training rows: no test row ever
reaches the choice. ``fit_report_["budget"]`` lists what was tried, its seconds and validation
NLPD, the choice and why, and the seconds spent loading the compiled kernels (``warm-up``).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .._validation import check_data, check_int, check_positive
from ..distributed import is_dask
from ..features import InducingPoints, kmeans_centres
from ..kernels import Matern
from ..linalg import NumericalFailure
from ..models import VISH, NeighbourResidual, OrthogonalSVGP, capped
from ..progress import FitProgress, check_progress
from ..sphere.special import cumulative_num_harmonics

__all__ = ["fit_budget", "warm"]

#: the refit's time as a multiple of the trial's, beyond the rows' ratio (another start, another path)
SAFETY = 1.1
#: sizes of a kind tried in a row without a better validation NLPD before the kind is left
PATIENCE = 2
#: the longest trial of an anytime candidate, as a fraction of the budget
QUARTER = 0.25
#: the fewest rows from which some are held out to choose
FEWEST = 40
#: the neighbours of the residual correction
NEIGHBOURS = 32

def _kernel(D: int) -> Matern:
    # the standardised rows' norms near 1 after the lift (the frontier's kernel)
    return Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))


def _nlpd(model, X: np.ndarray, y: np.ndarray) -> float:
    mean, var = model.predict_y(X)
    with np.errstate(all="ignore"):
        value = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))
    return value if np.isfinite(value) else np.inf


def _vish(L: int) -> Callable:
    def build(X, y, max_time, seed):
        return VISH(_kernel(X.shape[1]), L).fit(X, y, seed=seed, max_time=max_time)
    return build


def _points(P: int) -> Callable:
    def build(X, y, max_time, seed):
        Z = kmeans_centres(X, min(P, X.shape[0]), seed=seed)
        return OrthogonalSVGP(_kernel(X.shape[1]), InducingPoints(Z), 0).fit(X, y, seed=seed, max_time=max_time)
    return build


_warmed: list[bool] = []


def warm() -> float:
    """Compile, or load from Numba's disk cache, every kernel :func:`fit_budget`'s candidates
    use, by fitting each kind once on a few generated rows; once per process (later calls return
    0). Returns the seconds it took, so that no candidate's trial time holds a compilation (which
    would mislead the extrapolation of the next size's time)."""
    if _warmed:
        return 0.0
    start = time.perf_counter()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((48, 3))
    y = np.sin(X @ np.ones(3))
    # a few iterations of each candidate's fit run every kernel its fits run (run to convergence,
    # the inducing points' fit alone took 3 s: 280 evaluations that load nothing new)
    with capped():
        for model in (VISH(_kernel(3), 2).fit(X, y, seed=0, maxiter=3, lift_maxiter=3),
                      OrthogonalSVGP(_kernel(3), InducingPoints(kmeans_centres(X, 8, seed=0)), 0).fit(
                          X, y, seed=0, maxiter=3)):
            _nlpd(model, X, y)
            _nlpd(NeighbourResidual(model, 8, subsample=16).fit(X, y, fit_model=False, max_time=5.0), X, y)
    _warmed.append(True)
    return time.perf_counter() - start


class _Ladder:
    """The candidates of one kind, in growing size, with their times' extrapolation."""

    def __init__(self, kind: str, sizes, build, cost) -> None:
        self.kind, self.sizes, self.build, self.cost = kind, list(sizes), build, cost
        self.times: list[tuple[int, float]] = []
        self.best, self.stale = np.inf, 0

    def scored(self, nlpd: float) -> None:
        """A size's validation NLPD (the better of with and without neighbours): the ladder ends
        after ``PATIENCE`` sizes in a row that improve on none before them."""
        if nlpd < self.best - 1e-3:
            self.best, self.stale = nlpd, 0
        else:
            self.stale += 1
            if self.stale >= PATIENCE:
                self.sizes = []

    def next_time(self) -> float | None:
        """The next size's predicted seconds (None: no estimate yet, or nothing left)."""
        if not self.sizes:
            return None
        if not self.times:
            return 0.0
        (s1, t1), s = self.times[-1], self.sizes[0]
        if len(self.times) >= 2:
            (s0, t0) = self.times[-2]
            a = np.log(max(t1, 1e-3) / max(t0, 1e-3)) / np.log(self.cost(s1) / self.cost(s0))
            a = float(np.clip(a, 1.0, 3.0))
        else:
            a = 2.0
        return t1 * (self.cost(s) / self.cost(s1)) ** a


def fit_budget(X: Any, y: Any, seconds: float = 60.0, *, validation: float = 0.1, seed: int = 0,
               progress: bool | None = None):
    """Fit, within about ``seconds``, the model with the best validation NLPD (module docstring).

    Parameters
    ----------
    X, y
        Training rows ``(N, D)`` and targets ``(N,)``, standardised (``spherelab.datasets.Standardizer``).
    seconds
        The budget: the fit ends within about 10 % of it (a single candidate larger than the
        budget is never started; the smallest always is). The first call in a process first
        loads the compiled kernels (:func:`warm`: a few seconds, about half a minute on a machine
        where they were never compiled), inside these seconds; ``spherelab.warmup()`` does it ahead.
    validation
        The fraction of the rows held out to choose (at most 5 000 rows, at least 1).
    seed, progress
        The split's and the fits' seed; a progress bar (None: after a few seconds, interactively).

    Returns
    -------
    VISH, OrthogonalSVGP or NeighbourResidual
        Fitted on every row; ``fit_report_["budget"]`` says what was tried and why it was chosen.
    """
    if is_dask(X) or is_dask(y):
        raise TypeError("spherelab.fit holds rows out and fits several models: it needs X and y in memory (NumPy "
                        "arrays); for a Dask array fit a VISH, whose statistics stream over the blocks")
    X, y = check_data(X, y)
    seconds = check_positive(seconds, "seconds")
    validation = check_positive(validation, "validation")
    if not validation < 0.5:
        raise ValueError(f"validation must be a fraction in (0, 0.5), got {validation!r}")
    seed = check_int(seed, "seed", minimum=0)
    check_progress(progress)
    N = X.shape[0]
    start = time.perf_counter()
    if N < FEWEST:  # too few rows to hold some out: the smallest model, on every row
        with capped():
            model = _vish(2)(X, y, seconds, seed)
        report = dict(model.fit_report_ or {})
        report["budget"] = {"seconds": seconds, "elapsed": time.perf_counter() - start, "validation rows": 0,
                            "tried": [], "chosen": "VISH (degree 2)",
                            "why": f"{N} rows: too few to hold some out (at least {FEWEST})"}
        model.fit_report_ = report
        return model
    elapsed = lambda: time.perf_counter() - start  # noqa: E731
    warmup = warm()
    order = np.random.default_rng(seed).permutation(N)
    n_val = int(min(max(round(validation * N), 1), 5_000))
    Xf, yf, Xv, yv = X[order[n_val:]], y[order[n_val:]], X[order[:n_val]], y[order[:n_val]]
    D = X.shape[1]
    ladders = [_Ladder("VISH", range(2, 40), _vish, lambda L: float(cumulative_num_harmonics(L, D + 1))),
               _Ladder("inducing points", [64 * 2 ** k for k in range(12) if 64 * 2 ** k <= max(64, Xf.shape[0] // 4)],
                       _points, float)]
    tried: list[dict] = []
    scale = N / Xf.shape[0]  # the refit's rows against a trial's

    def reserve(t: float) -> float:
        # the refit on every row of this candidate or of the best so far, whichever may win
        best = min(tried, key=lambda c: c["validation nlpd"])["seconds"] if tried else 0.0
        return SAFETY * scale * max(t, best)

    def attempt(name, run, **keys) -> tuple[Any, float]:
        t0 = elapsed()
        try:
            model = run()
            score = _nlpd(model, Xv, yv)
        except NumericalFailure as why:  # a candidate that fails is recorded and passed over
            model, score, keys["failed"] = None, np.inf, str(why)
        spent = elapsed() - t0
        tried.append({"model": name, "seconds": spent + keys.pop("before", 0.0), "validation nlpd": score, **keys})
        bar.stage = name
        bar(tried[-1]["validation nlpd"])
        return model, spent

    bar = FitProgress(progress, "spherelab.fit", max_time=seconds, label="validation NLPD")
    try:
        with capped():  # candidates stop at their time limits by design
            local_time = 0.0
            while True:
                left = seconds - elapsed()
                options = sorted((lad.next_time(), i) for i, lad in enumerate(ladders) if lad.next_time() is not None)
                feasible = [(t, i) for t, i in options if t + reserve(t) <= left] if tried else options[:1]
                if not feasible:
                    break
                lad = ladders[feasible[0][1]]
                size = lad.sizes.pop(0)
                # anytime fits (inducing points) stop at a quarter of the budget, leaving room for
                # their neighbour correction and their refit, and for the next candidates
                room = (left - (1.0 + SAFETY * scale) * local_time) / (1.0 + SAFETY * scale)
                cap = max(min(room, QUARTER * seconds), 1e-3) if tried else None
                name = f"{lad.kind} ({'degree' if lad.kind == 'VISH' else 'P ='} {size})"
                model, t_fit = attempt(name, lambda: lad.build(size)(Xf, yf, cap, seed), kind=feasible[0][1],
                                       size=size, local=False)
                lad.times.append((size, t_fit))
                # the correction's time limit leaves room for its refit and this model's
                allowance = (seconds - elapsed() - reserve(t_fit)) / (1.0 + SAFETY * scale)
                if model is not None and allowance > 0.02 * seconds:
                    def corrected(model=model, limit=min(allowance, QUARTER * seconds)):
                        return NeighbourResidual(model, NEIGHBOURS, seed=seed).fit(Xf, yf, fit_model=False,
                                                                                     max_time=limit)

                    _, local_time = attempt(name + " + neighbours", corrected, kind=feasible[0][1], size=size,
                                            local=True, before=t_fit)
                    tried[-1]["local seconds"] = local_time
                kind = feasible[0][1]
                lad.scored(min(t["validation nlpd"] for t in tried if t["size"] == size and t["kind"] == kind))
        left = seconds - elapsed()
        fits = [t for t in tried if np.isfinite(t["validation nlpd"]) and t["seconds"] * scale <= left]
        pool = fits or [min((t for t in tried if np.isfinite(t["validation nlpd"])), key=lambda t: t["seconds"],
                            default=tried[0])]
        best = min(pool, key=lambda t: t["validation nlpd"])
        why = ("the lowest validation NLPD among the candidates whose refit on every row fits in the "
               f"{left:.1f} s left" if fits else "no candidate's refit fits in the time left: the fastest")
        bar.stage = "refit: " + best["model"]
        lad = ladders[best["kind"]]
        local = SAFETY * scale * best.get("local seconds", 0.0)
        model = lad.build(best["size"])(X, y, max(left / SAFETY - local, 1e-3), seed)
        if best["local"]:
            try:
                model = NeighbourResidual(model, NEIGHBOURS, seed=seed).fit(
                    X, y, fit_model=False, max_time=max(seconds - elapsed(), 1e-3) / SAFETY)
            except NumericalFailure as failure:  # the global model alone, refitted, still stands
                why += f"; its neighbours' refit on every row failed ({failure}), so the global model is kept"
    finally:
        bar.close()
    report = dict(getattr(model, "fit_report_", None) or {})
    report["budget"] = {"seconds": seconds, "elapsed": elapsed(), "warm-up": warmup, "validation rows": n_val,
                        "tried": [{k: t[k] for k in ("model", "seconds", "validation nlpd", "failed") if k in t}
                                  for t in tried],
                        "chosen": best["model"], "why": why}
    model.fit_report_ = report
    return model
