"""Seed 003 Fig. 3.9 on Snelson's 1-D data: activated SVGP with L = 8 and L = 16 levels against
L = 8 plus K = 8 orthogonal inducing points, for {arc-cosine (order 1), Matern-5/2 (chordal)} x
{ReLU, softplus}: final ELBO (best and mean over restarts) and optimiser throughput (L-BFGS-B
iterations per second), all in one run.

Set-up: inputs and targets standardised; M = 10 activated units (random directions; the
number of units is not stated in seed 003); kernel variance / lengthscale 1, noise 1, bias 1,
input scale 1 at the start (seed 003 §3.A.3); q(u), q(v') start at the prior; W at random
training inputs; every parameter trained jointly by L-BFGS-B (``--maxiter``).

    .venv/bin/python benchmarks/paper/decoupled_snelson.py [--restarts 5] [--maxiter 1000]
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

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def load():
    try:
        X, y = sl.datasets.load_snelson(data_dir_=SHARED)
    except FileNotFoundError:
        X, y = sl.datasets.snelson_like()
        print("(../shared/data not found: generated stand-in)")
    return (X - X.mean()) / X.std(), (y - y.mean()) / y.std()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--maxiter", type=int, default=1000)
    parser.add_argument("--units", type=int, default=10)
    args = parser.parse_args()
    print("machine:", describe())
    X, y = load()
    kernels = {"arc-cosine": lambda: K.ArcCosine(1), "Matern-5/2": lambda: K.Matern(2.5, 1.0)}
    acts = {"ReLU": A.ReLU(), "softplus": A.Softplus(1.0)}
    configs = [("L = 8", 8, 0), ("L = 16", 16, 0), ("L = 8, K = 8", 8, 8)]
    print(
        f"\nSnelson (N = {len(y)}), M = {args.units} units, {args.restarts} restarts, L-BFGS-B maxiter {args.maxiter}"
    )
    print("| kernel | activation | model | best ELBO | mean ELBO | iterations / s | seconds / fit |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kname, kmake in kernels.items():
        for aname, act in acts.items():
            for label, L, Korth in configs:
                elbos, rates, secs = [], [], []
                for seed in range(args.restarts):
                    model = sl.OrthogonalSVGP(kmake(), sl.ActivatedFeatures(act, args.units, L), Korth,
                                              sl.likelihoods.Gaussian(1.0))
                    t0 = time.perf_counter()
                    try:
                        model.fit(X, y, maxiter=args.maxiter, seed=seed)
                    except np.linalg.LinAlgError as exc:
                        print(f"  ({kname}, {aname}, {label}, seed {seed}: {str(exc)[:80]})")
                        continue
                    dt = time.perf_counter() - t0
                    elbos.append(model.elbo())
                    rates.append(model.optimizer_result.nit / dt)
                    secs.append(dt)
                if elbos:
                    print(f"| {kname} | {aname} | {label} | {max(elbos):.2f} | {np.mean(elbos):.2f} | "
                          f"{np.median(rates):.1f} | {np.median(secs):.1f} |", flush=True)


if __name__ == "__main__":
    main()
