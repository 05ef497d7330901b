"""The decoupled minibatch step resident on the device (spherelab.rows.steps): the same
fit as the host's steps, to rounding; one copy back per step and nothing N-sized after the rows'
first copy (the spy); the host's step where the device's factor fails; the namespace algebra equal
to the host's bound."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import TransferSpy, toy_data
from spherelab.bounds import gaussian_stats_bound_whitened
from spherelab.bounds.whitened_stats import whitened_stats_terms
from spherelab.rows.decoupled import StatisticsPath
from spherelab.rows.device import DeviceRows
from spherelab.rows.steps import AdamSteps, ResidentSteps

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


def _data(n=60):
    return toy_data(1, n, 3, inputs="uniform", signal=lambda X: np.sin(X.sum(1)))


def _model(X, device, features="points", K=3, jitter=1e-6):
    kernel = sl.kernels.Matern(1.5, 0.8, bias=0.7, input_scale=np.array([1.0, 1.3, 0.9]))
    if features == "points":
        feats = sl.InducingPoints(X[:5] + 0.05)
    elif features == "harmonics":
        feats = sl.HarmonicFeatures(2)
    else:
        weights = np.random.default_rng(2).standard_normal((5, X.shape[1] + 1))
        feats = sl.ActivatedFeatures(sl.activations.Softplus(1.5), 5, 4, weights=weights)
    return sl.OrthogonalSVGP(kernel, feats, K, sl.likelihoods.Gaussian(0.1), device=device, jitter=jitter)


def _close(a, b, tol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b), initial=0.0) <= tol * max(1.0, np.max(np.abs(a), initial=0.0))


@pytest.mark.parametrize("features, K, jitter", [("points", 3, 1e-6), ("points", 0, 1e-6), ("points", 3, 1e-2),
                                                ("points", 3, 0.0), ("activated", 2, 1e-6), ("harmonics", 2, 1e-6)])
def test_the_resident_fit_takes_the_hosts_steps(cuda_device, features, K, jitter):
    X, y = _data()
    cpu, dev = _model(X, "cpu", features, K, jitter), _model(X, cuda_device, features, K, jitter)
    assert ResidentSteps.applies(StatisticsPath(dev)) and not ResidentSteps.applies(StatisticsPath(cpu))
    for m in (cpu, dev):
        m.initialise(X)
    assert isinstance(dev._svi_steps(X, y, 0.01), ResidentSteps) and isinstance(cpu._svi_steps(X, y, 0.01), AdamSteps)
    for m in (cpu, dev):
        m.fit_svi(X, y, batch_size=20, iterations=6, lr=0.02, seed=4)
    assert np.allclose(dev.trace, cpu.trace, rtol=1e-10, atol=0)
    a, b = cpu.get_params(), dev.get_params()
    assert set(a) == set(b)
    off = [k for k in a if not _close(a[k], b[k], 1e-9)]
    assert not off, off
    assert np.allclose(np.triu(b["q_sqrt"], 1), 0.0)  # q's factor stays lower triangular on the device


@pytest.mark.parametrize("features", ["points", "activated", "harmonics"])
def test_a_step_copies_back_once_and_moves_nothing_n_sized(cuda_device, monkeypatch, features):
    n, batch = 400, 16
    X, y = _data(n)
    model = _model(X, cuda_device, features, K=3)
    model.initialise(X)
    spy = TransferSpy(model, monkeypatch)
    steps = ResidentSteps(model, StatisticsPath(model), X, y, 0.01)
    assert max(spy.there_sizes) == X.size and spy.back == []  # the rows' one copy, nothing back
    # inducing points: K_pp = k([Z; W], [Z; W]) and its chain on the device too, nothing of it on the host
    assert steps.inducing_on_device == (features == "points")
    host_blocks = []
    real_block = type(model).inducing_matrices
    monkeypatch.setattr(type(model), "inducing_matrices", lambda self: host_blocks.append(1) or real_block(self))
    P = model.features.num_features + 3
    rng = np.random.default_rng(0)
    for _ in range(3):
        back, there = len(spy.back_sizes), len(spy.there_sizes)
        steps.step(rng.choice(n, batch, replace=False))
        assert len(spy.back_sizes) - back == 1  # the step's one wait on the device
        assert max(spy.back_sizes[back:]) < n and max(spy.there_sizes[there:]) <= P * P < n
    assert len(host_blocks) == (0 if features == "points" else 3)
    steps.finish()
    M = model.features.num_features
    assert spy.back_sizes[-1] == P + M * M + 3 * 3  # q, once, at the end


def test_a_failed_device_factor_takes_the_hosts_step(cuda_device, monkeypatch):
    X, y = _data()
    cpu, dev = _model(X, "cpu"), _model(X, cuda_device)
    calls = []
    xp = dev.ops.array_namespace()
    real = xp.linalg.cholesky

    def failing(A):  # the first step's factor fails as NumPy's does; cuSOLVER's NaN is the other branch
        calls.append(A.shape)
        if len(calls) == 1:
            raise np.linalg.LinAlgError("not positive definite")
        if len(calls) == 2:
            return A * np.nan
        return real(A)

    monkeypatch.setattr(xp.linalg, "cholesky", failing)
    for m in (cpu, dev):
        m.fit_svi(X, y, batch_size=20, iterations=4, lr=0.02, seed=1)
    assert len(calls) >= 4
    assert np.allclose(dev.trace, cpu.trace, rtol=1e-10, atol=0)
    a, b = cpu.get_params(), dev.get_params()
    assert all(_close(a[k], b[k], 1e-9) for k in a)


def test_a_step_outside_the_usable_range_leaves_the_model_as_it_was(cuda_device, monkeypatch):
    from spherelab.rows import steps as decoupled_step

    X, y = _data()
    dev = _model(X, cuda_device)
    dev.fit_svi(X, y, batch_size=20, iterations=2, seed=1)
    before = dev.get_params()
    xp = dev.ops.array_namespace()
    monkeypatch.setattr(xp.linalg, "cholesky", lambda A: A * np.nan)  # every step goes to the host's ...
    calls = []
    real = decoupled_step.minibatch_gradient

    def second_fails(*args, **kwargs):  # ... whose second step leaves the usable range
        calls.append(1)
        if len(calls) == 2:
            raise sl.linalg.NumericalFailure("a minibatch step left the usable range (Cholesky failed); lower lr")
        return real(*args, **kwargs)

    monkeypatch.setattr(decoupled_step, "minibatch_gradient", second_fails)
    with pytest.raises(sl.linalg.NumericalFailure, match="lower lr"):
        dev.fit_svi(X, y, batch_size=20, iterations=3, seed=2)
    assert len(calls) == 2
    after = dev.get_params()
    assert all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.filterwarnings("ignore::spherelab.models.scale.ScaleWarning", "ignore:overflow:RuntimeWarning")
def test_a_row_outside_the_lift_gets_the_lifts_own_error(cuda_device, monkeypatch):
    X, y = _data()
    X = X.copy()
    X[7, 1] = 1e200
    model = _model(X[:5].copy(), cuda_device)
    seen = []
    original = DeviceRows.rejected

    def rejected(self, kernel):  # the step's copy back counted the row, then the lift's check names it
        seen.append(self.X.shape[0])
        return original(self, kernel)

    monkeypatch.setattr(DeviceRows, "rejected", rejected)
    with pytest.raises(ValueError, match="the lift .X / input_scale, bias. has entries up to 7.69e.199"):
        model.fit_svi(X, y, batch_size=60, iterations=1, init_q="prior")
    assert seen == [60]


def test_the_namespace_algebra_is_the_hosts_bound():
    rng = np.random.default_rng(5)
    M, K, B = 4, 3, 30
    P = M + K
    A = rng.standard_normal((P, B))
    Kpp = A @ A.T / B + np.eye(P)
    LJ = np.linalg.cholesky(Kpp)
    F = rng.standard_normal((P, B))
    Phi, beta = F @ F.T, F @ rng.standard_normal(B)
    q = (rng.standard_normal(M), np.tril(rng.standard_normal((M, M))) + 3 * np.eye(M),
         rng.standard_normal(K), np.tril(rng.standard_normal((K, K))) + 3 * np.eye(K))
    ref = gaussian_stats_bound_whitened(LJ, M, Phi, beta, 80.0, 12.0, B, *q, 0.3, 300)

    def solve(L, b, trans):  # a different triangular solve than the host's (NumPy's inverse)
        Linv = np.linalg.inv(L)
        return (Linv.T if trans else Linv) @ b

    t = whitened_stats_terms(np, solve, LJ, M, Phi, beta, 80.0, 12.0, B, q[0], q[1], q[2], q[3], 0.3, 300)
    assert float(t.value) == pytest.approx(ref.value, rel=1e-12)
    assert _close(t.dKpp[:M, :M], ref.dKuu, 1e-10) and _close(2 * t.dKpp[M:, :M], ref.dKvu, 1e-10)
    assert _close(t.dm, np.concatenate([ref.dm_u, ref.dm_v]), 1e-12) and _close(t.dL_u, ref.dL_u, 1e-12)
    assert float(t.dnoise) == pytest.approx(ref.dnoise, rel=1e-12)
