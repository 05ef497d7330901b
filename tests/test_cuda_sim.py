"""The CUDA kernels against the CPU: every case of :mod:`spherelab.testing.parity` (each kernel, the
streamed pass, each model's bound, gradient and prediction) to 1e-10, on ``"sim"`` — numba-cuda's
simulator on host arrays, where CuPy is absent (conftest switches it on) — and on ``"gpu"`` where a
card is present (``pytest -m gpu``). Kept small: the simulator runs every CUDA thread in Python."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import backend
from spherelab.backend import ops as ops_module
from spherelab.linalg import NumericalFailure
from spherelab.testing import parity

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


@pytest.mark.parametrize("case", list(parity.CASES))
def test_parity_with_the_cpu(cuda_device, case):
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        result = parity.compare(case, cuda_device)
    assert result.ok, f"{case} on {cuda_device}: error {result.error:.3g} > {parity.TOLERANCE:g}"


def test_device_table_uses_cuda_kernels(cuda_device):
    ops = backend.resolve(cuda_device)
    assert ops.device == cuda_device
    assert set(backend.OPERATIONS) <= set(vars(ops))
    assert ops.clenshaw is not backend.resolve("cpu").clenshaw
    assert set(backend.OPERATIONS) <= backend.ops.implemented(cuda_device)


def test_parity_fails_when_a_kernel_is_off(cuda_device, fresh_cuda_tables, monkeypatch):
    """The check can fail: a Matérn kernel off by 1e-8 of its scale is reported, a raising one too."""
    from spherelab.devices import cuda as cuda_kernels

    original = cuda_kernels.CudaOperations.matern_values
    monkeypatch.setattr(cuda_kernels.CudaOperations, "matern_values",
                        lambda self, *a: original(self, *a) * (1 + 1e-8))
    result = parity.compare("matern code 1", cuda_device)
    assert not result.ok and 1e-9 < result.error < 1e-7
    assert parity.compare("gegenbauer + clenshaw, alpha = 0.5", cuda_device).ok  # the others unaffected

    def broken(self, *a):
        raise RuntimeError("launch failed")

    monkeypatch.setattr(cuda_kernels.CudaOperations, "matern_values", broken)
    fresh_cuda_tables()
    (failed,) = parity.run_cases(cuda_device, ["matern code 1"])
    assert not failed.ok and "launch failed" in failed.note


def test_checked_cholesky_explains_failures(cuda_device, rng):
    dev = backend.resolve(cuda_device)
    A = rng.standard_normal((4, 4))
    S = A @ A.T + 4 * np.eye(4)
    assert np.allclose(dev.cholesky(S, "S", ""), np.linalg.cholesky(S), rtol=1e-12, atol=1e-12)
    with pytest.raises(NumericalFailure, match="Cholesky of S"):
        dev.cholesky(-S, "S", "try more jitter")
    with pytest.raises(NumericalFailure, match="non-finite"):
        dev.cholesky(np.full((2, 2), np.nan), "S", "")


def test_the_model_really_runs_the_cuda_kernels(cuda_device, fresh_cuda_tables, rng, monkeypatch):
    """A model on a CUDA device reaches the CUDA launch (not the CPU kernel) for its kernel matrices."""
    import spherelab as sl
    from spherelab.devices import cuda as cuda_kernels

    calls = []
    original = cuda_kernels.CudaOperations.matern_values

    def spy(self, *args, **kwargs):
        calls.append(self.device)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cuda_kernels.CudaOperations, "matern_values", spy)
    X = rng.standard_normal((6, 2))
    model = sl.OrthogonalSVGP(sl.kernels.Matern(2.5, 0.9), sl.InducingPoints(X[:4] + 0.1), 2,
                              sl.likelihoods.Gaussian(0.1), device=cuda_device)
    model.fit(X, np.sin(X[:, 0]), optimize=False).predict_f(X[:2])
    assert calls and set(calls) == {cuda_device}


# the operations that only ever see N-sized work: no model on a device may reach the CPU's
TRIPWIRES = ("harmonics", "harmonics_vjp", "matern_values", "matern_backward")


def _sim_models(X):
    import spherelab as sl

    K, G = sl.kernels, sl.likelihoods.Gaussian
    return {
        "vish": lambda: sl.VISH(K.Matern(1.5, 0.9), 3, G(0.1), device="sim"),
        "vish, phases": lambda: sl.VISH(K.ArcCosine(1), None, G(0.1), device="sim",
                                        features=sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
        "orthogonal, points": lambda: sl.OrthogonalSVGP(K.Matern(2.5, 0.9), sl.InducingPoints(X[:5] + 0.1), 3, G(0.1),
                                                        device="sim"),
        "orthogonal, harmonics": lambda: sl.OrthogonalSVGP(K.Matern(1.5, 0.9), sl.HarmonicFeatures(2), 3, G(0.1),
                                                           device="sim"),
        "hvgp": lambda: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, G(0.1), device="sim"),
    }


@pytest.mark.parametrize("name", ["vish", "vish, phases", "orthogonal, points", "orthogonal, harmonics", "hvgp"])
def test_a_model_passes_its_operations_to_every_computation(name, monkeypatch, rng):
    """No thread-local device: a model on the simulator hands its operations to the maths it calls, so
    the CPU's table (what a computation called without them would use) is never reached for N-sized
    work, in a fit, its objective, a minibatch fit and a prediction, on the pass's worker threads too."""
    import spherelab as sl

    if not ops_module.simulator_enabled():
        pytest.skip("the simulator is off")
    X = rng.standard_normal((60, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(60)
    model = _sim_models(X)[name]()
    cpu = backend.as_operations("cpu")

    def tripwire(op):
        def fail(*args, **kwargs):
            raise AssertionError(f"the CPU's {op} was called inside a model on the simulator")
        return fail

    for op in TRIPWIRES:
        monkeypatch.setattr(cpu, op, tripwire(op))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=2, **({"lift_maxiter": 2} if name.startswith("vish") else {}))
    model.objective(model.parameter_vector(), X, y)
    model.predict_f(X[:7])
    model.fit_svi(X, y, batch_size=16, iterations=2)
    model.predict_f(X[:7])
    with pytest.raises(AssertionError, match="the CPU's"):  # the tripwire itself works
        sl.SphericalHarmonics(3, 2)(sl.sample_sphere(4, 3, rng=0))


def test_pass_rows_are_sized_for_the_device(cuda_device):
    """CPU chunks fill the cache (512-16 384 rows); a CUDA device's hold ~512 MiB of columns, a power of
    two between 2^14 and 2^19 rows."""
    cpu, dev = backend.resolve("cpu"), backend.resolve(cuda_device)
    for width in (1, 210, 660, 4692, 10**6):
        assert 512 <= cpu.pass_rows(width) <= 16384
        rows = dev.pass_rows(width)
        assert (1 << 14) <= rows <= (1 << 19) and rows & (rows - 1) == 0
        assert rows * width * 8 <= max(1 << 29, (1 << 14) * width * 8)
    assert dev.pass_rows(660) == 1 << 16 and dev.pass_rows(210) == 1 << 18


@pytest.mark.slow
def test_device_check_runs_end_to_end_in_the_simulator(tmp_path):
    """benchmarks/gpu_check.py --sim --tiny --verify: every stage done, every parity case within
    1e-10, one copy back per evaluation, the JSON and the Markdown written. (CI runs the same
    command in a venv shaped like the lent machine, ``make check-device-shape``, and deselects
    this test from its ``make test``: the same run twice.)"""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(root / "lab")}
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_check.py"), "--sim", "--tiny", "--verify",
                          "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and "verified:" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [s["key"] for s in data["sections"]] == ["environment", "parity", "kernels", "pass", "vish", "decoupled",
                                                    "hvgp"]
    assert len(data["sections"][1]["rows"]) == len(parity.CASES)
    markdown = (tmp_path / "gpu_check.md").read_text()
    assert "### Parity with the CPU, float64 (done" in markdown and "| case | error |" in markdown


def test_the_device_checks_verdict_fails_a_run_that_breaks_an_invariant():
    import copy
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", path)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)

    def section(key, columns, rows, status="done"):
        return {"key": key, "columns": columns, "rows": rows, "status": status}

    good = {"sections": [
        section("parity", ["case", "error", "<= 1e-10"], [["a", 1e-15, "yes"], ["b", 2e-14, "yes"]]),
        section("vish", ["M", "copies back / eval"], [[210, 1], [660, 1]]),
        section("decoupled", ["model", "steps / s", "copies back / step"],
                [["spherelab OrthogonalSVGP, 4 inducing points + 4 orthogonal (cpu)", 9.0, ""],
                 ["spherelab OrthogonalSVGP, 4 inducing points + 4 orthogonal (sim)", 3.0, 1],
                 ["spherelab OrthogonalSVGP, 4 inducing points + 4 orthogonal, full batch", 2.0, 1]]),
        section("hvgp", ["path", "copies back / eval", "bound rel. diff"], [["device", 1, 1e-15], ["host", "", 3e-16]]),
    ]}
    assert gpu_check.verify(good, "sim") == []
    for where, value, said in [((0, 1, 2), "NO", "parity: b off"), ((1, 0, 1), 2, "vish: copies back"),
                               ((2, 1, 2), 3, "inducing points (sim)"), ((2, 2, 2), 0, "full batch"),
                               ((3, 0, 1), 2, "hvgp: copies back"), ((3, 1, 2), 1e-9, "the host's bound differs")]:
        bad = copy.deepcopy(good)
        s, r, c = where
        bad["sections"][s]["rows"][r][c] = value
        failures = gpu_check.verify(bad, "sim")
        assert len(failures) == 1 and said in failures[0], (where, failures)
    cut = copy.deepcopy(good)
    cut["sections"][1]["status"] = "cut off at its limit (60 s)"
    assert gpu_check.verify(cut, "sim") == ["vish: cut off at its limit (60 s)"]
    assert any("no such stage" in f for f in gpu_check.verify({"sections": good["sections"][:3]}, "sim"))


def test_small_host_problems_run_on_the_host_and_parity_forces_the_device(cuda_device, monkeypatch):
    """Host-in/host-out Matérn problems up to ``host_entries`` skip the device (a launch and two copies
    cost more than the arithmetic); the parity cases set it to 0 so they still prove the kernels."""
    ops = backend.resolve(cuda_device)
    impl = ops.matern_values.__self__
    launched = []
    original = impl._matern_values
    monkeypatch.setattr(impl, "_matern_values", lambda *a: launched.append(a[0].shape) or original(*a))
    rng = np.random.default_rng(0)
    r = rng.uniform(0.5, 2.0, 6)
    T = np.clip(rng.uniform(-1, 1, (6, 6)), -1, 1)
    small = ops.matern_values(T, r, r, 1, 0.7, 1.3, False)
    assert launched == [] and np.allclose(small, backend.resolve("cpu").matern_values(T, r, r, 1, 0.7, 1.3, False),
                                          rtol=1e-14)
    monkeypatch.setattr(impl, "host_entries", 10)
    ops.matern_values(T, r, r, 1, 0.7, 1.3, False)
    assert launched == [(6, 6)]
    assert parity.compare("matern code 1", cuda_device).ok and len(launched) == 2


def test_small_host_series_run_on_the_host_and_parity_forces_the_device(cuda_device, monkeypatch):
    """The same rule for Clenshaw series at host points (the activated units' M x M blocks)."""
    from spherelab.devices import cuda_kernels

    ops = backend.resolve(cuda_device)
    launched = []
    monkeypatch.setattr(cuda_kernels, "clenshaw_kernel", _Counting(cuda_kernels.clenshaw_kernel, launched))
    rng = np.random.default_rng(1)
    t, c = rng.uniform(-1, 1, (5, 4)), rng.standard_normal(6)
    values, derivs = ops.clenshaw(c, 1.5, t, True)
    cpu = backend.resolve("cpu").clenshaw(c, 1.5, t.reshape(-1), True)
    assert launched == [] and values.shape == t.shape
    assert np.allclose(values.reshape(-1), cpu[0], rtol=1e-14) and np.allclose(derivs.reshape(-1), cpu[1], rtol=1e-14)
    monkeypatch.setattr(ops.clenshaw.__self__, "host_entries", 10)
    ops.clenshaw(c, 1.5, t)
    assert len(launched) == 1
    assert parity.compare("gegenbauer + clenshaw, alpha = 0.5", cuda_device).ok and len(launched) > 1


def test_small_host_harmonics_run_on_the_host_on_a_gpu(cuda_device, monkeypatch):
    """On a GPU, host-in/host-out harmonics and their VJP of at most ``host_entries`` entries (a
    decoupled model's harmonics at its orthogonal inputs, every minibatch step) run on the host's
    kernels; above it, or in the simulator, the device's."""
    from spherelab.devices import cuda_kernels
    from spherelab.sphere.harmonics import SphericalHarmonics, harmonics_cpu, harmonics_vjp_cpu

    ops = backend.resolve(cuda_device)
    impl = ops.harmonics.__self__
    launched = []
    for name in ("harmonics_kernel", "harmonics_vjp_kernel"):
        monkeypatch.setattr(cuda_kernels, name, _Counting(getattr(cuda_kernels, name), launched))
    plan = SphericalHarmonics(3, 3).plan
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    W = rng.standard_normal((6, plan.degrees.shape[0]))
    monkeypatch.setattr(impl, "device", "gpu")  # the card's policy, on the simulator's arrays
    values = ops.harmonics(X, plan, np.empty((6, plan.degrees.shape[0])))
    vjp = ops.harmonics_vjp(X, W, plan)
    assert launched == []
    assert np.array_equal(values, harmonics_cpu(X, plan, np.empty_like(values)))
    assert np.array_equal(vjp, harmonics_vjp_cpu(X, W, plan))
    monkeypatch.setattr(impl, "host_entries", 10)
    monkeypatch.setattr(impl, "device", cuda_device)
    assert np.allclose(ops.harmonics(X, plan, np.empty_like(values)), values, rtol=1e-13, atol=1e-13)
    assert np.allclose(ops.harmonics_vjp(X, W, plan), vjp, rtol=1e-13, atol=1e-13)
    assert len(launched) == 2


class _Counting:
    """A CUDA kernel whose launches are recorded (each call of ``kernel[grid]``'s result)."""

    def __init__(self, kernel, launched):
        self.kernel, self.launched = kernel, launched

    def __getitem__(self, grid):  # (a configuration may be built once and launched many times)
        launch = self.kernel[grid]

        def recorded(*args):
            self.launched.append(grid)
            return launch(*args)

        return recorded


class _WarningKernel:
    """Stands in for a numba-cuda kernel: configuring a grid of fewer than 128 blocks warns, as its
    launch configuration does."""

    def __init__(self):
        self.configured = 0

    def __getitem__(self, grid):
        self.configured += 1
        if grid[0] < 128:
            import warnings

            warnings.warn(f"Grid size {grid[0]} will likely result in GPU under-utilization due to low "
                          "occupancy.", RuntimeWarning)
        return (self, grid)


def test_small_grids_launch_without_numba_cudas_low_occupancy_warning(cuda_device):
    """A small problem's small grid is not the user's mistake: configured once, silently, and reused;
    a large grid is configured as usual, and any other warning still reaches the user."""
    import warnings

    from spherelab.devices.cuda import CudaOperations

    ops = CudaOperations(cuda_device)
    # a card's grids (the simulator's kernels configure themselves in place and never warn)
    ops.device, ops.threads, ops.max_blocks = "gpu", 256, 4096
    kernel = _WarningKernel()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first, second = ops._launch(kernel, 1000), ops._launch(kernel, 1000)
        assert first is second and first[1] == (4, ops.threads) and kernel.configured == 1
        assert ops._launch(kernel, 300 * ops.threads)[1] == (300, ops.threads)
    assert kernel.configured == 2
    with pytest.warns(UserWarning, match="still shown"):
        warnings.warn("still shown", UserWarning)


def test_read_only_constants_are_copied_to_the_device_once(cuda_device):
    from spherelab.devices.cuda import CudaOperations

    ops, copies = CudaOperations(cuda_device), []
    to_device = ops.to_device
    ops.to_device = lambda a: copies.append(a) or to_device(a)
    constant, writable = np.arange(5.0), np.arange(5.0)
    constant.setflags(write=False)
    for _ in range(3):
        assert np.array_equal(ops.to_host(ops.device_constant(constant)), constant)
        ops.device_constant(writable)
    assert sum(a is constant for a in copies) == 1 and sum(a is writable for a in copies) == 3
    writable[0] = 7.0  # a writable array may change in place: the device sees the change
    assert ops.to_host(ops.device_constant(writable))[0] == 7.0
