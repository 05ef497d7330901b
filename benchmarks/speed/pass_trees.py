"""VISH's pass over every row (``harmonic_statistics``) under two source trees of the package, in
the same run: synthetic 8-input rows (``synthetic_regression``), M = 210 and 660 (degrees 3 and 4
on S^8), the package's default chunks and threads. Each round starts one fresh process per tree,
alternating, and each process reports the best of ``--repeats`` passes after one untimed pass
(compilation, caches); the table gives each tree's best over the rounds, their ratio, and the
largest difference of the statistics between the trees relative to their scale.

    python benchmarks/speed/pass_trees.py --trees OLD/lab NEW/lab [--rows 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
import spherelab as sl
from spherelab.bounds import harmonic_statistics

rows, repeats, degree = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
X, y = sl.datasets.synthetic_regression(rows, 8, seed=0)
kernel = sl.kernels.Matern(2.5, 1.0, bias=1.0, input_scale=3.0)
feats = sl.HarmonicFeatures(degree)
feats.initialise(9, None)
feats.bind(kernel)
stats = harmonic_statistics(kernel, feats, X, y, progress=False)
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    stats = harmonic_statistics(kernel, feats, X, y, progress=False)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"M": feats.num_features, "seconds": best, "file": sl.__file__,
                  "G": stats.G.ravel()[:: max(1, stats.G.size // 4096)].tolist(), "c": stats.c.tolist(),
                  "r2": float(stats.sum_diag)}))
"""


def run(tree: str, rows: int, repeats: int, degree: int) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(repeats), str(degree)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", nargs=2, required=True, help="the two trees' import roots (their lab/)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("machine:", describe())
    names = ["first tree", "second tree"]
    print(f"\n{args.rows:,} rows; {args.rounds} rounds of one process per tree, alternating; best of "
          f"{args.repeats} passes in each\n")
    print(f"| M | {names[0]} (s) | {names[1]} (s) | second / first | max rel. diff. of G, c, sum r^2 |")
    print("| --- | --- | --- | --- | --- |")
    for degree in (3, 4):
        best, last = [float("inf")] * 2, [None, None]
        for _ in range(args.rounds):
            for k, tree in enumerate(args.trees):
                r = run(tree, args.rows, args.repeats, degree)
                best[k], last[k] = min(best[k], r["seconds"]), r
        a, b = last
        diff = max(max(abs(p - q) for p, q in zip(a[key], b[key])) / max(abs(p) for p in a[key]) for key in ("G", "c"))
        diff = max(diff, abs(a["r2"] - b["r2"]) / abs(a["r2"]))
        print(f"| {a['M']} | {best[0]:.3f} | {best[1]:.3f} | {best[1] / best[0]:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
