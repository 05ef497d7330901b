"""Where a device's time goes in the steps the device check found slow: a profile per step.

    PYTHONPATH=lab python3 benchmarks/speed/device_profile.py --device gpu          # on a lent card
    NUMBA_ENABLE_CUDASIM=1 PYTHONPATH=lab python3 benchmarks/speed/device_profile.py --device sim --tiny

Five steps, each timed on the CPU and on ``--device`` in the same run, then profiled on the device
(cProfile, the functions with the most time of their own) with the host-device traffic that
passes through the operation table counted (calls and bytes of ``to_device``, ``to_host`` and the
pass's uploads; a kernel's own ``asarray`` of a small argument is not counted):

Two tables per step: the functions with the most time of their own, and spherelab's functions by
cumulative time.

1. OrthogonalSVGP's minibatch step as ``benchmarks/gpu_check.py`` times it (64 inducing points + 64
   orthogonal, batch 256, Matern-3/2): one ``objective`` call;
2. the same model's full-batch ELBO and gradient on 20 000 rows (the statistics path), and with 64
   softplus units (L = 6) or the spherical harmonics of degree 3 (210 on S^8) in place of the
   inducing points;
3. VISH's lift-stage evaluation (``elbo_and_gradient`` on a 20 000-row subsample, M = 210), which
   the device check measured slower on an H200 than on its 16-core host.

No result is asserted: the tables say where the time goes so that the device path can be built
against them (issue 30, item 2).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from _machine import describe, median_seconds  # noqa: E402

TRAFFIC: collections.Counter = collections.Counter()


def spy_transfers() -> None:
    """Count the table's host-device transfers (patched on the classes before any device starts)."""
    from spherelab.devices import transfer

    def wrap(cls, name):
        original = getattr(cls, name)

        def counted(self, *args, **kwargs):
            src = args[1] if name == "upload" else args[0]
            TRAFFIC[f"{name} calls"] += 1
            TRAFFIC[f"{name} bytes"] += int(src.nbytes if hasattr(src, "nbytes") else np.asarray(src).nbytes)
            return original(self, *args, **kwargs)

        setattr(cls, name, counted)

    for cls in (transfer.CupyArrays, transfer.HostArrays):
        for name in ("to_device", "to_host", "upload"):
            wrap(cls, name)


def profile(fn, calls: int, top: int) -> list[str]:
    TRAFFIC.clear()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    total = sum(v[2] for v in stats.stats.values())
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    lines = ["| function | calls per step | own ms per step | share |", "| --- | --- | --- | --- |"]
    for (file, line, func), (_, ncalls, tt, _ct, _) in rows:
        where = f"{Path(file).name}:{line} {func}" if line else func
        lines.append(f"| `{where}` | {ncalls / calls:.0f} | {1e3 * tt / calls:.3f} | {tt / total:.2f} |")
    ours = sorted(((k, v) for k, v in stats.stats.items() if "spherelab" in k[0]), key=lambda kv: -kv[1][3])
    lines += ["", "| spherelab function | calls per step | cumulative ms per step |", "| --- | --- | --- |"]
    for (file, line, func), (_, ncalls, _tt, ct, _) in ours[:top]:
        lines.append(f"| `{Path(file).parent.name}/{Path(file).name}:{line} {func}` | {ncalls / calls:.0f} | "
                     f"{1e3 * ct / calls:.3f} |")
    traffic = ", ".join(f"{k} {v / calls:,.0f}" for k, v in sorted(TRAFFIC.items())) or "none counted"
    lines.append("")
    lines.append(f"Transfers per step: {traffic}.")
    return lines


def steps(sl, device: str, tiny: bool):
    rng = np.random.default_rng(0)
    n, Z, batch, m_deg = (60, 4, 16, 2) if tiny else (20_000, 64, 256, 3)
    X = rng.uniform(-1, 1, (n, 8))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(n)

    def decoupled(dev, units=False):
        feats = {False: sl.InducingPoints(X[:Z]), True: sl.ActivatedFeatures(sl.activations.Softplus(), Z, 6),
                 "harmonics": sl.HarmonicFeatures(m_deg)}[units]
        model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 1.0), feats, Z, sl.likelihoods.Gaussian(0.1), device=dev)
        model.initialise(X)
        return model, model.parameter_vector()

    def minibatch(dev):
        model, theta = decoupled(dev)
        idx = np.random.default_rng(1).choice(n, batch, replace=False)
        return lambda: model.objective(theta, X[idx], y[idx], num_data=n)

    def full_batch(dev, units=False):
        model, theta = decoupled(dev, units)
        hold = model.holding_rows(X, y)  # as a fit holds them: the rows on the device, copied once
        hold.__enter__()
        return lambda: hold and model.objective(theta, X, y)  # (the step keeps the hold alive)

    def lift_eval(dev):
        kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, np.sqrt(8.0)))
        model = sl.VISH(kernel, m_deg, sl.likelihoods.Gaussian(0.1), device=dev)
        model.fit(X[: n // 10], y[: n // 10], optimize=False)  # the features, at the given lift
        return lambda: model.elbo_and_gradient(X, y)

    return [(f"OrthogonalSVGP minibatch step, {Z} + {Z}, batch {batch}", minibatch),
            (f"OrthogonalSVGP full batch, {Z} + {Z}, {n:,} rows", full_batch),
            (f"OrthogonalSVGP full batch, {Z} softplus units (L = 6) + {Z}, {n:,} rows",
             lambda dev: full_batch(dev, units=True)),
            (f"OrthogonalSVGP full batch, harmonics of degree {m_deg} + {Z}, {n:,} rows",
             lambda dev: full_batch(dev, units="harmonics")),
            (f"VISH lift-stage evaluation, degree {m_deg}, {n:,} rows", lift_eval)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="gpu", choices=["gpu", "sim"])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the simulator runs threads in Python)")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if args.device == "sim":
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    spy_transfers()
    import spherelab as sl

    print(f"Device profile, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: device {args.device}; "
          f"{describe()}\n")
    repeat, calls = (1, 1) if args.tiny else (5, 10)
    for title, make in steps(sl, args.device, args.tiny):
        cpu = median_seconds(make("cpu"), repeat)
        step = make(args.device)
        dev = median_seconds(step, repeat)
        print(f"## {title}\n")
        print(f"CPU {1e3 * cpu:.2f} ms, {args.device} {1e3 * dev:.2f} ms per step (median of {repeat}, after a "
              f"warm-up); the {args.device} profile over {calls} steps:\n")
        print("\n".join(profile(step, calls, args.top)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
