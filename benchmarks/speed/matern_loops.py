"""The host's Matérn loops: vectorised (a call-free exp) against the same loops with libm's exp, and NumPy.

    .venv/bin/python benchmarks/speed/matern_loops.py [--repeats 7]

Part 1, the loops alone, one thread, for each smoothness the fused kernels cover: nanoseconds per
entry of the Gram matrix (``matern_values``) and of its backward pass (``matern_backward``) on a
(275, 7 600) block of protein's lifted rows against k-means centres (one chunk of the statistics
pass at P = 275). Three implementations of the same formulas:

* spherelab's loops (:func:`spherelab.kernels.matern_jit.exp_nonpositive`, selects in place of
  branches, row sums reassociated: the loops run in vector lanes);
* the peer: the same loops compiled here from :mod:`spherelab.kernels.matern_src` (the shapes the
  CUDA kernels compile), whose ``math.exp`` is a call to libm per entry;
* NumPy's element-wise path (``Matern.fused = False``).

Part 2, what a user's fit sees: one evaluation of the collapsed bound and its gradient
(``OrthogonalSVGP.collapsed_objective``, 275 inducing points, protein split 0, 41 157 rows, every
core) with the model's CPU operations using either loop. No result is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))
import numba  # noqa: E402
import spherelab as sl  # noqa: E402
from _machine import describe, median_seconds  # noqa: E402
from spherelab.backend.ops import Operations, resolve  # noqa: E402
from spherelab.kernels import matern_jit, matern_src  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

_chordal = numba.njit(matern_src.chordal)
_shape3 = numba.njit(matern_src.shape3)


@numba.njit(error_model="numpy", nogil=True)
def _libm_values(T, r1, r2, code, inv_l, variance, same, out):
    inv_l2 = inv_l * inv_l
    for i in range(T.shape[0]):
        for j in range(T.shape[1]):
            _, rho = _chordal(T[i, j], same and i == j, inv_l)
            m, _, _ = _shape3(code, rho, inv_l2)
            out[i, j] = variance * r1[i] * r2[j] * m


@numba.njit(error_model="numpy", nogil=True)
def _libm_backward(T, G, r1, r2, code, inv_l, variance, same, A, B, row_var, row_l):
    inv_l2 = inv_l * inv_l
    for i in range(T.shape[0]):
        acc_v = acc_l = 0.0
        for j in range(T.shape[1]):
            t, rho = _chordal(T[i, j], same and i == j, inv_l)
            m, dm, kt = _shape3(code, rho, inv_l2)
            g = G[i, j]
            grr = g * r1[i] * r2[j]
            acc_v += grr * m
            acc_l += grr * (-dm * rho * inv_l)
            if same and t == 1.0:
                kt = 0.0
            A[i, j] = g * variance * (m - t * kt)
            B[i, j] = g * variance * kt
        row_var[i] = acc_v
        row_l[i] = variance * acc_l


def libm_values(T, r1, r2, code, lengthscale, variance, same):
    out = np.empty(T.shape)
    _libm_values(np.ascontiguousarray(T), r1, r2, code, 1.0 / lengthscale, variance, same, out)
    return out


def libm_backward(T, G, r1, r2, code, lengthscale, variance, same):
    A, B, rv, rl = np.empty(T.shape), np.empty(T.shape), np.empty(T.shape[0]), np.empty(T.shape[0])
    _libm_backward(np.ascontiguousarray(T), np.ascontiguousarray(G), r1, r2, code, 1.0 / lengthscale, variance,
                   same, A, B, rv, rl)
    return A, B, float(rv.sum()), float(rl.sum())


def load_protein():
    data = Path(os.environ.get("SPHERELAB_DATA", HERE.parents[2] / "shared" / "data"))
    Xtr, ytr, _, _ = sl.datasets.load_uci("protein", 0, data_dir_=data)
    return sl.datasets.Standardizer().fit(Xtr, ytr).transform(Xtr, ytr)


def kernel_for(D: int, nu: float):
    return sl.kernels.Matern(nu, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"machine: {describe()}\n")
    X, y = load_protein()
    Z = sl.features.kmeans_centres(X, 275, seed=0)
    Xc = X[:7_600]
    G = np.random.default_rng(0).normal(size=(275, Xc.shape[0]))
    print("| smoothness | pass | spherelab ns / entry | libm-exp loop ns / entry | NumPy ns / entry | "
          "libm / spherelab | NumPy / spherelab | largest relative difference |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    with threadpool_limits(1):
        for nu, code in ((1.5, 0), (2.5, 1), (np.inf, 2)):
            kern = kernel_for(X.shape[1], nu)
            r1, U1 = kern.lift(Z)
            r2, U2 = kern.lift(Xc)
            T = U1 @ U2.T
            size = T.size
            ours_v = lambda: matern_jit.matern_values(T, r1, r2, code, 1.0, 1.0, False)  # noqa: E731
            libm_v = lambda: libm_values(T, r1, r2, code, 1.0, 1.0, False)  # noqa: E731
            ours_b = lambda: matern_jit.matern_backward(T, G, r1, r2, code, 1.0, 1.0, False)  # noqa: E731
            libm_b = lambda: libm_backward(T, G, r1, r2, code, 1.0, 1.0, False)  # noqa: E731

            def numpy_v():
                kern.fused = False
                try:
                    return kern.K(Z, Xc)
                finally:
                    kern.fused = True

            def numpy_b():
                kern.fused = False
                try:
                    return kern.gradients_with_inputs(G, Z, Xc)
                finally:
                    kern.fused = True

            for name, ours, libm, nump in (("values", ours_v, libm_v, numpy_v), ("backward", ours_b, libm_b, numpy_b)):
                a, b = ours(), libm()
                a, b = (a, b) if name == "values" else (np.stack(a[:2]), np.stack(b[:2]))
                diff = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
                t_ours, t_libm, t_np = (median_seconds(f, args.repeats) * 1e9 / size for f in (ours, libm, nump))
                print(f"| {nu:g} | {name} | {t_ours:.2f} | {t_libm:.2f} | {t_np:.2f} | {t_libm / t_ours:.2f} | "
                      f"{t_np / t_ours:.2f} | {diff:.1e} |", flush=True)
    print("\nNumPy's backward column includes the chain to the inputs (gradients_with_inputs); the loops' do not.\n")

    kernel = kernel_for(X.shape[1], 1.5)
    model = sl.OrthogonalSVGP(kernel, sl.InducingPoints(Z), 0)
    model.fit(X, y, maxiter=2)
    theta = model.parameter_vector(model.collapsed_names)
    table = dict(vars(resolve("cpu")))
    table.pop("device")
    variants = {"spherelab loops": model.ops,
                "libm-exp loops": Operations("cpu", {**table, "matern_values": libm_values,
                                                      "matern_backward": libm_backward})}
    print("| loops | collapsed bound + gradient, s | relative to libm-exp |\n| --- | --- | --- |")
    seconds, values = {}, {}
    for name, ops in variants.items():
        model.ops = ops
        with model.holding_rows(X, y):
            values[name] = model.collapsed_objective(theta, X, y)
            seconds[name] = median_seconds(lambda: model.collapsed_objective(theta, X, y), args.repeats)
    base = seconds["libm-exp loops"]
    for name, s in seconds.items():
        print(f"| {name} | {s:.3f} | {s / base:.2f} |")
    (v1, g1), (v2, g2) = values.values()
    print(f"\nThe two evaluations' bounds differ by {abs(v1 - v2) / abs(v2):.1e} (relative), their gradients by "
          f"{float(np.max(np.abs(g1 - g2)) / np.max(np.abs(g2))):.1e}; N = {X.shape[0]:,}, P = 275, "
          f"{time.strftime('%Y-%m-%d')}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
