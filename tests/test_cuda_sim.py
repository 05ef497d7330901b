"""The CUDA kernels, proved on the CPU: numba-cuda's simulator runs them on host arrays
(``device="sim"``; conftest switches it on when CuPy is absent). Each kernel and each model's
bound, gradient and prediction on ``device="sim"`` must equal the CPU path to 1e-10. Kept small:
the simulator runs every CUDA thread in Python."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import activations as A
from spherelab import backend
from spherelab import kernels as K
from spherelab.linalg import NumericalFailure

pytest.importorskip("numba.cuda")
if not backend.ops.simulator_enabled():  # pragma: no cover - a machine with CuPy runs the real GPU tests
    pytest.skip("numba-cuda's simulator is off (NUMBA_ENABLE_CUDASIM unset)", allow_module_level=True)


@pytest.fixture(scope="module")
def ops():
    return backend.resolve("cpu"), backend.resolve("sim")


def close(a, b, tol=1e-10):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.allclose(a, b, rtol=tol, atol=tol * (1 + np.abs(b).max(initial=0))), np.abs(a - b).max()


def test_sim_table_uses_cuda_kernels(ops):
    _, sim = ops
    assert sim.device == "sim"
    assert set(backend.OPERATIONS) <= backend.ops.implemented("sim")
    assert sim.clenshaw is not ops[0].clenshaw


@pytest.mark.parametrize("alpha", [0.0, 0.5, 3.5])
def test_gegenbauer_kernels(ops, alpha, rng):
    cpu, sim = ops
    t = np.concatenate([[-1.0, 1.0, 0.0], rng.uniform(-1, 1, 20)])
    close(sim.gegenbauer_table(12, alpha, t), cpu.gegenbauer_table(12, alpha, t))
    close(sim.gegenbauer_derivative_table(12, alpha, t), cpu.gegenbauer_derivative_table(12, alpha, t))
    c = rng.standard_normal(9)
    for deriv in (False, True):
        close(sim.clenshaw(c, alpha, t, deriv), cpu.clenshaw(c, alpha, t, deriv))
    close(sim.clenshaw(c[:1], alpha, t), cpu.clenshaw(c[:1], alpha, t))


@pytest.mark.parametrize("code", [0, 1, 2])
@pytest.mark.parametrize("same", [False, True])
def test_matern_kernels(ops, code, same, rng):
    cpu, sim = ops
    n2 = 5 if same else 7
    T = rng.uniform(-1, 1, (5, n2))
    if same:
        T = 0.5 * (T + T.T)
    r1, r2 = rng.uniform(0.5, 2, 5), rng.uniform(0.5, 2, n2)
    close(sim.matern_values(T, r1, r2, code, 0.7, 1.3, same), cpu.matern_values(T, r1, r2, code, 0.7, 1.3, same))
    G = rng.standard_normal(T.shape)
    for a, b in zip(sim.matern_backward(T, G, r1, r2, code, 0.7, 1.3, same),
                    cpu.matern_backward(T, G, r1, r2, code, 0.7, 1.3, same)):
        close(a, b)


@pytest.mark.parametrize("dim, L", [(2, 6), (3, 4), (5, 3)])
def test_harmonics_kernels(ops, dim, L, rng):
    from spherelab.sphere.harmonics_plan import build_plan

    cpu, sim = ops
    plan = build_plan(dim, L)
    X = sl.sample_sphere(11, dim, rng=rng)
    M = plan.degrees.shape[0]
    close(sim.harmonics(X, plan, np.empty((11, M))), cpu.harmonics(X, plan, np.empty((11, M))))
    W = rng.standard_normal((11, M))
    Xs = X * rng.uniform(0.5, 2.0, (11, 1))  # the solid harmonics' VJP at any norm
    close(sim.harmonics_vjp(Xs, W, plan), cpu.harmonics_vjp(Xs, W, plan))
    with backend.use(sim):  # the public class reaches the CUDA kernels inside a device block
        close(sl.SphericalHarmonics(dim, L)(X), sl.SphericalHarmonics(dim, L)(X))


def test_checked_cholesky_explains_failures(ops, rng):
    _, sim = ops
    A = rng.standard_normal((4, 4))
    S = A @ A.T + 4 * np.eye(4)
    close(sim.cholesky(S, "S", ""), np.linalg.cholesky(S))
    with pytest.raises(NumericalFailure, match="Cholesky of S"):
        sim.cholesky(-S, "S", "try more jitter")
    with pytest.raises(NumericalFailure, match="non-finite"):
        sim.cholesky(np.full((2, 2), np.nan), "S", "")


CASES = {
    "points+orthogonal": lambda X, dev: sl.OrthogonalSVGP(K.Matern(2.5, 0.9, bias=0.8), sl.InducingPoints(X[:4] + 0.1),
                                                          2, sl.likelihoods.Gaussian(0.1), device=dev),
    "activated": lambda X, dev: sl.ActivatedSVGP(K.Matern(1.5, 1.0), sl.ActivatedFeatures(A.Softplus(2.0), 4, 4),
                                                 sl.likelihoods.Gaussian(0.1), device=dev),
    "hvgp": lambda X, dev: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 2,
                                           sl.likelihoods.Gaussian(0.1), device=dev),
    "vish": lambda X, dev: sl.VISH(K.Matern(1.5, 1.0), 3, sl.likelihoods.Gaussian(0.1), device=dev),
    "vish-phases": lambda X, dev: sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1), device=dev,
                                          features=sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
    "harmonics+orthogonal": lambda X, dev: sl.OrthogonalSVGP(K.Matern(1.5, 0.8), sl.HarmonicFeatures(3), 2,
                                                             sl.likelihoods.Gaussian(0.1), device=dev),
}


@pytest.mark.parametrize("case", CASES)
def test_models_on_the_simulator_equal_the_cpu(case, rng):
    X = rng.standard_normal((12, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(12)
    cpu = CASES[case](X, "cpu").fit(X, y, optimize=False)
    sim = CASES[case](X, "sim").fit(X, y, optimize=False)
    assert sim.device == "sim" and cpu.device == "cpu"
    close(sim.elbo(), cpu.elbo())
    theta = cpu.parameter_vector()
    close(sim.objective(theta, X, y)[1], cpu.objective(theta, X, y)[1])
    Xs = rng.standard_normal((4, 2))
    for a, b in zip(sim.predict_f(Xs), cpu.predict_f(Xs)):
        close(a, b)


def test_the_simulator_really_runs_the_cuda_kernels(rng, monkeypatch):
    """A model on "sim" reaches the CUDA launch (not the CPU kernel) for its kernel matrices."""
    from spherelab.backend import cuda_kernels

    calls = []
    original = cuda_kernels.CudaOperations.matern_values

    def spy(self, *args, **kwargs):
        calls.append(self.device)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cuda_kernels.CudaOperations, "matern_values", spy)
    monkeypatch.setattr(backend.ops, "_cuda_loaded", set())
    monkeypatch.setattr(backend.ops, "_SIM", {})
    X = rng.standard_normal((6, 2))
    model = CASES["points+orthogonal"](X, "sim").fit(X, np.sin(X[:, 0]), optimize=False)
    model.predict_f(X[:2])
    assert calls and set(calls) == {"sim"}


@pytest.mark.slow
def test_gpu_benchmark_runs_end_to_end_in_the_simulator():
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu.py"
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, str(script), "--sim", "--tiny"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| matern_values | 0.00e+00 |" in out.stdout or "| matern_values |" in out.stdout
    assert "not measured" in out.stdout


def test_overlapped_pass_keeps_the_device(ops, monkeypatch, rng):
    from spherelab import threads
    from spherelab.bounds import streamed_statistics

    previous = sl.get_threads()
    sl.set_threads("auto")
    monkeypatch.setattr(threads, "machine_busy", lambda: False)
    seen = []

    def columns(Xc):
        seen.append(backend.current().device)
        return Xc.T

    try:
        with backend.use(ops[1]):
            streamed_statistics(columns, rng.standard_normal((40, 2)), rng.standard_normal(40), chunk_size=7)
    finally:
        sl.set_threads(previous if previous is not None else "auto")
    assert set(seen) == {"sim"} and len(seen) == 6
