"""Seed 002 §4 on data with a symmetry: HVGP with T × m inducing points against SVGP with m and
with T·m points, same kernel, same optimiser, same minibatches, in one run.

* ``mirror``: :func:`spherelab.datasets.mirror_symmetric` (2-D, inputs invariant under both
  coordinate reflections), group ``Reflection(2)`` (T = 4 blocks).
* UCI sets (``kin8nm``, ``power``, …; standard splits of ``../shared/data``): reflections along
  the leading principal axes of the standardised training inputs, ``Reflection.pca(X, J)``
  (T = 2^J blocks), as seed 002 App. E.

All models: Matérn-5/2 on the lifted inputs with a scalar input scale (the PCA reflections mix
coordinates), whitened q, inducing inputs at random training rows, every parameter trained by
Adam (lr 0.01) on minibatches of 256 for ``--iterations`` steps. Reported: test RMSE and NLPD
(standardised targets), training seconds and milliseconds per step, mean ± std over splits.

    .venv/bin/python benchmarks/paper/hvgp_symmetry.py [--datasets mirror kin8nm] [--m 64] [--axes 3]
        [--iterations 2000] [--splits 3]
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
from spherelab import kernels as K  # noqa: E402
from spherelab.groups import Reflection  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def load(dataset: str, split: int):
    if dataset == "mirror":
        X, y = sl.datasets.mirror_symmetric(12000, noise=0.1, seed=split)
        return X[:10000], y[:10000], X[10000:], y[10000:]
    Xtr, ytr, Xte, yte = sl.datasets.load_uci(dataset, split, data_dir_=DATA)
    mx, sx = Xtr.mean(0), Xtr.std(0)
    sx[sx == 0] = 1.0
    my, sy = ytr.mean(), ytr.std()
    return (Xtr - mx) / sx, (ytr - my) / sy, (Xte - mx) / sx, (yte - my) / sy


def make(name: str, X, m: int, axes: int, dataset: str, rng):
    D = X.shape[1]
    kernel = K.Matern(2.5, 1.0, input_scale=float(np.sqrt(D)))
    lik = sl.likelihoods.Gaussian(0.1)
    group = Reflection(2) if dataset == "mirror" else Reflection.pca(X, axes)
    T = group.size
    if name.startswith("svgp"):
        M = m if name == "svgp-m" else T * m
        Z = X[rng.choice(X.shape[0], M, replace=False)]
        return sl.OrthogonalSVGP(kernel, sl.InducingPoints(Z), 0, lik), M
    return sl.HarmonicSVGP(kernel, group, m, likelihood=lik), T * m


def run(dataset, split, name, m, axes, iterations):
    Xtr, ytr, Xte, yte = load(dataset, split)
    model, total = make(name, Xtr, m, axes, dataset, np.random.default_rng(split))
    t0 = time.perf_counter()
    model.fit_adam(Xtr, ytr, batch_size=256, iterations=iterations, lr=0.01, seed=split)
    secs = time.perf_counter() - t0
    mean, var = model.predict_f(Xte)
    rmse = float(np.sqrt(np.mean((mean - yte) ** 2)))
    nlpd = float(-np.mean(model.likelihood.log_predictive_density(yte, mean, var)))
    return rmse, nlpd, secs, 1e3 * secs / iterations, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", nargs="*", default=["mirror", "kin8nm"])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--axes", type=int, default=3, help="J principal axes for the UCI reflections (T = 2^J)")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=["svgp-m", "svgp-Tm", "hvgp"])
    args = parser.parse_args()
    print("machine:", describe())
    print(f"Adam lr 0.01, batch 256, {args.iterations} steps, m = {args.m}, {args.splits} splits")
    print("| dataset | model | inducing | RMSE | NLPD | train s | ms / step |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        for name in args.models:
            rows = []
            for split in range(args.splits):
                try:
                    rows.append(run(dataset, split, name, args.m, args.axes, args.iterations))
                except np.linalg.LinAlgError as exc:
                    print(f"  ({dataset}, {name}, split {split}: {str(exc)[:100]})", flush=True)
            if not rows:
                continue
            rmse, nlpd, secs, ms, total = (np.array(c) for c in zip(*rows))
            T = total[0] // args.m
            label = {"svgp-m": f"SVGP {args.m}", "svgp-Tm": f"SVGP {total[0]}", "hvgp": f"HVGP {T} × {args.m}"}[name]
            print(f"| {dataset} | {label} | {total[0]} | {rmse.mean():.3f} ± {rmse.std():.3f} | "
                  f"{nlpd.mean():.3f} ± {nlpd.std():.3f} | {np.median(secs):.0f} | {np.median(ms):.1f} |", flush=True)


if __name__ == "__main__":
    main()
