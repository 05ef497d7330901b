"""Accuracy report for the foundation: Gegenbauer engine and spherical harmonics.

Prints the largest errors observed (the tests assert the bounds; this script reports the
figures recorded in RESULTS.md):

* |C_n^a(t) - reference| / C_n^a(1) over n <= 200, d <= 128, against a 300-digit mpmath
  power-sum reference;
* the addition theorem, max |sum_j phi_lj(x) phi_lj(x') - Z_l(x.x')| per dimension;
* orthonormality under exact product quadrature, max |Gram - I|.
"""

from __future__ import annotations

import os
import sys

import mpmath
import numpy as np
from scipy.special import eval_gegenbauer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402


def mp_gegenbauer(n: int, alpha: float, t: float) -> mpmath.mpf:
    with mpmath.workdps(300):
        a, x = mpmath.mpf(alpha), 2 * mpmath.mpf(t)
        return +sum(
            (-1) ** k * mpmath.rf(a, n - k) / (mpmath.factorial(k) * mpmath.factorial(n - 2 * k))
            * x ** (n - 2 * k)
            for k in range(n // 2 + 1)
        )


def zonal_reference(ell: int, dim: int, t: np.ndarray) -> np.ndarray:
    t = np.clip(t, -1, 1)
    if ell == 0:
        return np.ones_like(t)
    if dim == 2:
        return 2 * np.cos(ell * np.arccos(t))
    a = (dim - 2) / 2
    return (ell + a) / a * eval_gegenbauer(ell, a, t)


def main() -> None:
    print("machine:", describe())
    ts = [-1.0, -0.999, -0.6, -0.05, 0.0, 0.2, 0.5, 0.93, 0.99999, 1.0]
    worst, where = 0.0, None
    for d in [3, 4, 9, 32, 128]:
        a = (d - 2) / 2
        for n in [1, 2, 10, 50, 100, 150, 200]:
            ours = sl.gegenbauer(n, a, np.array(ts))
            c1 = float(mp_gegenbauer(n, a, 1))
            for t, v in zip(ts, ours):
                err = abs(v - float(mp_gegenbauer(n, a, t))) / c1
                if err > worst:
                    worst, where = err, (n, d, t)
    print(f"Gegenbauer: max |error| / C_n(1) = {worst:.2e} (at n, d, t = {where})")

    rng = np.random.default_rng(0)
    for dim, L in [(2, 40), (3, 30), (4, 12), (5, 9), (9, 5), (17, 4)]:
        Y = sl.SphericalHarmonics(dim, L)
        X = sl.sample_sphere(60, dim, rng)
        Phi = Y(X)
        G = X @ X.T
        err = max(
            np.abs(
                Phi[:, Y.degree_slice(e)] @ Phi[:, Y.degree_slice(e)].T - zonal_reference(e, dim, G)
            ).max()
            for e in range(L + 1)
        )
        print(f"addition theorem d = {dim:2d}, degrees 0..{L:2d}: max error {err:.1e}")
    for dim, L in [(2, 30), (3, 20), (4, 8), (5, 6)]:
        X, w = sl.product_quadrature(dim, 2 * L)
        Phi = sl.SphericalHarmonics(dim, L)(X)
        gram = (Phi * w[:, None]).T @ Phi
        print(
            f"orthonormality d = {dim}, degrees 0..{L}: max |Gram - I| = "
            f"{np.abs(gram - np.eye(len(gram))).max():.1e} ({len(w)} exact nodes)"
        )


if __name__ == "__main__":
    main()
