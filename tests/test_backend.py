"""The backend layer: safe, lazy GPU probing; dispatch by array type; GPU tests skip with a reason."""

from __future__ import annotations

import logging
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
from spherelab import backend


@pytest.fixture
def fresh_probe():
    backend._probe.cache_clear()
    yield
    backend._probe.cache_clear()


@pytest.mark.slow
def test_importing_spherelab_does_not_import_cupy():
    code = "import sys, spherelab; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_probe_without_cupy(monkeypatch, fresh_probe):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes "import cupy" raise ImportError
    assert backend.gpu_available() is False
    assert "not importable" in backend.gpu_unavailable_reason()
    assert 'pip install ".[gpu-cuda12]"' in backend.gpu_unavailable_reason()  # the extra to install, by name
    with pytest.raises(RuntimeError, match="no GPU backend is usable: CuPy is not importable"):
        backend.resolve_device("gpu")


def test_probe_with_cupy_but_no_device(monkeypatch, fresh_probe):
    fake = types.ModuleType("cupy")

    class _Runtime:
        @staticmethod
        def getDeviceCount():
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    fake.cuda = types.SimpleNamespace(runtime=_Runtime())
    fake.ndarray = type("ndarray", (), {})
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert backend.gpu_available() is False
    assert "no usable device" in backend.gpu_unavailable_reason()
    assert backend.resolve_device("cpu") == "cpu"


def test_dispatch_by_array_type():
    a = np.ones(3)
    assert backend.array_module(a, None, np.zeros(2)) is np
    assert backend.resolve_device(None, a) == "cpu"
    assert backend.to_numpy([1.0, 2.0]).dtype == np.float64
    with pytest.raises(ValueError, match='device must be "cpu" or "gpu"'):
        backend.resolve_device("tpu")


def test_mixing_host_and_device_arrays_is_an_error(monkeypatch):
    fake = types.ModuleType("cupy")
    fake.ndarray = type("ndarray", (), {})
    monkeypatch.setitem(sys.modules, "cupy", fake)
    dev = fake.ndarray()
    assert backend.is_device_array(dev)
    assert backend.array_module(dev) is fake
    with pytest.raises(TypeError, match="mix NumPy and CuPy"):
        backend.array_module(dev, np.ones(2))


@pytest.mark.gpu
def test_gpu_round_trip():
    if not backend.gpu_available():
        pytest.skip(f"no GPU: {backend.gpu_unavailable_reason()}")
    import cupy

    x = cupy.arange(5, dtype=cupy.float64)
    assert backend.array_module(x) is cupy
    assert backend.resolve_device(None, x) == "gpu"
    assert np.array_equal(backend.to_numpy(x), np.arange(5.0))


def test_operation_table_cpu_is_complete_and_correct(rng):
    ops = backend.resolve("cpu")
    assert backend.ops.implemented("cpu") == set(backend.OPERATIONS)
    A, y = rng.standard_normal((5, 40)), rng.standard_normal(40)
    G, c = np.zeros((5, 5)), np.zeros(5)
    ops.gram_update(G, c, A, y)
    assert np.allclose(G, A @ A.T, rtol=1e-14) and np.allclose(c, A @ y, rtol=1e-14)
    L = np.linalg.cholesky(A @ A.T)
    assert np.allclose(ops.solve_triangular(L, A), np.linalg.solve(L, A))
    assert np.allclose(ops.cholesky(A @ A.T, "G", "hint"), L)


def test_gpu_device_resolves_only_with_a_complete_table(monkeypatch):
    monkeypatch.setattr(backend, "gpu_available", lambda: True)
    monkeypatch.setattr(backend.ops, "_load_cuda", lambda device: None)
    table = dict.fromkeys(backend.OPERATIONS, print)
    monkeypatch.setitem(backend.ops._IMPLEMENTATIONS, "gpu", table)
    assert backend.resolve("gpu").device == "gpu"
    del table["stream_rows"]
    with pytest.raises(RuntimeError, match="the GPU backend lacks stream_rows"):
        backend.resolve("gpu")


def test_gpu_device_without_a_gpu_says_why(monkeypatch, fresh_probe, caplog):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(RuntimeError, match='device="gpu" is not available: no usable GPU'):
        backend.resolve("gpu")
    with pytest.raises(RuntimeError, match="not available"):
        import spherelab as sl

        sl.VISH(sl.kernels.Matern(1.5, 1.0), 3, device="gpu")
    monkeypatch.setattr(backend.ops, "_warned", set())
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="spherelab"):
        warnings.simplefilter("error")  # the choice is a log line, not a warning a user did not cause
        assert backend.resolve("auto").device == "cpu"
        assert backend.resolve("auto").device == "cpu"
    said = [r.getMessage() for r in caplog.records if 'device="auto" runs on the CPU' in r.getMessage()]
    assert len(said) == 1 and "no usable GPU" in said[0]  # once per process and reason
    with pytest.raises(ValueError, match="device must be"):
        backend.resolve("tpu")


def test_register_checks_names():
    with pytest.raises(ValueError, match="unknown operation"):
        backend.register("cpu", "no_such_operation")
    with pytest.raises(ValueError, match="device must be"):
        backend.register("tpu", "harmonics")
