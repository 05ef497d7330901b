"""A decoupled model's Gaussian ELBO + gradient on a Dask array against the same rows in memory
(issue 30): the Dask evaluation is two passes over the blocks (the whitened statistics, then the
gradient's sums over the rows), each summed pairwise on the scheduler; in memory the same two
passes deal their chunks to one thread per core. Value and gradient must agree to 1e-10.

Rows: synthetic regression (``sl.datasets.synthetic_regression``), 8 inputs; 64 softplus units
(L = 4) + 64 orthogonal points, Matérn-5/2. Schedulers: Dask's threaded scheduler and a
``LocalCluster`` of two single-threaded worker processes (the data sent once as blocks, persisted).

    .venv/bin/python benchmarks/speed/decoupled_dask.py [--rows 400000] [--block 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab import kernels as K  # noqa: E402


def timed(fn, repeats):
    out = fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    return (time.perf_counter() - t0) / repeats, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--block", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import dask.array as da
    from distributed import Client, LocalCluster

    print("machine:", describe())
    X, y = sl.datasets.synthetic_regression(args.rows, 8, seed=0)
    model = sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.ActivatedFeatures(A.Softplus(1.0), 64, 4), 64,
                              sl.likelihoods.Gaussian(0.1))
    model.initialise(X, seed=0)
    model.optimal_q(X, y)
    theta = model.parameter_vector()
    P = model.features.num_features + model.num_orthogonal
    rows = []
    t_mem, ref = timed(lambda: model.objective(theta, X, y), args.repeats)
    rows.append(("in memory (split across the cores)", t_mem, 0.0, 0.0))
    Xd, yd = da.from_array(X, chunks=(args.block, 8)), da.from_array(y, chunks=args.block)
    t, (v, g) = timed(lambda: model.objective(theta, Xd, yd), args.repeats)
    rows.append(("Dask, threaded scheduler", t, abs(v - ref[0]) / abs(ref[0]),
                 float(np.abs(g - ref[1]).max() / np.abs(ref[1]).max())))
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=40) as cluster, \
            Client(cluster):
        Xp, yp = Xd.persist(), yd.persist()
        t, (v, g) = timed(lambda: model.objective(theta, Xp, yp), args.repeats)
        rows.append(("Dask, LocalCluster of 2 worker processes", t, abs(v - ref[0]) / abs(ref[0]),
                     float(np.abs(g - ref[1]).max() / np.abs(ref[1]).max())))
    flops = 6.0 * args.rows * P * P
    print(f"\nN = {args.rows:,} rows in blocks of {args.block:,}, P = {P} (64 units + 64 orthogonal); "
          f"ELBO + gradient, mean of {args.repeats} after one warm-up")
    print("| evaluation | s | x in memory | GFLOP/s (6 N P^2) | value rel. diff | gradient rel. diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, t, dv, dg in rows:
        print(f"| {name} | {t:.3f} | {t / t_mem:.2f} | {flops / t / 1e9:.1f} | {dv:.1e} | {dg:.1e} |")
    worst = max(max(r[2], r[3]) for r in rows)
    assert worst < 1e-10, f"the Dask evaluation differs from memory by {worst:.1e}"


if __name__ == "__main__":
    main()
