"""VISH against GPflow SGPR / SVGP and GPyTorch SVGP at N = 2x10^4 (synthetic 8-input
regression, ``spherelab.datasets.synthetic_regression``), all in one process run: wall time of
fit + predict and test NLPD on 20 000 fresh points. VISH: M = 210 harmonics (degree 3 on S^8),
Matern-3/2 at chordal distance, default ``fit``. Peers: 210 Matern-3/2 inducing points (ARD),
initialised at random training inputs; SGPR by scipy L-BFGS-B (GPflow's Scipy, maxiter 1000);
SVGP by Adam (lr 0.01, batch 256, ``--svgp-iters`` steps).

Needs a separate environment with the peers (not a dependency of spherelab):

    python -m venv .venv-bench && .venv-bench/bin/pip install torch==2.13.0 gpytorch gpflow \
        tensorflow-cpu tf-keras "tensorflow-probability[tf]" && .venv-bench/bin/pip install -e .
    .venv-bench/bin/python benchmarks/speed/vish_peers.py
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


def nlpd(y, mean, var):
    return float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))


def run_vish(X, y, Xte, yte, degree=3, prior="kernel"):
    D = X.shape[1]
    kernel = sl.kernels.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))
    t0 = time.perf_counter()
    model = sl.VISH(kernel, degree, sl.likelihoods.Gaussian(0.1), prior=prior).fit(X, y)
    mean, var = model.predict_y(Xte)
    return (time.perf_counter() - t0, nlpd(yte, mean, var),
            f"M = {model.features.num_features}, prior {prior}, passes {model.passes}")


def load_real(name):
    """Split 0 of a UCI set from ../shared/data, standardised with the training statistics."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[3] / "shared" / "data"
    Xtr, ytr, Xte, yte = sl.datasets.load_uci(name, 0, data_dir_=data)
    st = sl.datasets.Standardizer().fit(Xtr, ytr)
    (Xtr, ytr), (Xte, yte) = st.transform(Xtr, ytr), st.transform(Xte, yte)
    return Xtr, ytr, Xte, yte


def run_gpflow(X, y, Xte, yte, M, svgp_iters, rng, which=("sgpr", "gpflow-svgp")):
    import gpflow

    Z = X[rng.choice(X.shape[0], M, replace=False)].copy()
    out = {}
    if "sgpr" in which:
        out.update(_sgpr(X, y, Xte, yte, Z))
    if "gpflow-svgp" not in which:
        return out
    t0 = time.perf_counter()
    k = gpflow.kernels.Matern32(lengthscales=np.ones(X.shape[1]))
    m = gpflow.models.SVGP(k, gpflow.likelihoods.Gaussian(0.1), Z.copy(), num_data=X.shape[0])
    return _svgp_tail(m, X, y, Xte, yte, svgp_iters, rng, t0, out)


def _sgpr(X, y, Xte, yte, Z):
    import gpflow

    out = {}
    t0 = time.perf_counter()
    k = gpflow.kernels.Matern32(lengthscales=np.ones(X.shape[1]))
    m = gpflow.models.SGPR((X, y[:, None]), kernel=k, inducing_variable=Z.copy(), noise_variance=0.1)
    res = gpflow.optimizers.Scipy().minimize(m.training_loss, m.trainable_variables, options={"maxiter": 1000})
    mean, var = m.predict_y(Xte)
    t = time.perf_counter() - t0
    out["GPflow SGPR"] = (t, nlpd(yte, mean.numpy()[:, 0], var.numpy()[:, 0]), f"{res.nit} L-BFGS-B iterations")
    return out


def _svgp_tail(m, X, y, Xte, yte, svgp_iters, rng, t0, out):
    import tensorflow as tf

    opt = tf.optimizers.Adam(0.01)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = m.training_loss((xb, yb))
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))

    for _ in range(svgp_iters):
        idx = rng.choice(X.shape[0], 256, replace=False)
        step(tf.constant(X[idx]), tf.constant(y[idx, None]))
    mean, var = m.predict_y(Xte)
    out["GPflow SVGP"] = (
        time.perf_counter() - t0,
        nlpd(yte, mean.numpy()[:, 0], var.numpy()[:, 0]),
        f"{svgp_iters} Adam steps",
    )
    return out


def run_gpytorch(X, y, Xte, yte, M, svgp_iters, rng):
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    Z = torch.from_numpy(X[rng.choice(X.shape[0], M, replace=False)].copy())

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            vd = gpytorch.variational.CholeskyVariationalDistribution(M)
            vs = gpytorch.variational.VariationalStrategy(self, Z, vd, learn_inducing_locations=True)
            super().__init__(vs)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.MaternKernel(1.5, ard_num_dims=X.shape[1])
            )

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    t0 = time.perf_counter()
    model, lik = Model(), gpytorch.likelihoods.GaussianLikelihood()
    lik.noise = 0.1
    model.train()
    lik.train()
    opt = torch.optim.Adam(list(model.parameters()) + list(lik.parameters()), lr=0.01)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=X.shape[0])
    g = torch.Generator().manual_seed(0)
    for _ in range(svgp_iters):
        idx = torch.randint(0, X.shape[0], (256,), generator=g)
        opt.zero_grad()
        loss = -mll(model(Xt[idx]), yt[idx])
        loss.backward()
        opt.step()
    model.eval()
    lik.eval()
    with torch.no_grad():
        pred = lik(model(torch.from_numpy(Xte)))
        mean, var = pred.mean.numpy(), pred.variance.numpy()
    return {"GPyTorch SVGP": (time.perf_counter() - t0, nlpd(yte, mean, var), f"{svgp_iters} Adam steps")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--svgp-iters", type=int, default=3000)
    parser.add_argument("--peers", nargs="*", default=["sgpr", "gpflow-svgp", "gpytorch"],
                        help="which peers to run (sgpr, gpflow-svgp, gpytorch)")
    parser.add_argument("--dataset", default="synthetic",
                        help="synthetic (N = --n) or a UCI set of ../shared/data (split 0): kin8nm, power, protein")
    parser.add_argument("--degree", type=int, default=3, help="VISH's degree (M = 210 at d = 9)")
    args = parser.parse_args()
    print("machine:", describe())
    if args.dataset == "synthetic":
        X, y = sl.datasets.synthetic_regression(args.n, seed=1)
        Xte, yte = sl.datasets.synthetic_regression(20_000, seed=123)
    else:
        X, y, Xte, yte = load_real(args.dataset)
    M = sl.cumulative_num_harmonics(args.degree, X.shape[1] + 1)
    print(f"\n{args.dataset}: N = {X.shape[0]:,}, {X.shape[1]} inputs, {M} inducing variables; "
          f"test NLPD on {Xte.shape[0]:,} points")
    print("| model | fit + predict (s) | time / VISH | test NLPD | note |")
    print("| --- | --- | --- | --- | --- |")
    base = None
    for prior in ("kernel", "features"):
        t, v, note = run_vish(X, y, Xte, yte, args.degree, prior)
        base = t if base is None else base
        print(f"| spherelab VISH | {t:.1f} | {t / base:.2f}x | {v:.3f} | {note} |", flush=True)
    rng = np.random.default_rng(0)
    runners = []
    if {"sgpr", "gpflow-svgp"} & set(args.peers):
        runners.append(lambda: run_gpflow(X, y, Xte, yte, M, args.svgp_iters, rng, args.peers))
    if "gpytorch" in args.peers:
        runners.append(lambda: run_gpytorch(X, y, Xte, yte, M, args.svgp_iters, rng))
    for runner in runners:
        try:
            for name, (t, v, note) in runner().items():
                print(f"| {name} | {t:.1f} | {t / base:.2f}x | {v:.3f} | {note} |", flush=True)
        except ImportError as exc:
            print(f"skipped a peer: {exc}")


if __name__ == "__main__":
    main()
