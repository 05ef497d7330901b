"""VISH on a Zarr store through a Dask LocalCluster, against the in-memory pass in the same run.

    python benchmarks/speed/vish_dask.py [--rows 100000000] [--block 1000000] [--workers 2]

Writes ``rows`` synthetic 8-input rows to a Zarr store on local disk (a chunked generator: never
in memory), fits VISH (M = 210) through a LocalCluster reading the store, and reports wall times,
the peak resident memory of every process of the run (sampled every 0.2 s), the statistics
pass's rate against a single-process in-memory pass over 4e6 rows in the same run, and the test
NLPD on 10^5 held-out rows. The store is deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from _machine import describe  # noqa: E402

D = 8
W = np.random.default_rng(123).standard_normal(D) / 2.0


def target(X, rng):
    return np.sin(X @ W) + 0.5 * np.cos(X[:, 0] * X[:, 1]) + 0.1 * rng.standard_normal(X.shape[0])


def make_block(block, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, (block, D))
    return X, target(X, rng)


class PeakMemory:
    """Peak RSS of this process and all its descendants (the cluster's nannies and workers)."""

    def __init__(self) -> None:
        import psutil

        self.me, self.peaks, self.stop = psutil.Process(), {}, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            for p in [self.me, *self.me.children(recursive=True)]:
                try:
                    self.peaks[p.pid] = max(self.peaks.get(p.pid, (0, ""))[0], p.memory_info().rss), p.name()
                except Exception:  # noqa: BLE001 - a process that just ended
                    pass
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--block", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    import dask.array as da
    import spherelab as sl
    import zarr
    from distributed import Client, LocalCluster
    from spherelab.bounds.vish import harmonic_statistics

    print("machine:", describe())
    memory = PeakMemory()
    root = tempfile.mkdtemp(prefix="spherelab-zarr-", dir=os.environ.get("SPHERELAB_ZARR_DIR"))
    try:
        t0 = time.perf_counter()
        zX = zarr.open_array(os.path.join(root, "X.zarr"), mode="w", shape=(args.rows, D),
                             chunks=(args.block, D), dtype="f8")
        zy = zarr.open_array(os.path.join(root, "y.zarr"), mode="w", shape=(args.rows,), chunks=(args.block,),
                             dtype="f8")
        for k, start in enumerate(range(0, args.rows, args.block)):
            n = min(args.block, args.rows - start)
            X, y = make_block(n, k)
            zX[start:start + n] = X
            zy[start:start + n] = y
        write = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
        print(f"\nwrote {args.rows:,} rows x {D} to Zarr in {write:.1f} s ({size / 2**30:.2f} GiB on disk)")

        kernel = sl.kernels.Matern(1.5, 1.0)
        feats = sl.HarmonicFeatures(3)
        feats.initialise(D + 1, None)
        feats.bind(kernel)
        n_mem = min(4_000_000, args.rows)
        Xm, ym = make_block(n_mem, 999)
        t0 = time.perf_counter()
        harmonic_statistics(kernel, feats, Xm, ym, progress=False)
        mem_rate = n_mem / (time.perf_counter() - t0)
        del Xm, ym

        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster):
            Xd, yd = da.from_zarr(os.path.join(root, "X.zarr")), da.from_zarr(os.path.join(root, "y.zarr"))
            t0 = time.perf_counter()
            harmonic_statistics(kernel, feats, Xd, yd, progress=False)
            pass_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            model = sl.VISH(sl.kernels.Matern(1.5, 1.0), 3, sl.likelihoods.Gaussian(0.1)).fit(Xd, yd)
            fit_s = time.perf_counter() - t0
            Xt, yt = make_block(100_000, 10**6)
            Xtd = da.from_array(Xt, chunks=(25_000, D))
            t0 = time.perf_counter()
            mean, var = model.predict_y(Xtd)
            mean, var = mean.compute(), var.compute()
            pred_s = time.perf_counter() - t0
        nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yt - mean) ** 2 / var))
        rate = args.rows / pass_s
        print("\n| measurement | value |\n| --- | --- |")
        print(f"| rows, block, workers | {args.rows:,}, {args.block:,}, {args.workers} x 1 thread |")
        print(f"| statistics pass through the cluster (M = {feats.num_features}) | {pass_s:.1f} s = "
              f"{rate / 1e6:.2f} M rows/s |")
        print(f"| in-memory pass, one process, {n_mem:,} rows | {mem_rate / 1e6:.2f} M rows/s |")
        print(f"| cluster rate / in-memory rate | {rate / mem_rate:.2f} (target >= 0.8) |")
        print(f"| VISH fit (lift subsample + pass + spectrum) | {fit_s:.1f} s ({model.passes} full pass(es)) |")
        print(f"| predict_y on 100,000 held-out rows | {pred_s:.2f} s |")
        print(f"| test NLPD (held-out) | {nlpd:.3f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        memory.stop.set()
        memory.thread.join()
    print("\n| process | peak RSS (MB) |\n| --- | --- |")
    total = 0
    for pid, (peak, name) in sorted(memory.peaks.items()):
        total += peak
        print(f"| {name} (pid {pid}) | {peak / 2**20:.0f} |")
    print(f"| all processes together | {total / 2**20:.0f} (target < 2048) |")
    print(f"store deleted: {not os.path.exists(root)}")


if __name__ == "__main__":
    main()
