"""Where a decoupled model's full-batch ELBO + gradient spends its time (issue 30): each part of
``OrthogonalSVGP.objective`` on the sufficient-statistics path, timed on its own with the public
pieces the model uses, with its flop count and its rate against this machine's measured dgemm.

Rows: the three spherelab models of ``decoupled_throughput.py`` (kin8nm split 0, N = 7 373, 8 inputs):
128 softplus units (L = 6) + 128 orthogonal points, activated SVGP with 256 units, SVGP with 256
inducing points; Matérn-5/2. Parts:

* ``K_pf``: the features' covariances with the rows (and K(W, X));
* ``solve``: :math:`A = L_J^{-1}K_{pf}` (forward substitution, :func:`spherelab.linalg.forward_solve`, P^2 N flops);
* ``Gram``: :math:`\\Phi = AA^\\top`, :math:`\\beta = Ay` (2 P^2 N);
* ``bound``: the O(P^3) algebra on the statistics and the inducing block's backward;
* ``dK_pf``: :math:`L_J^{-\\top}(2\\,d\\Phi\\,A + d\\beta\\,y^\\top)` (2 P^2 N + P^2 N for the solve);
* ``backward``: the rows' chain rule to hyper-parameters, unit weights / inducing inputs and W;
* ``objective``: the whole call, as L-BFGS-B makes it (the parts' sum less overlap and overheads).

With ``--batch B`` (below 3P, the per-row path a minibatch step takes), the parts of one minibatch
evaluation instead: the matrices (K_uu, K_uf, k_ff and the orthogonal blocks), the whitened bound
with its matrix derivatives (:func:`~spherelab.bounds.orthogonal_bound_whitened`), the inducing
block's chain rule, the rows' chain rule, and the whole objective.

    .venv/bin/python benchmarks/speed/decoupled_profile.py [--repeats 5] [--batch 256]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy.linalg import solve_triangular

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import spherelab as sl  # noqa: E402
from _machine import describe, median_seconds  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab import kernels as K  # noqa: E402
from spherelab.bounds import gaussian_stats_bound_whitened, joint_cholesky, orthogonal_bound_whitened  # noqa: E402
from spherelab.linalg import forward_solve  # noqa: E402
from spherelab.threads import policy  # noqa: E402


def dgemm_rate(P, N, repeats=9):
    """The machine's dgemm rate on the pass's shape, its best of ``repeats`` (OpenBLAS's threads)."""
    a, b = np.random.default_rng(0).standard_normal((P, N)), np.random.default_rng(1).standard_normal((N, P))
    a @ b
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - t0)
    return 2.0 * P * P * N / min(seconds) / 1e9


def profile(name, model, X, y, repeats):
    N = X.shape[0]
    model.initialise(X, seed=0)
    kern, feats = model.kernel, model.features
    M, Kn = feats.num_features, model.num_orthogonal
    P = M + Kn
    jit = lambda Kmat: Kmat + model.jitter * np.mean(np.diag(Kmat)) * np.eye(Kmat.shape[0])
    W = model.W

    def inducing():
        Kuu = jit(feats.Kuu(kern))
        if Kn:
            return Kuu, jit(kern.K(W)), feats.Kuf(kern, W).T
        return Kuu, np.zeros((0, 0)), np.zeros((0, M))

    def kpf():
        Kuf = feats.Kuf(kern, X)
        return np.vstack([Kuf, kern.K(W, X)]) if Kn else Kuf

    LJ = joint_cholesky(*inducing())
    Kpf = kpf()
    Amat = forward_solve(LJ, Kpf)
    Phi, beta = Amat @ Amat.T, Amat @ y
    kdiag = kern.diag(X)
    q = (model.m_u, model.L_u, model.m_v, model.L_v)
    res = gaussian_stats_bound_whitened(LJ, M, Phi, beta, float(kdiag.sum()), float(y @ y), N, *q,
                                        model.likelihood.variance, N)
    Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
    qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
    dKpf = Q @ Amat + np.outer(qb, y)

    def bound():
        L = joint_cholesky(*inducing())
        r = gaussian_stats_bound_whitened(L, M, Phi, beta, float(kdiag.sum()), float(y @ y), N, *q,
                                          model.likelihood.variance, N)
        feats.Kuu_gradients(kern, r.dKuu)
        if Kn:
            kern.gradients_with_inputs(0.5 * (r.dKvv + r.dKvv.T), W)
            feats.Kuf_gradients(kern, r.dKvu.T, W)

    def backward():
        feats.Kuf_gradients(kern, dKpf[:M], X)
        kern.diag_gradients(np.full(N, res.dkff), X)
        if Kn:
            kern.gradients_with_inputs(dKpf[M:], W, X)

    theta = model.parameter_vector()
    parts = [
        ("K_pf", kpf, 0.0),
        ("solve", lambda: forward_solve(LJ, Kpf), P * P * N),
        ("Gram", lambda: (Amat @ Amat.T, Amat @ y), 2.0 * P * P * N),
        ("bound", bound, 0.0),
        ("dK_pf", lambda: (2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)) @ Amat, 3.0 * P * P * N),
        ("backward", backward, 0.0),
        ("objective", lambda: model.objective(theta, X, y), 6.0 * P * P * N),
    ]
    rate = dgemm_rate(P, N)
    rows = []
    for part, fn, flops in parts:
        # each part under the thread policy the objective runs in (its work and dimension)
        with policy(2.0 * N * P * P + float(P) ** 3, P):
            t = median_seconds(fn, repeats)
        gf = flops / t / 1e9 if flops else float("nan")
        rows.append((part, t, flops, gf, gf / rate if flops else float("nan")))
    print(f"\n{name}: N = {N}, M = {M}, K = {Kn}, P = {P}; dgemm (P x N) @ (N x P) here: {rate:.1f} GFLOP/s")
    print("| part | ms | share of objective | GFLOP | GFLOP/s | of dgemm |")
    print("| --- | --- | --- | --- | --- | --- |")
    total = rows[-1][1]
    for part, t, flops, gf, frac in rows:
        share = f"{t / total:.2f}" if part != "objective" else "1"
        flop_s = f"{flops / 1e9:.2f}" if flops else "-"
        print(f"| {part} | {1e3 * t:.1f} | {share} | {flop_s} | {'-' if np.isnan(gf) else f'{gf:.1f}'} | "
              f"{'-' if np.isnan(frac) else f'{frac:.2f}'} |", flush=True)


def profile_minibatch(name, model, X, y, batch, repeats):
    """The parts of one minibatch evaluation on the per-row path (``batch`` < 3P): the matrices, the
    whitened bound with its matrix derivatives, the inducing block's and the rows' chain rule."""
    N = X.shape[0]
    model.initialise(X, seed=0)
    kern, feats, W = model.kernel, model.features, model.W
    M, Kn = feats.num_features, model.num_orthogonal
    idx = np.random.default_rng(1).choice(N, batch, replace=False)
    Xb, yb = X[idx], y[idx]
    jit = lambda Kmat: Kmat + model.jitter * np.mean(np.diag(Kmat)) * np.eye(Kmat.shape[0])

    def matrices():
        Kuu, Kuf, kff = jit(feats.Kuu(kern)), feats.Kuf(kern, Xb), kern.diag(Xb)
        if Kn:
            return Kuu, Kuf, kff, jit(kern.K(W)), feats.Kuf(kern, W).T, kern.K(W, Xb)
        return Kuu, Kuf, kff, np.zeros((0, 0)), np.zeros((0, M)), np.zeros((0, batch))

    Kuu, Kuf, kff, Kvv, Kvu, Kvf = matrices()

    def bound():
        return orthogonal_bound_whitened(Kuu, Kuf, kff, model.m_u, model.L_u, Kvv, Kvu, Kvf, model.m_v, model.L_v,
                                         yb, model.likelihood, N)

    res = bound()

    def inducing():
        feats.Kuu_gradients(kern, res.dKuu)
        if Kn:
            kern.gradients_with_inputs(0.5 * (res.dKvv + res.dKvv.T), W)
            feats.Kuf_gradients(kern, res.dKvu.T, W)

    def rows():
        feats.Kuf_gradients(kern, res.dKuf, Xb)
        kern.diag_gradients(res.dkff, Xb)
        if Kn:
            kern.gradients_with_inputs(res.dKvf, W, Xb)

    theta = model.parameter_vector()
    parts = [("matrices", matrices), ("bound", bound), ("inducing chain", inducing), ("rows chain", rows),
             ("objective", lambda: model.objective(theta, Xb, yb, num_data=N))]
    P = M + Kn
    times = []
    for part, fn in parts:
        with policy(2.0 * batch * P * P + float(P) ** 3, P):
            times.append((part, median_seconds(fn, repeats)))
    print(f"\n{name}: minibatch of {batch} of N = {N}, M = {M}, K = {Kn}, P = {P}")
    print("| part | ms | share of objective |")
    print("| --- | --- | --- |")
    total = times[-1][1]
    for part, t in times:
        print(f"| {part} | {1e3 * t:.2f} | {'1' if part == 'objective' else f'{t / total:.2f}'} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="0: the full batch; B: a minibatch of B rows")
    args = parser.parse_args()
    print("machine:", describe())
    X, y, _, _ = sl.datasets.load_uci("kin8nm", 0)
    X, y = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
    rng = np.random.default_rng(0)
    Z = X[rng.choice(X.shape[0], 256, replace=False)]
    models = {
        "128 softplus units (L = 6) + 128 orthogonal": sl.OrthogonalSVGP(
            K.Matern(2.5, 1.0), sl.ActivatedFeatures(A.Softplus(1.0), 128, 6), 128, sl.likelihoods.Gaussian(1.0)),
        "activated SVGP, 256 softplus units (L = 6)": sl.OrthogonalSVGP(
            K.Matern(2.5, 1.0), sl.ActivatedFeatures(A.Softplus(1.0), 256, 6), 0, sl.likelihoods.Gaussian(1.0)),
        "SVGP, 256 inducing points": sl.OrthogonalSVGP(
            K.Matern(2.5, 1.0), sl.InducingPoints(Z), 0, sl.likelihoods.Gaussian(1.0)),
    }
    for name, model in models.items():
        if args.batch:
            profile_minibatch(name, model, X, y, args.batch, args.repeats)
        else:
            profile(name, model, X, y, args.repeats)


if __name__ == "__main__":
    main()
