"""Capacity and locality on power and protein: which of (a) more inducing points at k-means centres
with only the hyper-parameters trained (Burt, Rasmussen & van der Wilk 2020), (b) trained inducing
points, (c) a nearest-neighbour correction of the residual moves test NLPD, each on its own and
together, within a minute of fitting.

    python benchmarks/speed/capacity.py --sets power protein --splits 0

Each global fit is limited to ``--seconds``; the correction's fit is timed on top. The test rows
are used once, after each fit. No result is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from frontier import load, scores  # noqa: E402


def points(X, y, P: int, fixed: bool, seconds: float, seed: int):
    D = X.shape[1]
    kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))
    Z = sl.features.kmeans_centres(X, P, seed=seed)
    model = sl.OrthogonalSVGP(kernel, sl.InducingPoints(Z, fixed=fixed), 0)
    with sl.models.capped():
        return model.fit(X, y, seed=seed, max_time=seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="*", default=["power", "protein"])
    parser.add_argument("--splits", nargs="*", type=int, default=[0])
    parser.add_argument("--seconds", type=float, default=45.0)
    args = parser.parse_args()
    print(f"machine: {describe()}\neach global fit at most {args.seconds:g} s\n", flush=True)
    configs = [("inducing points, trained", 256, False), ("inducing points, fixed", 256, True),
               ("inducing points, fixed", 1024, True)]
    print("| set | split | global model | P | global s | global NLPD | + neighbours s | + neighbours NLPD |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for name in args.sets:
        for split in args.splits:
            X, y, Xte, yte = load(name, split)
            for label, P, fixed in configs:
                t = time.perf_counter()
                model = points(X, y, P, fixed, args.seconds, split)
                spent = time.perf_counter() - t
                nlpd = scores(yte, *model.predict_y(Xte))[0]
                t = time.perf_counter()
                local = sl.models.NeighbourResidual(model, 32, seed=split).fit(X, y, fit_model=False)
                extra = time.perf_counter() - t
                corrected = scores(yte, *local.predict_y(Xte))[0]
                print(f"| {name} | {split} | {label} | {P} | {spent:.1f} | {nlpd:.4f} | {spent + extra:.1f} | "
                      f"{corrected:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
