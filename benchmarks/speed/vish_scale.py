"""VISH at scale: synthetic 8-input regression (``spherelab.datasets.synthetic_regression``),
N = 1e4 ... 6e6, M = 210 and 660 (degrees 3 and 4 on S^8): fit + predict wall time, peak
memory, passes over the data, test NLPD; and the fraction of the machine's syrk rate that the
statistics pass reaches, against two references measured in the same run on the Gram shape
(rows x M): NumPy's ``A.T @ A`` (OpenBLAS syrk) with OpenBLAS's own threads on 16 384-row
blocks, and one single-threaded syrk per core on blocks of ``spherelab.chunks.chunk_rows(M)``
rows (the faster of the two here). Flops are counted as N M^2 (syrk's useful work).

Peers (GPflow SGPR/SVGP, GPyTorch SVGP at N = 2e4) are not run yet: see RESULTS.md.

    .venv/bin/python benchmarks/speed/vish_scale.py [--sizes 10000 100000 1000000] [--degrees 3 4]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402


def syrk_rates(M: int, rows: int = 1 << 19) -> tuple[float, float]:
    """GFLOP/s (N M^2 per pass) of the Gram product on ``rows`` x M: OpenBLAS's threads on
    16 384-row blocks, and one single-threaded syrk per core on chunk_rows(M)-row blocks."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    big = np.random.default_rng(0).standard_normal((16384, M))
    big.T @ big
    t0 = time.perf_counter()
    for _ in range(rows // 16384):
        big.T @ big
    threaded = rows * M * M / (time.perf_counter() - t0) / 1e9
    chunk = sl.chunks.chunk_rows(M)
    cores = os.cpu_count() or 1
    blocks = [np.random.default_rng(k).standard_normal((chunk, M)) for k in range(cores)]

    def share(k):
        for _ in range(rows // chunk // cores):
            blocks[k].T @ blocks[k]

    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(cores) as pool:
        list(pool.map(share, range(cores)))
        t0 = time.perf_counter()
        list(pool.map(share, range(cores)))
        split = rows * M * M / (time.perf_counter() - t0) / 1e9
    return threaded, split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--degrees", type=int, nargs="*", default=[3, 4])
    args = parser.parse_args()
    print("machine:", describe())
    Xte, yte = sl.datasets.synthetic_regression(20_000, seed=123)
    for degree in args.degrees:
        M = sl.cumulative_num_harmonics(degree, 9)
        threaded, split = syrk_rates(M)
        print(f"\nM = {M} (degree {degree}); syrk on the Gram shape (N M^2): {threaded:.1f} GFLOP/s with OpenBLAS's "
              f"threads, {split:.1f} GFLOP/s one per core; chunks of {sl.chunks.chunk_rows(M)} rows")
        print(
            "| N | fit + predict (s) | Gram pass (s) | (fit + predict) / pass | pass GFLOP/s (N M^2) "
            "| of OpenBLAS-threaded syrk | of per-core syrk | passes | test NLPD | peak RSS (GB) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in args.sizes:
            X, y = sl.datasets.synthetic_regression(n, seed=n)
            kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, np.sqrt(8.0)))
            model = sl.VISH(kernel, degree, sl.likelihoods.Gaussian(0.1))
            t0 = time.perf_counter()
            model.fit(X, y)
            mean, var = model.predict_f(Xte)
            total = time.perf_counter() - t0
            t1 = time.perf_counter()
            sl.bounds.harmonic_statistics(kernel, model.features, X, y)
            gram = time.perf_counter() - t1
            nlpd = -np.mean(model.likelihood.log_predictive_density(yte, mean, var))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            rate = n * M * M / gram / 1e9
            print(
                f"| {n:,} | {total:.2f} | {gram:.3f} | {total / gram:.1f} | {rate:.1f} | {rate / threaded:.2f} "
                f"| {rate / split:.2f} | {model.passes} | {nlpd:.3f} | {rss:.1f} |",
                flush=True,
            )
            del X, y


if __name__ == "__main__":
    main()
