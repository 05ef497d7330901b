"""VISH at scale: synthetic 8-input regression (``spherelab.datasets.synthetic_regression``),
N = 1e4 ... 6e6, M = 210 and 660 (degrees 3 and 4 on S^8): fit + predict wall time, peak
memory, passes over the data, test NLPD; and the fraction of the machine's measured BLAS dgemm
rate that the Gram pass reaches.

Peers (GPflow SGPR/SVGP, GPyTorch SVGP at N = 2e4) are not run yet: see RESULTS.md.

    .venv/bin/python benchmarks/vish_scale.py [--sizes 10000 100000 1000000] [--degrees 3 4]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402


def blas_rate(M: int, rows: int = 16384) -> float:
    """Measured GFLOP/s of dgemm on the Gram-pass shape (rows x M)^T (rows x M)."""
    P = np.random.default_rng(0).standard_normal((rows, M))
    P.T @ P
    t0 = time.perf_counter()
    for _ in range(3):
        P.T @ P
    return 3 * 2 * rows * M * M / (time.perf_counter() - t0) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--degrees", type=int, nargs="*", default=[3, 4])
    args = parser.parse_args()
    print("machine:", describe())
    Xte, yte = sl.datasets.synthetic_regression(20_000, seed=123)
    for degree in args.degrees:
        M = sl.cumulative_num_harmonics(degree, 9)
        rate = blas_rate(M)
        print(f"\nM = {M} (degree {degree}); dgemm on the Gram shape: {rate:.1f} GFLOP/s")
        print(
            "| N | fit + predict (s) | Gram pass (s) | (fit + predict) / pass | Gram GFLOP/s (syrk, N M^2) | passes "
            "| test NLPD | peak RSS (GB) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in args.sizes:
            X, y = sl.datasets.synthetic_regression(n, seed=n)
            kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, np.sqrt(8.0)))
            model = sl.VISH(kernel, degree, sl.likelihoods.Gaussian(0.1))
            t0 = time.perf_counter()
            model.fit(X, y)
            mean, var = model.predict_f(Xte)
            total = time.perf_counter() - t0
            t1 = time.perf_counter()
            sl.models.vish.harmonic_statistics(kernel, model.features, X, y)
            gram = time.perf_counter() - t1
            nlpd = -np.mean(model.likelihood.log_predictive_density(yte, mean, var))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            print(
                f"| {n:,} | {total:.2f} | {gram:.3f} | {total / gram:.1f} | {n * M * M / gram / 1e9:.1f} | {model.passes} "
                f"| {nlpd:.3f} | {rss:.1f} |",
                flush=True,
            )
            del X, y


if __name__ == "__main__":
    main()
