"""The rows floor's one loop on the host against the passes it replaced, in the same run: one ELBO +
gradient evaluation on kin8nm's training split (N = 7 373, D = 8), on n of its rows.

* Decoupled models (Matérn-5/2; 128 softplus units + 128 orthogonal points, 256 units, 256 inducing
  points): the floor (each chunk lifted once, the features' column blocks, the chunks dealt to the
  cores) against the features' own pass (``Kuf``, ``K`` and their gradients on the raw rows).
* HVGP (8 blocks of 64, ``Reflection.pca(X, 3)``): the floor against the dense bound (every
  block's K_uf at once), which stays the CPU's below ``DeviceBlocks.host_rows_per_inducing`` rows
  per inducing variable.
* VISH (Matérn-5/2, every harmonic to degree 3 and 4: M = 210 and 660): the lift stage's collapsed
  bound and gradient, and predictions at 8 N rows, on the floor against the features' own host
  pass (``lift_statistics``, ``lift_gradient``, ``predict_rows``), which phase-truncated and
  additive harmonics keep.

Each cell is the best of ``--repeats`` evaluations, the two contenders alternating, under the
package's thread policy as inside a fit.

    python benchmarks/speed/rows_floor.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab import kernels as K  # noqa: E402
from spherelab.rows.decoupled import StatisticsPath  # noqa: E402
from spherelab.rows.hvgp import DeviceBlocks  # noqa: E402
from spherelab.rows.vish import ResidentLift  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def best_of(pair, repeats):
    """Best times of two evaluations, alternating (each once first, untimed: compilation, caches)."""
    times = [[], []]
    for f in pair:
        f()
    for _ in range(repeats):
        for k, f in enumerate(pair):
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return [min(t) for t in times]


class Without:
    """The class attribute ``name`` of ``cls`` replaced by ``value`` while inside."""

    def __init__(self, cls, name, value):
        self.cls, self.name, self.value = cls, name, value

    def __enter__(self):
        self.old = inspect.getattr_static(self.cls, self.name)  # a staticmethod stays one
        setattr(self.cls, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.cls, self.name, self.old)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("machine:", describe())
    sl.warmup()
    X, y, _, _ = sl.datasets.load_uci("kin8nm", 0, data_dir_=SHARED)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    N = X.shape[0]
    rng = np.random.default_rng(0)

    print("\n### Decoupled models: the floor against the features' own pass\n")
    print("| model | rows | floor (ms) | own pass (ms) | floor / own |")
    print("| --- | --- | --- | --- | --- |")
    models = {
        "128 softplus units (L = 6) + 128 orthogonal": (sl.ActivatedFeatures(A.Softplus(1.0), 128, 6), 128),
        "256 softplus units (L = 6)": (sl.ActivatedFeatures(A.Softplus(1.0), 256, 6), 0),
        "256 inducing points": (sl.InducingPoints(X[rng.choice(N, 256, replace=False)]), 0),
    }
    for name, (features, orth) in models.items():
        model = sl.OrthogonalSVGP(K.Matern(2.5, 1.0), features, orth, sl.likelihoods.Gaussian(1.0))
        model.initialise(X, seed=0)
        theta = model.parameter_vector()
        for n in (1024, 2048, N):
            def floor(n=n):
                return model.objective(theta, X[:n], y[:n], num_data=N)

            def own(n=n):
                with Without(StatisticsPath, "has_device_blocks", lambda self: False):
                    return model.objective(theta, X[:n], y[:n], num_data=N)

            a, b = best_of((floor, own), args.repeats)
            print(f"| {name} | {n} | {1e3 * a:.0f} | {1e3 * b:.0f} | {a / b:.2f} |", flush=True)

    print("\n### HVGP: the floor against the dense bound\n")
    print("| model | rows | rows / inducing | floor (ms) | dense (ms) | floor / dense |")
    print("| --- | --- | --- | --- | --- | --- |")
    group = sl.groups.Reflection.pca(X, 3)
    model = sl.HarmonicSVGP(K.Matern(2.5, 1.0), group, 64, sl.likelihoods.Gaussian(0.3))
    model.fit(X[:2000], y[:2000], optimize=False)
    P = sum(model.sizes)
    for n in (256, 512, 768, 1024, 2048, N):
        def on_floor(n=n):
            with Without(DeviceBlocks, "host_rows_per_inducing", 0):
                return model.elbo_and_gradient(X[:n], y[:n], N)

        def dense(n=n):
            with Without(DeviceBlocks, "applies", lambda self, rows: False):
                return model.elbo_and_gradient(X[:n], y[:n], N)

        a, b = best_of((on_floor, dense), args.repeats)
        print(f"| HVGP {model.num_blocks} x 64 | {n} | {n / P:.2f} | {1e3 * a:.0f} | {1e3 * b:.0f} | {a / b:.2f} |",
              flush=True)


    print("\n### VISH: the floor against the features' own pass\n")
    print("| model | what | rows | floor (ms) | own pass (ms) | floor / own |")
    print("| --- | --- | --- | --- | --- | --- |")
    own_pass = staticmethod(lambda model: False)
    X8 = np.vstack([X] * 8)
    for degree in (3, 4):
        model = sl.VISH(K.Matern(2.5, 1.0), degree, sl.likelihoods.Gaussian(0.3))
        model.fit(X, y, optimize=False)
        M = model.features.num_features
        cases = [("bound + gradient", n, lambda n=n: model.elbo_and_gradient(X[:n], y[:n])) for n in (2048, N)]
        cases.append(("predict_f", X8.shape[0], lambda: model.predict_f(X8)))
        for what, n, run in cases:
            def own(run=run):
                with Without(ResidentLift, "applies", own_pass):
                    return run()

            a, b = best_of((run, own), args.repeats)
            print(f"| VISH M = {M} | {what} | {n} | {1e3 * a:.0f} | {1e3 * b:.0f} | {a / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
