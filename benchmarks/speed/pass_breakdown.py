"""Where one core's time goes in VISH's statistics pass: for one chunk of ``chunk_rows(M)`` rows
on one thread (what each share of the split pass does per chunk), the lift, the harmonic columns,
the Gram product and ``A y``, at M = 210 and 660 (degrees 3 and 4 on S^8), median of repeats.

    .venv/bin/python benchmarks/speed/pass_breakdown.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe, median_seconds, vish_features  # noqa: E402
from spherelab.backend import resolve  # noqa: E402


def main() -> None:
    print("machine:", describe())
    cpu = resolve("cpu")
    print("| M | rows per chunk | lift (ms) | harmonic columns (ms) | A A^T (ms) | A y (ms) | product's share |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for degree in (3, 4):
        kernel, features = vish_features(degree)
        M = features.num_features
        rows = sl.chunks.chunk_rows(M)
        X, y = sl.datasets.synthetic_regression(rows, seed=0)
        plan = sl.SphericalHarmonics(9, degree).plan
        with sl.thread_limit(1):
            r, Xh = kernel.lift(X)
            A = cpu.harmonic_columns(Xh, plan, r)
            parts = [1e3 * median_seconds(f, 200) for f in (lambda: kernel.lift(X),
                                                            lambda: cpu.harmonic_columns(Xh, plan, r),
                                                            lambda: A @ A.T, lambda: A @ y)]
        print(f"| {M} | {rows} | " + " | ".join(f"{p:.3f}" for p in parts) + f" | {parts[2] / sum(parts):.2f} |")


if __name__ == "__main__":
    main()
