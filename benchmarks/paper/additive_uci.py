"""Additive structure on UCI: ``fit_additive`` (every single input, the pairs chosen by their bound
gain, degrees from a budget of features) against VISH with every harmonic to a degree of about the
same number of features, and with the neighbours' correction on top of each.

    python benchmarks/paper/additive_uci.py --sets kin8nm power protein --splits 0

Each fit has its own clock; the test rows are used once, after it. The selected pairs and the
gains are printed per set. No result is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE.parent / "speed"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from frontier import load, scores  # noqa: E402


def vish_near(X, y, features: int, seed: int):
    """VISH (features prior) at the largest degree with at most ``features`` harmonics."""
    D = X.shape[1]
    L = max(L for L in range(1, 30) if sl.cumulative_num_harmonics(L, D + 1) <= max(features, D + 1))
    kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))
    return sl.VISH(kernel, L).fit(X, y, seed=seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="*", default=["kin8nm", "power", "protein"])
    parser.add_argument("--splits", nargs="*", type=int, default=[0])
    parser.add_argument("--features", type=int, default=600)
    args = parser.parse_args()
    print(f"machine: {describe()}\nfeature budget {args.features}\n", flush=True)
    sl.selection.fit_additive(*sl.datasets.synthetic_regression(300, 3, seed=0), num_features=60)  # compilation
    print("| set | split | model | features | fit s | test NLPD | test RMSE | chosen pairs |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for name in args.sets:
        for split in args.splits:
            X, y, Xte, yte = load(name, split)
            rows = []
            t = time.perf_counter()
            additive = sl.selection.fit_additive(X, y, num_features=args.features, seed=split, max_time=300.0)
            rows.append(("additive (fit_additive)", additive, time.perf_counter() - t))
            t = time.perf_counter()
            vish = vish_near(X, y, additive.features.num_features, split)
            rows.append(("VISH, all harmonics", vish, time.perf_counter() - t))
            for label, model, spent in list(rows):
                t = time.perf_counter()
                local = sl.models.NeighbourResidual(model, 32, seed=split).fit(X, y, fit_model=False)
                rows.append((label + " + neighbours", local, spent + time.perf_counter() - t))
            pairs = [g for g in additive.fit_report_["additive"]["groups"] if len(g) > 1]
            for label, model, spent in rows:
                nlpd, rmse = scores(yte, *model.predict_y(Xte))
                base = getattr(model, "model", model)
                print(f"| {name} | {split} | {label} | {base.features.num_features} | {spent:.1f} | {nlpd:.4f} | "
                      f"{rmse:.4f} | {pairs if 'additive' in label else ''} |", flush=True)
            gains = additive.fit_report_["additive"]["gains"]
            top = sorted(gains.items(), key=lambda kv: -kv[1])[:5]
            print(f"\n{name}, split {split}: the largest pair gains (nats on the selection's subsample): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in top) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
