"""VISH's accuracy against M and wall time on real data: kin8nm, power and protein (split 0 of
../shared/data, standardised with the training statistics), VISH at each degree up to
``--max-degree`` with the kernel prior and the features prior (``spherelab.explore.degree_sweep``):
M, fit + predict seconds, test NLPD and MSE. Answers "how much time does VISH need to reach a
given NLPD" for the peers' figures in RESULTS.md ("VISH against GPflow and GPyTorch on UCI").

    .venv/bin/python benchmarks/paper/vish_degrees.py [--datasets kin8nm power protein] [--max-degree 12] [--max-features 2000]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from vish_peers import load_real  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", nargs="*", default=["kin8nm", "power", "protein"])
    parser.add_argument("--max-degree", type=int, default=12)
    parser.add_argument("--max-features", type=int, default=2000, help="skip degrees with more features")
    args = parser.parse_args()
    print("machine:", describe())
    for name in args.datasets:
        X, y, Xte, yte = load_real(name)
        D = X.shape[1]
        degrees = [L for L in range(1, args.max_degree + 1)
                   if sl.cumulative_num_harmonics(L, D + 1) <= args.max_features]
        print(f"\n{name}: N = {X.shape[0]:,}, {D} inputs, test {Xte.shape[0]:,} rows")
        print("| prior | L | M | fit + predict (s) | test NLPD | test MSE | ELBO / N |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for prior in ("kernel", "features"):
            sweep = sl.explore.degree_sweep(
                lambda L, p=prior: sl.VISH(sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D))),
                                           L, sl.likelihoods.Gaussian(0.1), prior=p),
                X, y, Xte, yte, degrees, exact=False)
            for r in sweep["rows"]:
                print(f"| {prior} | {r['L']} | {r['M']} | {r['seconds']:.1f} | {r['nlpd']:.3f} | {r['mse']:.3f} "
                      f"| {r['elbo'] / X.shape[0]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
