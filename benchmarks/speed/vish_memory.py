"""Peak memory of ``VISH.fit`` above the resident data, against N (each size in a fresh process).

    python benchmarks/speed/vish_memory.py [--sizes 200000 600000 2000000] [--degree 3]

The resident data (X: N x 8 float64, y) are allocated first; a sampling thread then reads the
process's resident set size every millisecond during the fit, and the peak above the level before
``fit`` is reported (median over ``--repeat`` fresh processes per size). Target (issue "nothing silent"): flat in N, within 10 % from 2e5 to 2e6 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one(n: int, degree: int) -> dict:
    import numpy as np
    import spherelab as sl

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.5, 1.5, (n, 8))
    y = np.sin(X @ rng.standard_normal(8) / 3) + 0.1 * rng.standard_normal(n)
    sl.VISH(sl.kernels.Matern(1.5, 1.0), degree, sl.likelihoods.Gaussian(0.1)).fit(X[:2000], y[:2000])  # compile
    base = rss()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.001)

    watcher = threading.Thread(target=sample)
    watcher.start()
    t0 = time.perf_counter()
    model = sl.VISH(sl.kernels.Matern(1.5, 1.0), degree, sl.likelihoods.Gaussian(0.1)).fit(X, y)
    seconds = time.perf_counter() - t0
    done.set()
    watcher.join()
    return {"n": n, "M": model.features.num_features, "data_mb": (X.nbytes + y.nbytes) / 2**20,
            "peak_above_mb": (peak[0] - base) / 2**20, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[200_000, 600_000, 2_000_000])
    parser.add_argument("--degree", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per size (the median is reported)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.degree)))
        return
    print("machine:", describe())
    print("\n| N | M | resident data (MB) | fit peak above it (MB), each run | median (MB) | fit (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for n in args.sizes:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--one", str(n), "--degree", str(args.degree)],
                                 capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        peaks = [r["peak_above_mb"] for r in runs]
        r = dict(runs[0], peak_above_mb=float(np.median(peaks)))
        rows.append(r)
        print(f"| {r['n']:,} | {r['M']} | {r['data_mb']:.0f} | {', '.join(f'{p:.0f}' for p in peaks)} | "
              f"{r['peak_above_mb']:.0f} | {np.median([x['seconds'] for x in runs]):.1f} |")
    lo, hi = min(r["peak_above_mb"] for r in rows), max(r["peak_above_mb"] for r in rows)
    print(f"\nspread of the median peak above the data: {hi / lo - 1:.1%} (target: within 10 %)")


if __name__ == "__main__":
    main()
