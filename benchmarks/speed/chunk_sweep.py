"""The statistics pass against its chunk size: VISH's pass (``harmonic_statistics``, split over
the cores) over 10^6 rows at M = 210 and 5x10^5 rows at M = 660 for several rows per chunk,
beside the size ``spherelab.chunks.chunk_rows(M)`` picks from the cache. Best of repeats.

    .venv/bin/python benchmarks/speed/chunk_sweep.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe, vish_features  # noqa: E402
from spherelab.bounds.vish import harmonic_statistics  # noqa: E402


def main() -> None:
    print("machine:", describe(), "| L3:", sl.chunks.cache_bytes(3) // 2**20, "MiB")
    print("| M | rows | rows per chunk | pass (s, best of 3) | relative to the best |")
    print("| --- | --- | --- | --- | --- |")
    for degree, n in ((3, 1_000_000), (4, 500_000)):
        X, y = sl.datasets.synthetic_regression(n, seed=0)
        kernel, features = vish_features(degree)
        M = features.num_features
        picked = sl.chunks.chunk_rows(M)
        times = {}
        for rows in sorted({256, 512, 1024, 2048, 4096, 16384, picked}):
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                harmonic_statistics(kernel, features, X, y, chunk_size=rows, progress=False)
                best = min(best, time.perf_counter() - t0)
            times[rows] = best
        top = min(times.values())
        for rows, t in times.items():
            mark = " (chunk_rows)" if rows == picked else ""
            print(f"| {M} | {n:,} | {rows}{mark} | {t:.3f} | {t / top:.2f} |", flush=True)


if __name__ == "__main__":
    main()
