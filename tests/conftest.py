"""Shared fixtures and independent reference implementations for the tests."""

from __future__ import annotations

import functools
import importlib.util
import os

# Without CuPy (no GPU path to test) the CUDA kernels run in numba-cuda's simulator: it must be
# switched on before Numba is imported (tests/test_cuda_sim.py)
if importlib.util.find_spec("cupy") is None:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# one BLAS and one Numba thread for the whole suite (and the notebook kernels it starts): the
# tests are small, and on a shared 2-core machine busy thread pools made the suite 10x slower
# (spherelab.threads reads it at import, so before the first import of spherelab)
os.environ.setdefault("SPHERELAB_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from spherelab import activations as A  # noqa: E402
from spherelab.features import ActivatedFeatures, HarmonicFeatures, InducingPoints  # noqa: E402
from spherelab.models import capped  # noqa: E402
from spherelab.testing import checkgrad  # noqa: E402


@pytest.fixture(params=["sim", pytest.param("gpu", marks=pytest.mark.gpu)])
def cuda_device(request) -> str:
    """A CUDA device for the parity tests: ``"sim"`` (numba-cuda's simulator on host arrays, where
    CuPy is absent) or ``"gpu"`` (a real card through CuPy: ``pytest -m gpu`` on a machine with
    one). One process has one or the other: the simulator replaces ``numba.cuda`` at import."""
    from spherelab import backend

    pytest.importorskip("numba.cuda")
    if request.param == "sim" and not backend.ops.simulator_enabled():
        pytest.skip("numba-cuda's simulator is off (CuPy is installed): the real GPU is tested instead")
    if request.param == "gpu":
        if backend.ops.simulator_enabled():
            pytest.skip("no real GPU in this process: numba-cuda's simulator is on (NUMBA_ENABLE_CUDASIM=1)")
        if not backend.gpu_available():
            pytest.skip(f"no usable GPU: {backend.gpu_unavailable_reason()}")
    return request.param


@pytest.fixture
def fresh_cuda_tables(monkeypatch):
    """Empty the registered CUDA tables for one test, so that a kernel patched on the class is what
    the next ``resolve`` registers (restored afterwards); calling the fixture's value empties them again."""
    from spherelab.backend import ops

    ops.implemented("cpu")

    def reset():
        monkeypatch.setattr(ops, "_cuda_loaded", set())
        monkeypatch.setattr(ops, "_SIM", {})
        monkeypatch.setattr(ops, "_IMPLEMENTATIONS", {"cpu": dict(ops._IMPLEMENTATIONS["cpu"]), "gpu": {}})

    reset()
    return reset


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_zonal(ell: int, dim: int, t: np.ndarray) -> np.ndarray:
    """Z_l(t) from scipy (independent of spherelab's recurrence)."""
    from scipy.special import eval_gegenbauer

    t = np.clip(t, -1.0, 1.0)
    if ell == 0:
        return np.ones_like(t)
    if dim == 2:
        return 2.0 * np.cos(ell * np.arccos(t))
    alpha = (dim - 2) / 2.0
    return (ell + alpha) / alpha * eval_gegenbauer(ell, alpha, t)


def _inside(objective):
    """``objective`` for :func:`spherelab.testing.checkgrad`: a rejected trial point (1e300) is
    outside the domain, which the step search then avoids."""
    def func(theta):
        value, grad = objective(theta)
        if value >= 1e300:
            raise FloatingPointError
        return value, grad

    return func


#: the bounds' fixed finite-difference step: the non-whitened bounds of ill-conditioned K_uu (softplus
#: units) curve within 1e-3 of a point, where checkgrad's automatic steps begin (5e-4 off there)
STEP = 1e-6


def check_collapsed_gradient(model, X, y, step=STEP) -> float:
    """Every entry of the collapsed bound's gradient (q re-solved in closed form at each point)
    against :func:`spherelab.testing.checkgrad`; returns the collapsed ELBO at the current parameters."""
    rest = model.parameter_vector(model.collapsed_names)
    value, _ = model.collapsed_objective(rest, X, y)
    assert value < 1e300
    check = checkgrad(_inside(lambda r: model.collapsed_objective(r, X, y)), rest, step=step)
    model.collapsed_objective(rest, X, y)  # leave the model at the point checked
    assert check.ok, str(check)
    return -value


# ---- helpers shared by the decoupled-model and HVGP tests ----------------------------------

DECOUPLED_FEATURES = {
    "softplus": lambda rng: ActivatedFeatures(A.Softplus(2.0), 4, 4),
    "relu": lambda rng: ActivatedFeatures(A.ReLU(), 4, 5),
    "points": lambda rng: InducingPoints(rng.standard_normal((4, 2))),
    "harmonics": lambda rng: HarmonicFeatures(3),
}


def check_objective_gradient(model, X, y, num_data, step=STEP):
    """Every entry of the flat gradient against :func:`spherelab.testing.checkgrad` of the objective."""
    theta = model.parameter_vector()
    check = checkgrad(_inside(lambda t: model.objective(t, X, y, num_data=num_data)), theta, step=step)
    model.set_parameter_vector(theta)
    assert check.ok, str(check)


def toy_data(rng, n=40, D=2, *, inputs="normal", signal=None, noise=0.1):
    """The one maker of toy regression data: ``n`` inputs in ``D`` dimensions, standard normal or
    uniform on [-1, 1] (``inputs``), and ``signal(X)`` plus ``noise`` times standard normal noise.

    ``rng`` is a Generator or a seed; the inputs are drawn before the noise, so a maker below and a
    test's own signal on the same ``rng`` see the same inputs. ``signal`` defaults to
    sin(2 x_1) + 0.3 x_D.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    X = rng.standard_normal((n, D)) if inputs == "normal" else rng.uniform(-1, 1, (n, D))
    f = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] if signal is None else signal(X)
    return X, f + noise * rng.standard_normal(n)


def sine_data(n=40, seed=0):
    """A noisy sine of the first of two uniform inputs on [-1, 1] (persistence, fits, threads)."""
    return toy_data(seed, n, 2, inputs="uniform", signal=lambda X: np.sin(3 * X[:, 0]))


def randomise_decoupled_q(model, rng):
    model.m_u = rng.standard_normal(model.m_u.size)
    model.m_v = rng.standard_normal(model.m_v.size)
    model.L_u = model.L_u + 0.1 * np.tril(rng.standard_normal(model.L_u.shape))
    model.L_v = model.L_v + 0.1 * np.tril(rng.standard_normal(model.L_v.shape))


def peak_memory(evaluate) -> int:
    """Peak bytes traced during a second call of ``evaluate()`` (the first compiles and fills the
    caches), on one thread: each share of a split pass holds its own chunk's temporaries, and how
    many shares run follows the machine's load."""
    import tracemalloc

    from spherelab import thread_limit

    with thread_limit(1):
        evaluate()
        tracemalloc.start()
        try:
            evaluate()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def regression_data(rng, n=60, D=2):
    """Normal inputs and a noisy sin(2 x_1) + 0.3 x_D (VISH's bounds and model tests, datasets)."""
    return toy_data(rng, n, D)


def decoupled_data(rng, n=15, D=2):
    """Normal inputs and a noisy sin(1.5 x_1) + 0.3 x_D (the decoupled bounds and models)."""
    return toy_data(rng, n, D, signal=lambda X: np.sin(1.5 * X[:, 0]) + 0.3 * X[:, -1])


def hvgp_signal(X):
    return np.sin(2.0 * X[:, 0]) + 0.4 * X[:, -1] ** 2 + 0.3 * X[:, 0] * X[:, -1]


def hvgp_data(rng, n=40, D=2, classify=False):
    """Normal inputs, an interaction signal; ``classify`` labels it above its median (HVGP)."""
    if classify:
        X = rng.normal(size=(n, D))
        f = hvgp_signal(X)
        return X, (f > np.median(f)).astype(float)
    return toy_data(rng, n, D, signal=hvgp_signal)


def randomise_block_q(model, rng):
    for c, m in enumerate(model.sizes):
        model.ms[c] = rng.normal(size=m)
        model.Ls[c] = np.eye(m) + 0.3 * np.tril(rng.normal(size=(m, m)))


def fit_in_a_thread(model, X, y, monkeypatch, maxiter=30, pause=0.02):
    """Start ``model.fit(X, y + 0.5)`` (collapsed) in a thread whose evaluations last ``pause``
    seconds each, so that other threads act while it runs; returns (thread, an Event set once the
    fit evaluates)."""
    import threading
    import time

    original = type(model)._collapsed_elbo_and_gradient
    inside = threading.Event()

    def slow(self, *args, **kwargs):
        inside.set()
        time.sleep(pause)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "_collapsed_elbo_and_gradient", slow)
    t = threading.Thread(target=capped()(lambda: model.fit(X, y + 0.5, maxiter=maxiter)))
    t.start()
    return t, inside


def find_saved(node, name):
    """The first saved object of class ``name`` in a model file's decoded meta tree (or None)."""
    if isinstance(node, dict):
        if node.get("__object__") == name:
            return node
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for v in children:
        hit = find_saved(v, name)
        if hit is not None:
            return hit
    return None


class TransferSpy:
    """Every host-device transfer of one decoupled model's device (the operation table's entries and
    the CUDA operations' own methods), in order: ``sizes`` (entries of each), ``back`` (the
    positions in ``sizes`` of the copies back), ``back_sizes`` and ``there_sizes``. The inducing
    block's host-in/host-out operations (P x P, P x K) are left out: on a card they run on the host's
    kernels (``CudaOperations.host_entries``); the simulator sends them through its device."""

    def __init__(self, model, monkeypatch):
        from spherelab.rows.gradients import DecoupledGradients

        self.sizes: list[int] = []
        self.back: list[int] = []
        self.host_side = 0
        impl = model.ops.zonal_columns.__self__  # the CudaOperations behind the table
        for owner in (model.ops, impl):
            for name in ("to_device", "to_host"):
                monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), name == "to_host"))
        for owner, name in ((type(model), "inducing_matrices"), (DecoupledGradients, "inducing")):
            monkeypatch.setattr(owner, name, self._host_side(getattr(owner, name)))

    @property
    def back_sizes(self) -> list[int]:
        return [self.sizes[i] for i in self.back]

    @property
    def there_sizes(self) -> list[int]:
        back = set(self.back)
        return [n for i, n in enumerate(self.sizes) if i not in back]

    def clear(self) -> None:
        self.sizes.clear()
        self.back.clear()

    def _wrap(self, func, back):
        def counted(a, *args, **kwargs):
            if not self.host_side:
                if back:
                    self.back.append(len(self.sizes))
                self.sizes.append(int(np.size(a)))
            return func(a, *args, **kwargs)

        return counted

    def _host_side(self, func):
        def marked(*args, **kwargs):
            self.host_side += 1
            try:
                return func(*args, **kwargs)
            finally:
                self.host_side -= 1

        return marked


@functools.lru_cache(maxsize=None)
def resolved_file(filename: str) -> str:
    """A code object's file with its links resolved, once per file: the tracers of the interrupt
    and exception-at-every-line tests ask at every call of every function."""
    return os.path.realpath(filename)
