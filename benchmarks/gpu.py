"""The GPU path: parity of every CUDA kernel with the CPU, then CPU and device timings in the same run.

    python benchmarks/gpu.py                                     # a machine with a GPU (CuPy, numba-cuda)
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu.py --sim --tiny # smoke test in the CUDA simulator

On a GPU the kernels run through ``spherelab.backend.cuda_kernels.CudaOperations("gpu")`` on CuPy
arrays (timed with a device synchronisation, transfers included where stated); with ``--sim`` the
same kernels run in numba-cuda's simulator on NumPy arrays (timings then only show that the
script runs). The model-level rows (VISH at 6e6 rows, decoupled steps against GPyTorch) need the
complete GPU table (``spherelab.backend.resolve("gpu")``); while it is incomplete they print
"not measured" with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402


def timed(fn, sync, repeat=3):
    fn()
    sync()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sim", action="store_true", help="the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the simulator is slow)")
    args = parser.parse_args()
    print("machine:", describe())
    device = "sim" if args.sim else "gpu"
    if device == "gpu" and not sl.backend.gpu_available():
        print(f"no usable GPU ({sl.backend.gpu_unavailable_reason()}): every GPU row not measured")
        return
    from spherelab.backend.cuda_kernels import CudaOperations

    dev = CudaOperations(device)
    cpu = sl.backend.resolve("cpu")
    xp = dev.xp

    def to_host(a):
        return a.get() if hasattr(a, "get") else np.asarray(a)

    def sync():
        if device == "gpu":
            xp.cuda.runtime.deviceSynchronize()

    rng = np.random.default_rng(0)
    # ---- parity -------------------------------------------------------------------------
    t = rng.uniform(-1, 1, 33)
    c = rng.standard_normal(9)
    T = rng.uniform(-1, 1, (6, 5))
    G = rng.standard_normal((6, 5))
    r1, r2 = rng.uniform(0.5, 2, 6), rng.uniform(0.5, 2, 5)
    from spherelab.sphere.harmonics_plan import build_plan

    plan = build_plan(9, 4)
    Xh = sl.sample_sphere(7, 9, rng=rng)
    Wh = rng.standard_normal((7, plan.degrees.shape[0]))
    checks = {
        "harmonics (d = 9, L = 4)": (dev.harmonics(xp.asarray(Xh), plan, xp.empty((7, plan.degrees.shape[0]))),
                                     cpu.harmonics(Xh, plan, np.empty((7, plan.degrees.shape[0])))),
        "harmonics_vjp": (dev.harmonics_vjp(xp.asarray(Xh), xp.asarray(Wh), plan), cpu.harmonics_vjp(Xh, Wh, plan)),
        "gegenbauer_table": (dev.gegenbauer_table(12, 1.5, xp.asarray(t)), cpu.gegenbauer_table(12, 1.5, t)),
        "gegenbauer_derivative_table": (dev.gegenbauer_derivative_table(12, 1.5, xp.asarray(t)),
                                        cpu.gegenbauer_derivative_table(12, 1.5, t)),
        "clenshaw (+ derivative)": (dev.clenshaw(c, 1.5, xp.asarray(t), True)[1], cpu.clenshaw(c, 1.5, t, True)[1]),
        "matern_values": (dev.matern_values(xp.asarray(T), r1, r2, 1, 0.7, 1.3, False),
                          cpu.matern_values(T, r1, r2, 1, 0.7, 1.3, False)),
        "matern_backward (A)": (dev.matern_backward(xp.asarray(T), xp.asarray(G), r1, r2, 0, 0.7, 1.3, False)[0],
                                cpu.matern_backward(T, G, r1, r2, 0, 0.7, 1.3, False)[0]),
    }
    print(f"\n### Parity with the CPU ({device})\n")
    print("| kernel | max abs difference |")
    print("| --- | --- |")
    for name, (a, b) in checks.items():
        print(f"| {name} | {np.abs(to_host(a) - b).max():.2e} |")

    # ---- timings ------------------------------------------------------------------------
    n_points = 256 if args.tiny else 10_000_000
    n_gram = 16 if args.tiny else 4096
    t_host = rng.uniform(-1, 1, n_points)
    t_dev = xp.asarray(t_host)
    Tg = rng.uniform(-1, 1, (n_gram, n_gram))
    Tg_dev = xp.asarray(Tg)
    rg = np.ones(n_gram)
    n_harm = 64 if args.tiny else 1_000_000
    X_host = sl.sample_sphere(n_harm, 9, rng=rng)
    X_dev = xp.asarray(X_host)
    M = plan.degrees.shape[0]
    out_host, out_dev = np.empty((n_harm, M)), xp.empty((n_harm, M))
    rows = [
        (f"harmonics, d = 9, L = 4 (660 features), {n_harm:,} points",
         lambda: cpu.harmonics(X_host, plan, out_host), lambda: dev.harmonics(X_dev, plan, out_dev)),
        (f"Gegenbauer table, L = 20, {n_points:,} points",
         lambda: cpu.gegenbauer_table(20, 3.5, t_host), lambda: dev.gegenbauer_table(20, 3.5, t_dev)),
        (f"Clenshaw series, L = 8, {n_points:,} points",
         lambda: cpu.clenshaw(c, 3.5, t_host), lambda: dev.clenshaw(c, 3.5, t_dev)),
        (f"Matérn-5/2 Gram values, {n_gram} x {n_gram}",
         lambda: cpu.matern_values(Tg, rg, rg, 1, 0.7, 1.0, False),
         lambda: dev.matern_values(Tg_dev, rg, rg, 1, 0.7, 1.0, False)),
    ]
    print(f"\n### Timings, CPU ({os.cpu_count()} cores) and {device}, same run (best of 3)\n")
    print(f"| operation | CPU (s) | {device} (s) | CPU / {device} |")
    print("| --- | --- | --- | --- |")
    for name, f_cpu, f_dev in rows:
        a, b = timed(f_cpu, lambda: None), timed(f_dev, sync)
        print(f"| {name} | {a:.4f} | {b:.4f} | {a / b:.2f} |")

    # ---- models ---------------------------------------------------------------------------
    try:
        sl.backend.resolve(device if device == "gpu" else "cpu")
        reason = None if device == "gpu" else "the simulator does not time a GPU"
    except RuntimeError as exc:
        reason = str(exc)
    print("\n### Models\n")
    print("| measurement | result |")
    print("| --- | --- |")
    for row in ("VISH, N = 6e6, M = 210", "VISH, N = 6e6, M = 660", "Gram pass / fp64 gemm rate",
                "decoupled steps / s against GPyTorch SVGP"):
        print(f"| {row} | not measured: {reason} |" if reason else f"| {row} | (see above) |")


if __name__ == "__main__":
    main()
