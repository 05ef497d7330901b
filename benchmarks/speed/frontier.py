"""The frontier: test NLPD and RMSE against wall time on real data, every contender in one run.

    python benchmarks/speed/frontier.py --sets power --splits 0 --budget 120           # spherelab only
    .venv-bench/bin/python benchmarks/speed/frontier.py --sets kin8nm power protein --splits 0 1 2 3 4

For each UCI set and standard split (inputs and targets standardised with the training statistics)
each contender's fit is sampled along the way: the parameters at about a dozen moments, their test
NLPD and RMSE computed afterwards, outside the fit's clock. Contenders, with the same total number of
inducing variables P where they have any (``--inducing``; default per set):

* spherelab VISH, kernel and features priors: one fit per degree L (the curve is over L);
* the hybrid: VISH at degree ``--degree`` (its u), then :meth:`OrthogonalSVGP.from_vish` with P - M
  orthogonal inputs chosen by greedy conditional variance, fitted on the collapsed bound;
* the hybrid sized by its time budget (:func:`spherelab.selection.fit_hybrid`, ``time_budget`` the
  fit's budget): one sample, at its end;
* spherelab's collapsed inducing-point model (an SGPR on the sphere's kernel), P inputs started at
  the rows of greedy conditional variance, or at k-means centres (``spherelab.features.kmeans_centres``,
  as the GPflow and GPyTorch peers start theirs);
* :func:`spherelab.fit` given 10, 30 and 60 s: one sample per budget, the model it returns;
* GPflow's SGPR (L-BFGS-B) and SVGP, GPyTorch's SVGP (Adam, batches of 256 and 1 024), VNNGP and
  exact GP (a Matérn-3/2 ARD kernel, and an additive one: a Matérn-3/2 per input; on the sets whose
  N x N matrices fit in memory) (``frontier_peers.py``; skipped where the peers are not installed).

Each fit stops at ``--budget`` seconds. The output: one table per set and split (every sample), then
"time to reach SGPR's final NLPD" per contender with the spread over splits. No result is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from frontier_peers import NotRun, thin  # noqa: E402

#: per set: (the hybrid's degree, the total inducing variables P): P as the earlier peer runs
#: (RESULTS, "VISH against GPflow and GPyTorch"), the degree leaving most of P to orthogonal points
DEFAULTS = {"kin8nm": (2, 210), "power": (4, 540), "protein": (2, 275)}


class Timeline:
    """A fit's clock with the evaluations taken out: :meth:`paused` blocks do not count."""

    def start(self) -> None:
        self.t0, self.off = time.perf_counter(), 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0 - self.off

    @contextlib.contextmanager
    def paused(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.off += time.perf_counter() - t


def load(name: str, split: int):
    data = Path(os.environ.get("SPHERELAB_DATA", HERE.parents[2] / "shared" / "data"))
    Xtr, ytr, Xte, yte = sl.datasets.load_uci(name, split, data_dir_=data)
    st = sl.datasets.Standardizer().fit(Xtr, ytr)
    return (*st.transform(Xtr, ytr), *st.transform(Xte, yte))


def scores(yte: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[float, float]:
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yte - mean) ** 2 / var))
    return nlpd, float(np.sqrt(np.mean((yte - mean) ** 2)))


def _kernel(D: int):
    return sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))


def vish_curve(data, budget, timeline, seed, prior) -> tuple[list, str]:
    X, y, Xte, yte = data
    out, spent, L, times = [], 0.0, 1, []
    size = lambda L: sl.cumulative_num_harmonics(L, X.shape[1] + 1)  # noqa: E731

    def next_fits() -> bool:
        # degrees 1 and 2 always (degree 1's time carries one-time costs); then the next degree only
        # if its time, extrapolated as M^a with the exponent the last two fits show (1..3), fits
        if L <= 2:
            return spent < budget
        a = np.clip(np.log(max(times[-1], 1e-9) / max(times[-2], 1e-9)) / np.log(size(L - 1) / size(L - 2)), 1, 3)
        return spent + times[-1] * (size(L) / size(L - 1)) ** a <= budget

    while next_fits():
        timeline.start()
        model = sl.VISH(_kernel(X.shape[1]), L, prior=prior).fit(X, y, seed=seed)
        times.append(timeline.now())
        out.append((times[-1], model.predict_y(Xte)))
        spent, L = spent + times[-1], L + 1
    return out, f"prior {prior}, L = 1..{L - 1}"


def _recorded_fit(model, X, y, Xte, budget, timeline, start: float = 0.0) -> list:
    """``model.fit`` (the collapsed bound) with L-BFGS-B's iterates recorded and the fit stopped at the
    budget (its ``callback``); then each recorded iterate's predictions (q re-solved, outside the clock)."""
    snaps = []

    def record(theta):
        snaps.append((start + timeline.now(), theta))
        return start + timeline.now() > budget

    model.fit(X, y, maxiter=1000, callback=record)
    out = []
    for t, x in thin(snaps):
        model.set_parameter_vector(x, model.collapsed_names)
        model.optimal_q(X, y)
        out.append((t, model.predict_y(Xte)))
    return out


def hybrid_curve(data, budget, timeline, seed, degree, P) -> tuple[list, str]:
    X, y, Xte, yte = data
    timeline.start()
    vish = sl.VISH(_kernel(X.shape[1]), degree, prior="kernel").fit(X, y, seed=seed)
    t_vish = timeline.now()
    with timeline.paused():
        first = [(t_vish, vish.predict_y(Xte))]
    M = vish.features.num_features
    timeline.start()
    model = sl.OrthogonalSVGP.from_vish(vish, max(P - M, 1), orthogonal_inputs="greedy")
    return first + _recorded_fit(model, X, y, Xte, budget, timeline, t_vish), f"L = {degree} (M = {M}) + K = {P - M}"


def budget_point(data, budget, timeline, seed) -> tuple[list, str]:
    """:func:`spherelab.selection.fit_hybrid` given the whole budget: (L, K) its own choice; one sample."""
    X, y, Xte, yte = data
    timeline.start()
    model = sl.selection.fit_hybrid(_kernel(X.shape[1]), X, y, time_budget=budget, seed=seed)
    t = timeline.now()
    return [(t, model.predict_y(Xte))], (f"time_budget = {budget:g} s: L = {model.features.max_degree} "
                                         f"(M = {model.features.num_features}) + K = {model.num_orthogonal}")


#: the budgets :func:`spherelab.fit` is given as a contender (those within ``--budget``)
FIT_SECONDS = (10.0, 30.0, 60.0)


def budget_fits(data, budget, timeline, seed) -> tuple[list, str]:
    """:func:`spherelab.fit` given each of :data:`FIT_SECONDS`: one sample per budget, the model it
    returns (its own choice, on its own held-out training rows)."""
    X, y, Xte, yte = data
    out, chosen = [], []
    for seconds in (s for s in FIT_SECONDS if s <= budget):
        timeline.start()
        model = sl.fit(X, y, seconds=seconds, seed=seed, progress=False)
        out.append((timeline.now(), model.predict_y(Xte)))
        chosen.append(f"{seconds:g} s: {model.fit_report_['budget']['chosen']}")
    return out, "; ".join(chosen)


def points_curve(data, budget, timeline, seed, P, inputs="greedy") -> tuple[list, str]:
    X, y, Xte, yte = data
    timeline.start()
    kernel = _kernel(X.shape[1])
    if inputs == "kmeans":
        Z = sl.features.kmeans_centres(X, P, seed=seed)
    else:
        Z = X[sl.features.greedy_variance(kernel, X[: 20_000], P)]
    model = sl.OrthogonalSVGP(kernel, sl.InducingPoints(Z), 0)
    return _recorded_fit(model, X, y, Xte, budget, timeline, 0.0), f"M = {P}, {inputs} inputs"


def contenders(args, name: str):
    degree, P = DEFAULTS[name]
    degree, P = args.degree or degree, args.inducing or P
    import frontier_peers as peers

    return {
        "spherelab VISH (kernel prior)": lambda d, b, tl, s: vish_curve(d, b, tl, s, "kernel"),
        "spherelab VISH (features prior)": lambda d, b, tl, s: vish_curve(d, b, tl, s, "features"),
        "spherelab hybrid": lambda d, b, tl, s: hybrid_curve(d, b, tl, s, degree, P),
        "spherelab hybrid (time budget)": lambda d, b, tl, s: budget_point(d, b, tl, s),
        "spherelab inducing points": lambda d, b, tl, s: points_curve(d, b, tl, s, P),
        "spherelab inducing points (k-means)": lambda d, b, tl, s: points_curve(d, b, tl, s, P, "kmeans"),
        "GPflow SGPR": lambda d, b, tl, s: peers.gpflow_sgpr(d, P, b, tl, s),
        "GPflow SVGP": lambda d, b, tl, s: peers.gpflow_svgp(d, P, b, tl, s),
        "GPyTorch SVGP (256)": lambda d, b, tl, s: peers.gpytorch_svgp(d, P, b, tl, s, 256),
        "GPyTorch SVGP (1024)": lambda d, b, tl, s: peers.gpytorch_svgp(d, P, b, tl, s, 1024),
        "GPyTorch VNNGP": lambda d, b, tl, s: peers.gpytorch_vnngp(d, 256, b, tl, s),
        "spherelab.fit": lambda d, b, tl, s: budget_fits(d, b, tl, s),
        "GPyTorch exact GP (Matérn-3/2 ARD)": lambda d, b, tl, s: peers.gpytorch_exact(d, b, tl, s),
        "GPyTorch exact GP (additive)": lambda d, b, tl, s: peers.gpytorch_exact(d, b, tl, s, additive=True),
    }


def warm_up() -> None:
    """One tiny fit of each spherelab model: the kernels' one-time loading is not timed."""
    X, y = sl.datasets.synthetic_regression(300, 3, seed=0)
    vish = sl.VISH(_kernel(3), 2, prior="kernel").fit(X, y)
    sl.OrthogonalSVGP.from_vish(vish, 4).fit(X, y, maxiter=3).predict_y(X[:5])
    sl.OrthogonalSVGP(_kernel(3), sl.InducingPoints(X[:5]), 0).fit(X, y, maxiter=3).predict_y(X[:5])
    sl.warmup()  # and spherelab.fit's candidates


def first_reaching(curve: list, target: float) -> float | None:
    return next((t for t, nlpd, _ in curve if nlpd <= target), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="*", default=["kin8nm", "power", "protein"], choices=list(DEFAULTS))
    parser.add_argument("--splits", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per contender's fit")
    parser.add_argument("--only", nargs="*", help="contenders whose names contain one of these words")
    parser.add_argument("--degree", type=int, help="the hybrid's degree (default per set)")
    parser.add_argument("--inducing", type=int, help="P, the total inducing variables (default per set)")
    args = parser.parse_args()
    print(f"machine: {describe()}\nbudget {args.budget:g} s per fit\n", flush=True)
    warm_up()
    for name in args.sets:
        reached: dict[str, list] = {}
        for split in args.splits:
            Xtr, ytr, Xte, yte = load(name, split)
            print(f"### {name}, split {split}: N = {Xtr.shape[0]:,}, {Xtr.shape[1]} inputs, {Xte.shape[0]:,} "
                  "test rows\n\n| contender | setting | fit s | test NLPD | test RMSE |\n| --- | --- | --- | --- | --- |",
                  flush=True)
            curves = {}
            for label, run in contenders(args, name).items():
                if args.only and not any(w.lower() in label.lower() for w in args.only):
                    continue
                try:
                    samples, note = run((Xtr, ytr, Xte, yte), args.budget, Timeline(), split)
                except (ImportError, NotRun) as err:
                    print(f"| {label} | not run: {err} | | | |", flush=True)
                    continue
                except Exception as err:  # one contender's failure is reported, the others still run
                    print(f"| {label} | failed: {type(err).__name__}: {str(err)[:120]} | | | |", flush=True)
                    continue
                curves[label] = [(t, *scores(yte, *pred)) for t, pred in samples]
                for t, nlpd, rmse in curves[label]:
                    print(f"| {label} | {note} | {t:.2f} | {nlpd:.4f} | {rmse:.4f} |", flush=True)
            ref = curves.get("GPflow SGPR")
            target = ref[-1][1] if ref else None
            for label, curve in curves.items():
                reached.setdefault(label, []).append(first_reaching(curve, target) if target is not None else None)
            print(f"\nSGPR's final test NLPD: {target if target is None else f'{target:.4f}'}\n", flush=True)
        print(f"### {name}: seconds to reach GPflow SGPR's final test NLPD (per split; '-': never)\n\n"
              "| contender | " + " | ".join(f"split {s}" for s in args.splits) + " |\n| --- |"
              + " --- |" * len(args.splits))
        for label, times in reached.items():
            print(f"| {label} | " + " | ".join("-" if t is None else f"{t:.1f}" for t in times) + " |", flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
