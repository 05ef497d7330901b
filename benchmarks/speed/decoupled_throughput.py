"""Optimiser throughput of the orthogonally-decoupled model (seed 003 §3.5): ELBO + gradient
evaluations per second, full batch, on a UCI training split, for

* ours: 128 activated units (softplus, L = 6) + 128 orthogonal points, Matern-5/2;
* activated SVGP with 256 units; SVGP with 256 inducing points (both spherelab);
* GPflow SVGP with M + K = 256 inducing points (its compiled loss and gradient), if importable.

Ours run under the package's thread policy (``spherelab.threads``), as inside ``fit``. One
L-BFGS-B iteration costs about one evaluation, so this is the iterations-per-second figure
of seed 003 Figs. 3.9-3.11. Run in an environment with GPflow for the peer column:

    .venv-bench/bin/python benchmarks/speed/decoupled_throughput.py [--dataset kin8nm] [--repeats 5]
"""

from __future__ import annotations

import argparse
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

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def timed(fn, repeats):
    fn()  # warm-up (compilation, caches)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="kin8nm")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="minibatch size (0: full batch)")
    args = parser.parse_args()
    print("machine:", describe())
    X, y, _, _ = sl.datasets.load_uci(args.dataset, 0, data_dir_=SHARED)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    rng = np.random.default_rng(0)
    N = X.shape[0]
    Xfull = X
    if args.batch:  # the ELBO estimate on one minibatch, data term scaled by N / B
        idx = rng.choice(N, args.batch, replace=False)
        X, y = X[idx], y[idx]
    rows = {}

    def ours(features, num_orth):
        model = sl.OrthogonalSVGP(K.Matern(2.5, 1.0), features, num_orth, sl.likelihoods.Gaussian(1.0))
        model.initialise(Xfull, seed=0)
        theta = model.parameter_vector()
        return timed(lambda: model.objective(theta, X, y, num_data=N), args.repeats)

    rows["ours: 128 softplus units (L = 6) + 128 orthogonal"] = ours(sl.ActivatedFeatures(A.Softplus(1.0), 128, 6), 128)
    rows["activated SVGP: 256 softplus units (L = 6)"] = ours(sl.ActivatedFeatures(A.Softplus(1.0), 256, 6), 0)
    rows["SVGP: 256 inducing points (spherelab)"] = ours(sl.InducingPoints(Xfull[rng.choice(N, 256, replace=False)]), 0)
    try:
        import gpflow
        import tensorflow as tf

        Z = Xfull[rng.choice(N, 256, replace=False)].copy()
        model = gpflow.models.SVGP(gpflow.kernels.Matern52(lengthscales=np.ones(X.shape[1])),
                                   gpflow.likelihoods.Gaussian(1.0), Z, num_data=N)
        data = (tf.constant(X), tf.constant(y[:, None]))

        @tf.function
        def loss_and_grad():
            with tf.GradientTape() as tape:
                loss = model.training_loss(data)
            return loss, tape.gradient(loss, model.trainable_variables)

        rows["GPflow SVGP: 256 inducing points"] = timed(lambda: loss_and_grad(), args.repeats)
    except ImportError as exc:
        print(f"(GPflow not importable: {exc})")
    ref = rows.get("GPflow SVGP: 256 inducing points")
    batch = f"minibatch of {args.batch}" if args.batch else "full batch"
    # the evaluation's O(P^2 B) arithmetic (B = rows evaluated, P = 256): forward solve, Gram or
    # predictive products, their backward (about 6 P^2 B) plus O(P^3) for the inducing block
    B, P = X.shape[0], 256
    flops = 6.0 * P * P * B + 4.0 * P ** 3
    a, b = np.ones((P, B)), np.ones((B, P))
    a @ b
    t0 = time.perf_counter()
    for _ in range(5):
        a @ b
    dgemm = 2.0 * P * P * B * 5 / (time.perf_counter() - t0) / 1e9
    print(f"\n{args.dataset} split 0, N = {N}, D = {X.shape[1]}; ELBO + gradient on a {batch}; "
          f"{flops / 1e9:.2f} GFLOP per evaluation (6 P^2 B + 4 P^3); dgemm on (P, B) x (B, P) here: {dgemm:.1f} GFLOP/s")
    print("| model | evaluations / s | ms / evaluation | GFLOP/s | of dgemm | vs GPflow SVGP (M = 256) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, t in rows.items():
        ratio = f"{ref / t:.2f}x" if ref else "n/a"
        rate = flops / t / 1e9
        print(f"| {name} | {1 / t:.2f} | {1e3 * t:.0f} | {rate:.1f} | {rate / dgemm:.2f} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
