"""The GPU path: parity of every CUDA kernel with the CPU, then CPU and device timings in the same run.

    python benchmarks/gpu.py                                     # a machine with a GPU (CuPy, numba-cuda)
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu.py --sim --tiny # smoke test in the CUDA simulator

On a GPU the kernels run through ``spherelab.backend.cuda_kernels.CudaOperations("gpu")``
(timed with a device synchronisation; the table's operations return host arrays, so their rows
include the copy back, except ``device_harmonics``); with ``--sim`` the same kernels run in
numba-cuda's simulator on NumPy arrays (timings then only show that the script runs). The model
rows (the statistics pass and VISH at 6e6 rows, decoupled minibatch steps against GPyTorch) run
the models with ``device="gpu"`` against ``device="cpu"`` in the same run.
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
        "harmonics (d = 9, L = 4)": (dev.device_harmonics(xp.asarray(Xh), plan),
                                     cpu.harmonics(Xh, plan, np.empty((7, plan.degrees.shape[0])))),
        "harmonics (host in, host out)": (dev.harmonics(Xh, plan, np.empty((7, plan.degrees.shape[0]))),
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
    out_host = np.empty((n_harm, M))
    rows = [
        (f"harmonics, d = 9, L = 4 (660 features), {n_harm:,} points (device result)",
         lambda: cpu.harmonics(X_host, plan, out_host), lambda: dev.device_harmonics(X_dev, plan)),
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
    print("\n### Models (CPU and device in the same run)\n")
    if device != "gpu":
        print("| measurement | result |\n| --- | --- |")
        for row in ("VISH, N = 6e6, M = 210", "VISH, N = 6e6, M = 660", "Gram pass / fp64 gemm rate",
                    "decoupled steps / s against GPyTorch SVGP"):
            print(f"| {row} | not measured: the simulator does not time a GPU |")
        models(rng, "sim", tiny=True)
        return
    models(rng, "gpu", tiny=args.tiny, sync=sync, xp=xp)


def models(rng, device, tiny=False, sync=lambda: None, xp=None):
    """The statistics pass, VISH fit + predict and decoupled minibatch steps, CPU and ``device``."""
    from spherelab.models.vish import harmonic_statistics

    n = 40 if tiny else 6_000_000
    X = rng.uniform(-1.5, 1.5, (n, 8))
    y = np.sin(X @ rng.standard_normal(8) / 3) + 0.1 * rng.standard_normal(n)
    dev_ops, cpu_ops = sl.backend.resolve(device), sl.backend.resolve("cpu")
    chunk = 16 if tiny else 131_072
    opts = {"maxiter": 2, "lift_maxiter": 2} if tiny else {}
    print("| measurement | CPU (s) | device (s) | CPU / device | note |\n| --- | --- | --- | --- | --- |")
    for degree in ((2,) if tiny else (3, 4)):
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0)
        feats = sl.HarmonicFeatures(degree)
        feats.initialise(9, None)
        feats.bind(kernel)
        M = feats.num_features
        t_cpu = timed(lambda: harmonic_statistics(kernel, feats, X, y, chunk_size=16384, ops=cpu_ops), sync, 1)
        t_dev = timed(lambda: harmonic_statistics(kernel, feats, X, y, chunk_size=chunk, ops=dev_ops), sync, 1)
        rate = 2.0 * M * M * n / t_dev / 1e9
        note = f"pass: {rate:.0f} GFLOP/s"
        if xp is not None:
            B = xp.asarray(rng.standard_normal((M, chunk)))
            gemm = 2.0 * M * M * chunk / timed(lambda: B @ B.T, sync, 3) / 1e9
            note += f" = {rate / gemm:.0%} of the card's fp64 gemm ({gemm:.0f} GFLOP/s)"
        print(f"| statistics pass, N = {n:,}, M = {M} | {t_cpu:.2f} | {t_dev:.2f} | {t_cpu / t_dev:.1f} | {note} |")

        def fit(dev):
            model = sl.VISH(sl.kernels.Matern(1.5, 1.0, bias=1.0), degree, sl.likelihoods.Gaussian(0.1), device=dev)
            model.chunk_size = chunk if dev != "cpu" else model.chunk_size
            model.fit(X, y, **opts)
            return model.predict_f(X[:100_000])

        t_cpu, t_dev = timed(lambda: fit("cpu"), sync, 1), timed(lambda: fit(device), sync, 1)
        print(f"| VISH fit + predict, N = {n:,}, M = {M} | {t_cpu:.2f} | {t_dev:.2f} | {t_cpu / t_dev:.1f} | "
              "transfers included |")
    Xs = X[: 20_000 if not tiny else 40]
    ys = y[: Xs.shape[0]]
    steps = 2 if tiny else 200
    Z = 4 if tiny else 64

    def svi(dev):
        model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 1.0), sl.InducingPoints(Xs[:Z]), Z,
                                  sl.likelihoods.Gaussian(0.1), device=dev)
        model.fit_svi(Xs, ys, batch_size=min(256, Xs.shape[0]), iterations=steps)

    t_cpu, t_dev = timed(lambda: svi("cpu"), sync, 1), timed(lambda: svi(device), sync, 1)
    print(f"| OrthogonalSVGP minibatch steps / s ({Z} + {Z} features, batch 256) | {steps / t_cpu:.1f} | "
          f"{steps / t_dev:.1f} | {t_cpu / t_dev:.2f} | GPyTorch: {gpytorch_steps(Xs, ys, steps) if not tiny else '-'} |")


def gpytorch_steps(X, y, steps):
    """Steps per second of GPyTorch's SVGP (128 inducing points, batch 256) on CUDA, or why not."""
    try:
        import gpytorch
        import torch
    except ImportError as exc:
        return f"not measured ({exc})"
    if not torch.cuda.is_available():
        return "not measured (no CUDA device for torch)"

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, Z):
            q = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
            super().__init__(gpytorch.variational.VariationalStrategy(self, Z, q, learn_inducing_locations=True))
            self.mean = gpytorch.means.ZeroMean()
            self.cov = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(1.5))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))

    dev = torch.device("cuda")
    Xt, yt = torch.as_tensor(X, device=dev), torch.as_tensor(y, device=dev)
    model = SVGP(Xt[:128].clone()).to(dev).double()
    lik = gpytorch.likelihoods.GaussianLikelihood().to(dev).double()
    opt = torch.optim.Adam([*model.parameters(), *lik.parameters()], lr=0.01)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=Xt.shape[0])
    gen = torch.Generator(device="cpu").manual_seed(0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(0, Xt.shape[0], (256,), generator=gen).to(dev)
        opt.zero_grad()
        loss = -mll(model(Xt[idx]), yt[idx])
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return f"{steps / (time.perf_counter() - t0):.1f} steps/s"


if __name__ == "__main__":
    main()
