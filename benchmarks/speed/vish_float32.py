"""The float32 Gram pass against float64: speed of one statistics pass and the error it brings
into the statistics, the bound, the fitted hyper-parameters and the predictions; with
``--condition``, the bound's error against the condition of B = I + Lambda^1/2 G Lambda^1/2 / noise
(input scales and noise variances that make it worse), the error the bound estimates for itself,
and whether float32 statistics are then replaced by float64 (``check_precision``), with a fit of
such an ill-conditioned problem in both precisions.

    python benchmarks/speed/vish_float32.py [--rows 1000000] [--degrees 3 4]
    python benchmarks/speed/vish_float32.py --condition [--rows 200000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--degrees", type=int, nargs="*", default=[3, 4])
    parser.add_argument("--condition", action="store_true", help="the error against the condition of B")
    args = parser.parse_args()
    if args.condition:
        return condition_table(args.rows)
    import spherelab as sl
    from spherelab.bounds.vish import harmonic_statistics

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


def condition_table(rows: int) -> None:
    import spherelab as sl
    from spherelab.bounds.precision import CONDITION_LIMIT, FLOAT32_TOLERANCE, InsufficientPrecision, check_precision
    from spherelab.bounds.vish import collapsed_bound, harmonic_statistics

    print("machine:", describe())
    X, y = sl.datasets.synthetic_regression(rows, seed=0)
    print(f"\n{rows:,} rows, M = 210 (degree 3 on S^8), Matern-3/2, lengthscale 1; 'replaced': check_precision "
          f"refuses the float32 statistics (estimated error > {FLOAT32_TOLERANCE:g} of the bound, or condition x "
          f"rounding > {CONDITION_LIMIT:g}); 'needed': the actual error exceeds {FLOAT32_TOLERANCE:g} of the bound.\n")
    print("| input scale | noise | condition of B (1-norm) | bound float64 | bound float32 | actual rel. error | "
          "estimated rel. error | condition x rounding | replaced | needed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for scale in (3.0, 10.0, 30.0):
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(X.shape[1], scale))
        feats = sl.HarmonicFeatures(3)
        feats.initialise(X.shape[1] + 1, None)
        feats.bind(kernel)
        s64 = harmonic_statistics(kernel, feats, X, y, progress=False)
        s32 = harmonic_statistics(kernel, feats, X, y, gram_dtype="float32", progress=False)
        lam, v = feats.Kuu_inverse_diag(kernel), kernel.at_one()
        for noise in (1e-1, 1e-3, 1e-5):
            b64, b32 = collapsed_bound(lam, v, noise, s64), collapsed_bound(lam, v, noise, s32)
            try:
                check_precision(b32, s32)
                replaced = "no"
            except InsufficientPrecision:
                replaced = "yes"
            actual = abs(b32.value - b64.value) / abs(b64.value)
            print(f"| {scale:g} | {noise:g} | {b32.condition:.2e} | {b64.value:.6e} | {b32.value:.6e} | {actual:.1e} | "
                  f"{b32.error / abs(b32.value):.1e} | {b32.condition * s32.rounding:.2g} | {replaced} | "
                  f"{'yes' if actual > FLOAT32_TOLERANCE else 'no'} |", flush=True)
    print("\nFits of the worst case above (input scale 30 fixed, noise floor 1e-7, from noise 1e-5):\n")
    print("| gram_dtype | bound | fitted noise | statistics | passes |")
    print("| --- | --- | --- | --- | --- |")
    for dtype in ("float64", "float32"):
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(X.shape[1], 30.0))
        m = sl.VISH(kernel, 3, sl.likelihoods.Gaussian(1e-5, floor=1e-7), gram_dtype=dtype)
        m.fit(X, y, train_lift=False, maxiter=50)
        note = m.fit_report_.get("statistics", "as computed")
        print(f"| {dtype} | {m.elbo():.6e} | {m.likelihood.variance:.4g} | {note[:90]} | {m.passes} |", flush=True)


if __name__ == "__main__":
    main()
