"""The float32 Gram pass against float64: speed of one statistics pass and the error it brings
into the statistics, the bound, the fitted hyper-parameters and the predictions.

    python benchmarks/vish_float32.py [--rows 1000000] [--degrees 3 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _machine import describe  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--degrees", type=int, nargs="*", default=[3, 4])
    args = parser.parse_args()
    import spherelab as sl
    from spherelab.bounds.harmonic import harmonic_statistics

    print("machine:", describe())
    X, y = sl.datasets.synthetic_regression(args.rows + 100_000, seed=0)
    X, y, Xt, yt = X[:args.rows], y[:args.rows], X[args.rows:], y[args.rows:]
    print("\n| M | pass float64 (s) | pass float32 (s) | speed-up | max rel. error of G | rel. error of c | "
          "bound float64 | bound float32 | max rel. diff. of fitted hyper-parameters | max |Δ mean| | "
          "test NLPD 64 / 32 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for degree in args.degrees:
        kernel = sl.kernels.Matern(1.5, 1.0)
        feats = sl.HarmonicFeatures(degree)
        feats.initialise(X.shape[1] + 1, None)
        feats.bind(kernel)
        times, stats = {}, {}
        for dtype in ("float64", "float32", "float64", "float32"):  # alternating, best of two
            t0 = time.perf_counter()
            stats[dtype] = harmonic_statistics(kernel, feats, X, y, gram_dtype=dtype, progress=False)
            times[dtype] = min(times.get(dtype, np.inf), time.perf_counter() - t0)
        a, b = stats["float64"], stats["float32"]
        err_G = np.abs(b.G - a.G).max() / np.abs(a.G).max()
        err_c = np.abs(b.c - a.c).max() / np.abs(a.c).max()
        models = {}
        for dtype in ("float64", "float32"):
            m = sl.VISH(sl.kernels.Matern(1.5, 1.0), degree, sl.likelihoods.Gaussian(0.1), gram_dtype=dtype)
            models[dtype] = m.fit(X, y)
        p64, p32 = models["float64"].get_params(), models["float32"].get_params()
        rel = max(float(np.max(np.abs(np.asarray(p32[k]) - np.asarray(p64[k])) / np.abs(np.asarray(p64[k]))))
                  for k in p64)
        (m64, v64), (m32, v32) = models["float64"].predict_y(Xt), models["float32"].predict_y(Xt)
        nlpd = [float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * (yt - m) ** 2 / v)) for m, v in ((m64, v64), (m32, v32))]
        print(f"| {feats.num_features} | {times['float64']:.2f} | {times['float32']:.2f} | "
              f"{times['float64'] / times['float32']:.2f} | {err_G:.1e} | {err_c:.1e} | "
              f"{models['float64'].elbo():.2f} | {models['float32'].elbo():.2f} | {rel:.1e} | "
              f"{np.abs(m64 - m32).max():.1e} | {nlpd[0]:.4f} / {nlpd[1]:.4f} |")


if __name__ == "__main__":
    main()
