"""Phase-truncated against full harmonics where Eleftheriadis, Richards & Hensman say phases help:
many inputs, few directions that matter, high frequency along them.

Data: x ~ N(0, I_D) in D dimensions (default 32), y = sin(a w1.x) + cos(b w2.x) / 2 + noise (sd
0.1), w1, w2 random orthonormal directions (a fresh pair per seed); inputs and targets
standardised with the training statistics. On the lifted sphere S^D (d = D + 1) the full
harmonics up to degree 2 already number 1 + d + N(2, d) (594 at D = 32): no budget of that size
reaches degree 3, while the function varies at high frequency along two directions. The phase
features keep ``--phases`` orthonormalised zonal functions per degree up to ``--degree`` (574 at
the defaults), their directions trained with the lift.

Models: VISH with either feature set, both priors, and the continuous-depth kernel
(``PolynomialDecay``, Eleftheriadis et al. eq. 15, beta learned) or the arc-cosine kernel of order
1; VISH's default fit (the lift stage, directions included, on at most ``--lift-subsample`` rows
for at most ``--lift-maxiter`` L-BFGS-B steps, then the spectrum and noise; with trainable
directions these use at most half the rows and SciPy's stopping rule, and the spectrum and noise
are fitted on the other rows), and for the phases also the lift's rule for fixed features
(``lift_ftol=1e-4``), which stops the directions after a few steps. Test RMSE and NLPD on the
standardised targets and the learned noise variance (the targets' true one is about 0.016), mean
+- sd over seeds.

    .venv/bin/python benchmarks/paper/phases_synthetic.py [--dims 32] [--seeds 3] [--degree 10] [--phases 60]
        [--arccos-phases 112] [--kernels depth arccos] [--n 12000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402


def data(D: int, n: int, n_test: int, seed: int, a: float = 1.0, b: float = 0.7):
    rng = np.random.default_rng(seed)
    w1, w2 = np.linalg.qr(rng.normal(size=(D, 2)))[0].T
    X = rng.normal(size=(n + n_test, D))
    y = np.sin(a * X @ w1) + 0.5 * np.cos(b * X @ w2) + 0.1 * rng.normal(size=n + n_test)
    st = sl.datasets.Standardizer().fit(X[:n], y[:n])
    return (*st.transform(X[:n], y[:n]), *st.transform(X[n:], y[n:]))


def kernel(name: str, D: int, degree: int, beta: float):
    scale = np.full(D, np.sqrt(D))  # standardised inputs: rows of norm ~ 1 after the lift's scaling
    if name == "depth":
        return sl.kernels.PolynomialDecay(D + 1, beta, max_degree=degree, input_scale=scale)
    return sl.kernels.ArcCosine(1, input_scale=scale)


def run(kind: str, prior: str, kname: str, seed: int, args, ftol: float | None) -> tuple:
    X, y, Xt, yt = data(args.dims, args.n, args.n_test, seed)
    d = args.dims + 1
    if kind == "phases":
        # the arc-cosine kernel has no odd levels above 1: more phases per kept level, a similar M
        phases = args.phases if kname == "depth" else args.arccos_phases
        features, L = sl.PhaseTruncatedHarmonics(d, args.degree, phases, seed=seed), args.degree
    else:
        features, L = sl.HarmonicFeatures(args.full_degree, dim=d), args.full_degree
    model = sl.VISH(kernel(kname, args.dims, L, args.beta), None, sl.likelihoods.Gaussian(0.1), features=features, prior=prior)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.ConvergenceWarning)  # the paper's fixed budgets
        model.fit(X, y, lift_subsample=args.lift_subsample, lift_maxiter=args.lift_maxiter, lift_ftol=ftol,
                  seed=seed)
    mean, var = model.predict_y(Xt)
    seconds = time.perf_counter() - t
    rmse = float(np.sqrt(np.mean((mean - yt) ** 2)))
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yt - mean) ** 2 / var))
    return rmse, nlpd, model.likelihood.variance, model.lift_result.nit, seconds, model.features.num_features


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=32)
    parser.add_argument("--n", type=int, default=12_000)
    parser.add_argument("--n-test", type=int, default=5_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--degree", type=int, default=10, help="the phase features' largest degree")
    parser.add_argument("--phases", type=int, default=60, help="phases kept per degree")
    parser.add_argument("--arccos-phases", type=int, default=112, help="phases per kept level, arc-cosine")
    parser.add_argument("--full-degree", type=int, default=2, help="the full harmonics' largest degree")
    parser.add_argument("--kernels", nargs="+", default=["depth", "arccos"], choices=["depth", "arccos"])
    parser.add_argument("--priors", nargs="+", default=["features", "kernel"], choices=["features", "kernel"])
    parser.add_argument("--beta", type=float, default=3.0, help="the continuous-depth kernel's initial beta")
    parser.add_argument("--lift-subsample", type=int, default=20_000)
    parser.add_argument("--lift-maxiter", type=int, default=150)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"D = {args.dims}, {args.n:,} training / {args.n_test:,} test rows, seeds 0..{args.seeds - 1}; phases: "
          f"degree {args.degree} x at most {args.phases}; full: degree {args.full_degree}; lift subsample "
          f"{args.lift_subsample:,}, {args.lift_maxiter} L-BFGS-B steps; initial beta {args.beta:g}\n")
    print("| kernel | prior | features | lift stop | M | test RMSE | test NLPD | noise variance | lift steps "
          "| fit + predict s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    names = {"depth": "continuous depth", "arccos": "arc-cosine, order 1"}
    variants = [("full", None), ("phases", 1e-4), ("phases", None)]
    for kname in args.kernels:
        for prior in args.priors:
            for kind, ftol in variants:
                rows = np.array([run(kind, prior, kname, s, args, ftol) for s in range(args.seeds)])
                per = args.phases if kname == "depth" else args.arccos_phases
                label = (f"phases, degree {args.degree} x {per}" if kind == "phases"
                         else f"full, degree {args.full_degree}")
                print(f"| {names[kname]} | {prior} | {label} | {'default' if ftol is None else f'ftol {ftol:g}'} | {int(rows[0, 5])} "
                      f"| {rows[:, 0].mean():.3f} ± {rows[:, 0].std():.3f} | {rows[:, 1].mean():.3f} ± "
                      f"{rows[:, 1].std():.3f} | {rows[:, 2].mean():.2e} | {rows[:, 3].mean():.0f} "
                      f"| {rows[:, 4].mean():.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
