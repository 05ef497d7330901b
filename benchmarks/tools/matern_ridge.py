"""Why a default VISH fit can run away to a huge kernel variance (issue 28): along the ridge
(lengthscale x c, variance x c^3) a Matern-3/2 kernel keeps its levels >= 2 and only raises the
prior variance of the constant and linear functions, so the bound is nearly flat there; and the
collapsed bound's trace term, v sum r^2 - tr(Lambda G), is the difference of two numbers that grow
like the variance, so far along the ridge its rounding dominates the bound. Prints the bound and
its three parts along the ridge from a default fit, and the spectrum's accuracy against mpmath at
long lengthscales (the levels >= 2 are computed from kappa less its low-degree Taylor terms).

    python benchmarks/tools/matern_ridge.py [--rows 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _machine import describe  # noqa: E402


def reference_spectrum(lengthscale: float, dim: int, L: int) -> list[float]:
    import mpmath as mp

    mp.mp.dps = 40
    alpha = mp.mpf(dim - 2) / 2
    cd = mp.gamma(mp.mpf(dim) / 2) / (mp.sqrt(mp.pi) * mp.gamma(mp.mpf(dim - 1) / 2))
    ell_s = mp.mpf(lengthscale)

    def kappa(t):
        a = mp.sqrt(3) * mp.sqrt(2 - 2 * t) / ell_s
        return (1 + a) * mp.exp(-a)

    return [float(cd * mp.quad(lambda t: kappa(t) * mp.gegenbauer(ell, alpha, t) / mp.gegenbauer(ell, alpha, 1)
                                * (1 - t * t) ** (alpha - mp.mpf(1) / 2), [-1, 0, 1])) for ell in range(L + 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    import spherelab as sl

    print("machine:", describe())
    X, y = sl.datasets.synthetic_regression(args.rows, seed=args.rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = sl.VISH(sl.kernels.Matern(1.5, 1.0), 3).fit(X, y)  # the defaults: input scale 1, bias 1
    k, st, noise = model.kernel, model.stats, model.likelihood.variance
    v0, l0 = k.variance, k.lengthscale
    print(f"\nN = {args.rows:,}, M = {model.features.num_features}: the fit ends at variance {v0:.4g}, lengthscale "
          f"{l0:.4g}, noise {noise:.4g} ({model.fit_report_['spectrum']['message']})\n")
    print("| ridge step c | lengthscale | variance | lambda_0 | lambda_1 | lambda_3 | bound | -log det B / 2 | data fit | "
          "trace term | v sum r^2 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    deg = model.features.degrees
    for c in (1, 4, 16, 64, 256):
        k.lengthscale, k.variance = l0 * c, v0 * c ** 3
        lam = model.features.Kuu_inverse_diag(k)
        s = np.sqrt(lam)
        B = st.G * np.outer(s, s) / noise + np.eye(lam.size)
        Lb = np.linalg.cholesky(B)
        w = np.linalg.solve(Lb, s * st.c)
        parts = (-np.sum(np.log(np.diag(Lb))), -0.5 * st.yy / noise + 0.5 * w @ w / noise**2,
                 -0.5 * (k.at_one() * st.sum_diag - lam @ np.diag(st.G)) / noise)
        print(f"| {c} | {k.lengthscale:.4g} | {k.variance:.4g} | {lam[deg == 0][0]:.3g} | {lam[deg == 1][0]:.3g} | "
              f"{lam[deg == 3][0]:.4g} | {model.elbo():.3f} | {parts[0]:.3f} | {parts[1]:.3f} | {parts[2]:.3f} | "
              f"{k.at_one() * st.sum_diag:.3e} |", flush=True)
    print("\nThe Matern-3/2 spectrum on S^8 against mpmath (40 digits), relative error by level:\n")
    print("| lengthscale | level 0 | level 1 | level 2 | level 3 |")
    print("| --- | --- | --- | --- | --- |")
    for ls in (1.0, l0, 64 * l0, 256 * l0):
        ours, ref = sl.kernels.Matern(1.5, ls).spectrum(9, 3), reference_spectrum(ls, 9, 3)
        print(f"| {ls:.4g} | " + " | ".join(f"{abs(o - r) / abs(r):.1e}" for o, r in zip(ours, ref)) + " |")


if __name__ == "__main__":
    main()
