"""What spherical harmonics add to inducing points, in the collapsed bound, on kin8nm, power and protein.

The hybrid (harmonics for u, K orthogonal points for v; Tiao, thesis §3.4) trails K inducing points
alone on the frontier. This run separates the two possible reasons at one set of hyper-parameters
and inputs — those of K inducing points fitted by L-BFGS-B (``--maxiter`` iterations from greedy
inputs): every number below is a collapsed bound at those same parameters, so only the inducing
variables differ.

* ``K points``: the library's bound of the points alone;
* ``+ M harmonics, decoupled q``: the library's hybrid with those K points as v, its q(u) and
  q(v_perp) independent (the orthogonally decoupled posterior);
* ``+ M harmonics, joint q``: Titsias's bound over u and v together (a joint q), computed here
  with dense P x N matrices, independently of the library;
* ``+ M points``: Titsias's bound with M more points, chosen greedily given the K (not trained).

The decoupled q's deficit against the joint q is the information the optimal joint q shares
between u and v_perp (the tests check that identity to 1e-10); the joint q's gain over K points is
what the harmonics can add at best. Bounds in nats on the standardised training targets.

    .venv/bin/python benchmarks/speed/hybrid_bound.py [--sets kin8nm power protein] [--splits 0 1 2]
        [--maxiter 150] [--rows 12000]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.linalg import cholesky, solve_triangular

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402

#: per set: the hybrid's degree and the total inducing variables P (as the frontier's defaults)
SIZES = {"kin8nm": (2, 210), "power": (4, 540), "protein": (2, 275)}


def load(name: str, split: int, rows: int):
    data = Path(os.environ.get("SPHERELAB_DATA", HERE.parents[2] / "shared" / "data"))
    Xtr, ytr, Xte, yte = sl.datasets.load_uci(name, split, data_dir_=data)
    X, y = sl.datasets.Standardizer().fit(Xtr, ytr).transform(Xtr, ytr)
    if X.shape[0] > rows:  # the dense reference holds P x N matrices
        keep = np.random.default_rng(split).choice(X.shape[0], rows, replace=False)
        X, y = X[keep], y[keep]
    return X, y


def titsias(Kww: np.ndarray, Kwf: np.ndarray, kdiag: np.ndarray, y: np.ndarray, noise: float) -> float:
    """Titsias's collapsed bound over the inducing set W by the Woodbury identity (P x N, no N x N)."""
    # jitter relative to each variable's own prior variance: the harmonics' 1/lambda reach 1e6 beside
    # the points' O(1), and a jitter from their mean would swamp the points' block
    Lw = cholesky(Kww + 1e-10 * np.diag(np.diag(Kww)), lower=True)
    A = solve_triangular(Lw, Kwf, lower=True) / np.sqrt(noise)
    LB = cholesky(np.eye(len(Kww)) + A @ A.T, lower=True)
    c = solve_triangular(LB, A @ y, lower=True) / np.sqrt(noise)
    n = len(y)
    return float(-0.5 * n * np.log(2 * np.pi * noise) - np.log(np.diag(LB)).sum() - 0.5 * y @ y / noise
                 + 0.5 * c @ c - 0.5 * kdiag.sum() / noise + 0.5 * np.sum(A * A))


def one_split(name: str, split: int, rows: int, maxiter: int) -> tuple:
    X, y = load(name, split, rows)
    D = X.shape[1]
    degree, P = SIZES[name]
    M = sl.cumulative_num_harmonics(degree, D + 1)
    K = P - M
    kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))
    t = time.perf_counter()
    Z0 = X[sl.features.greedy_variance(kernel, X[:20_000], K)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.ConvergenceWarning)  # a fixed budget of iterations by design
        points = sl.OrthogonalSVGP(kernel, sl.InducingPoints(Z0), 0).fit(X, y, maxiter=maxiter)
    seconds = time.perf_counter() - t
    kern, noise, Z = points.kernel, points.likelihood.variance, points.features.Z.copy()
    hybrid = sl.OrthogonalSVGP(copy.deepcopy(kern), sl.HarmonicFeatures(degree), K, copy.deepcopy(points.likelihood),
                               orthogonal_inputs=Z).fit(X, y, optimize=False)
    feats = hybrid.features
    Kuu, Kvu, Kvv = feats.Kuu(hybrid.kernel), feats.Kuf(hybrid.kernel, Z).T, kern.K(Z)
    kdiag = kern.diag(X)
    joint = titsias(np.block([[Kuu, Kvu.T], [Kvu, Kvv]]), np.vstack([feats.Kuf(hybrid.kernel, X), kern.K(Z, X)]),
                    kdiag, y, noise)
    given = points.features  # the K points, bound to the fitted kernel: M more where they leave most variance
    Zp = np.vstack([Z, X[sl.features.greedy_variance(kern, X[:20_000], M, given)]])
    return (split, X.shape[0], M, K, noise, points.elbo(), hybrid.elbo(), joint, titsias(kern.K(Zp), kern.K(Zp, X),
                                                                                          kdiag, y, noise), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--maxiter", type=int, default=150)
    parser.add_argument("--rows", type=int, default=12_000)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"K points fitted by L-BFGS-B for {args.maxiter} iterations; at most {args.rows:,} training rows\n")
    for name in args.sets:
        print(f"## {name}\n")
        print("| split | rows | M | K | noise | K points | + M harmonics, decoupled q | + M harmonics, joint q "
              "| + M points | points' fit, s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        gains = []
        for split in args.splits:
            s, n, M, K, noise, pts, dec, joint, more, sec = one_split(name, split, args.rows, args.maxiter)
            print(f"| {s} | {n:,} | {M} | {K} | {noise:.4f} | {pts:.1f} | {dec:.1f} ({dec - pts:+.1f}) "
                  f"| {joint:.1f} ({joint - pts:+.1f}) | {more:.1f} ({more - pts:+.1f}) | {sec:.1f} |", flush=True)
            gains.append((dec - pts, joint - pts, more - pts))
        g = np.mean(gains, axis=0)
        print(f"\nmean change of the bound over the splits: harmonics with the decoupled q {g[0]:+.1f}, with a "
              f"joint q {g[1]:+.1f}; the same number of points {g[2]:+.1f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
