"""Seed 003 Figs. 3.10-3.11 on UCI regression: RMSE and NLPD of

* SVGP with 128 and 256 inducing points,
* SOLVE-GP (128 inducing points + 128 orthogonal points),
* activated SVGP with 128 and 256 units (ReLU and softplus, L = 6),
* ours: 128 activated units + 128 orthogonal points (ReLU and softplus, L = 6),

for the arc-cosine (order 1), Matérn-5/2 and SE kernels (the Euclidean Matérn / SE at chordal
distance on the lifted sphere), all implemented in spherelab (:class:`spherelab.OrthogonalSVGP`).

Protocol: the standard 90/10 splits of ``../shared/data`` (PBP/MC-dropout), inputs and targets
standardised with the training statistics, every parameter trained jointly by full-batch
L-BFGS-B (``--maxiter`` iterations), inducing points and orthogonal points initialised at
random training inputs, units at random directions, q at its optimum for the initial
hyper-parameters (``--init-q prior``: at the prior, as the first grid ran); ``--collapsed``:
L-BFGS-B on the collapsed bound (q re-solved in closed form at every evaluation) instead of on
q and the rest jointly. RMSE and NLPD on the standardised test targets, mean ± std over the
splits, and optimiser iterations per second (median).

    .venv/bin/python benchmarks/paper/decoupled_uci.py [--datasets yacht ...] [--kernels matern52 ...]
        [--splits 5] [--maxiter 300] [--models svgp128 ours-softplus ...] [--init-q optimal|prior]
        [--collapsed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab import kernels as K  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
TRUNCATION = 6

KERNELS = {
    "arccos": lambda: K.ArcCosine(1),
    "matern52": lambda: K.Matern(2.5, 1.0),
    "se": lambda: K.Matern(np.inf, 1.0),
}
ACTS = {"relu": A.ReLU, "softplus": lambda: A.Softplus(1.0)}


def _points(X, m, rng):
    return sl.InducingPoints(X[rng.choice(X.shape[0], m, replace=False)])


def make_model(name: str, kernel, X, rng):
    """(features, K) for a model label such as ``svgp128``, ``solve``, ``act256-relu``, ``ours-softplus``."""
    if name.startswith("svgp"):
        return _points(X, int(name[4:]), rng), 0
    if name == "solve":
        return _points(X, 128, rng), 128
    if name.startswith("act"):
        units, act = name[3:].split("-")
        return sl.ActivatedFeatures(ACTS[act](), int(units), TRUNCATION), 0
    if name.startswith("ours-"):
        return sl.ActivatedFeatures(ACTS[name[5:]](), 128, TRUNCATION), 128
    raise ValueError(f"unknown model {name!r}")


MODELS = ["svgp128", "svgp256", "solve", "act128-relu", "act256-relu", "act128-softplus",
          "act256-softplus", "ours-relu", "ours-softplus"]
LABELS = {
    "svgp128": "SVGP 128", "svgp256": "SVGP 256", "solve": "SOLVE-GP 128+128",
    "act128-relu": "activated 128 ReLU", "act256-relu": "activated 256 ReLU",
    "act128-softplus": "activated 128 softplus", "act256-softplus": "activated 256 softplus",
    "ours-relu": "ours 128 ReLU + 128", "ours-softplus": "ours 128 softplus + 128",
}


def run(dataset: str, split: int, kname: str, model_name: str, maxiter: int, init_q: str = "optimal",
        collapsed: bool = False):
    Xtr, ytr, Xte, yte = sl.datasets.load_uci(dataset, split, data_dir_=DATA)
    mx, sx = Xtr.mean(0), Xtr.std(0)
    sx[sx == 0] = 1.0
    my, sy = ytr.mean(), ytr.std()
    Xtr, Xte = (Xtr - mx) / sx, (Xte - mx) / sx
    ytr, yte = (ytr - my) / sy, (yte - my) / sy
    rng = np.random.default_rng(split)
    D = Xtr.shape[1]
    kernel = KERNELS[kname]()
    kernel.input_scale = np.full(D, 1.0 / np.sqrt(D))
    features, num_orth = make_model(model_name, kernel, Xtr, rng)
    model = sl.OrthogonalSVGP(kernel, features, num_orth, sl.likelihoods.Gaussian(0.1))
    t0 = time.perf_counter()
    model.fit(Xtr, ytr, maxiter=maxiter, seed=split, init_q=init_q, collapsed=collapsed)
    dt = time.perf_counter() - t0
    mean, var = model.predict_f(Xte)
    rmse = float(np.sqrt(np.mean((mean - yte) ** 2)))
    nlpd = float(-np.mean(model.likelihood.log_predictive_density(yte, mean, var)))
    return rmse, nlpd, model.optimizer_result.nit / dt, dt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", nargs="*", default=["yacht", "concrete", "energy", "kin8nm", "power"])
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--maxiter", type=int, default=300)
    parser.add_argument("--init-q", choices=["optimal", "prior"], default="optimal",
                        help="q at its closed-form optimum for the initial hyper-parameters, or at the prior")
    parser.add_argument("--collapsed", action="store_true",
                        help="L-BFGS-B on the collapsed bound (q in closed form at every step)")
    args = parser.parse_args()
    print("machine:", describe())
    print(
        f"L-BFGS-B maxiter {args.maxiter}, {args.splits} splits, truncation L = {TRUNCATION}, q initialised: {args.init_q}, "
        f"objective: {'collapsed bound' if args.collapsed else 'ELBO in q and the rest jointly'}"
    )
    print("| dataset | kernel | model | RMSE | NLPD | iterations / s | seconds / fit |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        for kname in args.kernels:
            for mname in args.models:
                rows = []
                for split in range(args.splits):
                    try:
                        rows.append(run(dataset, split, kname, mname, args.maxiter, args.init_q, args.collapsed))
                    except np.linalg.LinAlgError as exc:
                        print(f"  ({dataset}, {kname}, {mname}, split {split}: {str(exc)[:100]})", flush=True)
                if not rows:
                    continue
                rmse, nlpd, rate, secs = (np.array(c) for c in zip(*rows))
                print(f"| {dataset} | {kname} | {LABELS[mname]} | {rmse.mean():.3f} ± {rmse.std():.3f} | "
                      f"{nlpd.mean():.3f} ± {nlpd.std():.3f} | {np.median(rate):.1f} | {np.median(secs):.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()
