"""Where one core's time goes in VISH's statistics pass: for one chunk of ``chunk_rows(M)`` rows
on one thread (what each share of the split pass does per chunk), the lift, the harmonic columns,
the Gram product and ``A y``, at M = 210 and 660 (degrees 3 and 4 on S^8), median of repeats.

    .venv/bin/python benchmarks/pass_breakdown.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from spherelab.backend import resolve  # noqa: E402


def median_ms(func, repeats: int = 200) -> float:
    func()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def main() -> None:
    print("machine:", describe())
    cpu = resolve("cpu")
    print("| M | rows per chunk | lift (ms) | harmonic columns (ms) | A A^T (ms) | A y (ms) | product's share |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for degree in (3, 4):
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, np.sqrt(8.0)))
        features = sl.HarmonicFeatures(degree)
        features.initialise(9, None)
        features.bind(kernel)
        M = features.num_features
        rows = sl.threads.chunk_rows(M)
        X, y = sl.datasets.synthetic_regression(rows, seed=0)
        plan = sl.SphericalHarmonics(9, degree).plan
        with sl.thread_limit(1):
            r, Xh = kernel.lift(X)
            A = cpu.harmonic_columns(Xh, plan, r)
            parts = [median_ms(lambda: kernel.lift(X)), median_ms(lambda: cpu.harmonic_columns(Xh, plan, r)),
                     median_ms(lambda: A @ A.T), median_ms(lambda: A @ y)]
        print(f"| {M} | {rows} | " + " | ".join(f"{p:.3f}" for p in parts) + f" | {parts[2] / sum(parts):.2f} |")


if __name__ == "__main__":
    main()
