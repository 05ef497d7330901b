"""The decoupled models' rows on the device (spherelab.rows: the floor's one pass): the same bound
and gradient as the CPU's, and — the spy — no transfer of N-sized arrays between a fit's
evaluations, counted on every path a transfer can take (the operation table's and the CUDA
operations' own)."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import TransferSpy, toy_data
from spherelab.rows.decoupled import StatisticsPath
from spherelab.rows.device import DeviceRows
from spherelab.rows.whitened import ResidentRows


def _data(n=40):
    return toy_data(0, n, 3, inputs="uniform", signal=lambda X: np.sin(X.sum(1)))


def _features(kind, X, degree=2):
    if kind == "points":
        return sl.InducingPoints(X[:5] + 0.05)
    if kind == "harmonics":
        return sl.HarmonicFeatures(degree)
    weights = np.random.default_rng(2).standard_normal((5, X.shape[1] + 1))
    return sl.ActivatedFeatures(sl.activations.Softplus(1.5), 5, 4, weights=weights)


def _model(X, y, device, K=3, scale=None, features="points", kernel=None, degree=2):
    scale = np.array([1.0, 1.3, 0.9]) if scale is None else scale
    kernel = kernel or sl.kernels.Matern(1.5, 0.8, bias=0.7, input_scale=scale)
    model = sl.OrthogonalSVGP(kernel, _features(features, X, degree), K, sl.likelihoods.Gaussian(0.1), device=device)
    model.initialise(X)
    model.optimal_q(X, y)
    model.m_u = model.m_u + 0.1  # away from the optimum: every gradient entry nonzero
    return model


def _close(a, b, tol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b), initial=0.0) <= tol * max(1.0, np.max(np.abs(a), initial=0.0))


def _arccos():
    return sl.kernels.ArcCosine(1, bias=0.7, input_scale=np.array([1.0, 1.3, 0.9]))


@pytest.mark.parametrize("K, scale, features, kernel", [
    (3, None, "points", None), (0, None, "points", None), (2, 1.4, "points", None),
    (0, None, "activated", None), (2, None, "activated", None), (2, 1.4, "activated", None),
    (0, None, "activated", _arccos),  # activated units alone need no compiled kernel shape
    (0, None, "harmonics", None), (2, 1.4, "harmonics", None), (0, None, "harmonics", _arccos)])
def test_resident_bound_and_gradient_equal_the_cpu(cuda_device, K, scale, features, kernel):
    X, y = _data()
    cpu, dev = (_model(X, y, d, K, scale, features, kernel and kernel()) for d in ("cpu", cuda_device))
    assert ResidentRows.applies(StatisticsPath(dev)) and not ResidentRows.applies(StatisticsPath(cpu))
    for rows, num_data in ((slice(None), None), (slice(0, 10), 40)):  # full batch; a minibatch of 10 < 3P
        va, ga = cpu.elbo_and_gradient(X[rows], y[rows], num_data)
        vb, gb = dev.elbo_and_gradient(X[rows], y[rows], num_data)
        assert vb == pytest.approx(va, rel=1e-12)
        assert set(ga) == set(gb) and all(_close(ga[k], gb[k]) for k in ga), [k for k in ga if not _close(ga[k], gb[k])]
    # equal to the CPU's gradient, itself checked against finite differences entry by entry
    # (tests/models/test_decoupled.py): on the device one end-to-end check along four random
    # directions is enough (in the simulator each evaluation costs seconds)
    if (K, scale, features, kernel) == (3, None, "points", None):
        assert sl.testing.check_model_gradient(dev, X, y, directions=4).ok


def test_other_kernels_and_features_stay_on_the_host_path(cuda_device):
    X, y = _data()
    units = sl.ActivatedFeatures(sl.activations.ReLU(), 3, 3)
    for kernel, feats, K in [(sl.kernels.Matern(0.5, 1.0), sl.InducingPoints(X[:4]), 0),  # no compiled shape
                             (sl.kernels.Matern(0.5, 1.0), units, 2),  # ... for the orthogonal columns
                             (sl.kernels.Matern(1.5, 1.0), sl.PhaseTruncatedHarmonics(4, 2, 2), 0)]:
        model = sl.OrthogonalSVGP(kernel, feats, K, device=cuda_device)
        assert not ResidentRows.applies(StatisticsPath(model))
    assert ResidentRows.applies(StatisticsPath(sl.OrthogonalSVGP(sl.kernels.Matern(0.5, 1.0), units, 0,
                                                                device=cuda_device)))


@pytest.mark.parametrize("features", ["points", "activated", "harmonics"])
def test_a_fit_moves_no_n_sized_array_between_evaluations(cuda_device, monkeypatch, features):
    # the fewest rows that still exceed every inducing-sized copy (the limit below: 129 for five
    # features and two points): each simulated evaluation costs about a second per 100 rows
    n = 150
    X, y = _data(n)
    model = _model(X, y, cuda_device, K=2, features=features, degree=1)
    spy = TransferSpy(model, monkeypatch)
    evaluations = []
    original = DeviceRows.gram

    def gram(self, *args, **kwargs):  # marks where each evaluation's transfers begin
        evaluations.append(len(spy.sizes))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeviceRows, "gram", gram)
    for collapsed in (True, False):
        evaluations.clear()
        spy.clear()
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            model.fit(X, y, maxiter=2, collapsed=collapsed)
        assert len(evaluations) >= 3
        start = spy.sizes[:evaluations[0]]
        per_evaluation = spy.sizes[evaluations[0]:]
        assert max(start) >= n  # the rows were copied, once, before the first evaluation
        M, P, D = model.features.num_features, model.features.num_features + 2, X.shape[1]
        # only arrays of the inducing size after that: at most dL/dK_pp, q's gradient, the sources'
        # gradients and a few numbers in one copy
        limit = P * P + (P + M * M + 4) + P * (D + 1) + 16
        assert per_evaluation and max(per_evaluation) <= limit < n, max(per_evaluation)
        # one copy back per evaluation (the fit's last optimal_q, after them, makes its own)
        marks = evaluations + [len(spy.sizes)]
        counts = [sum(a <= i < b for i in spy.back) for a, b in zip(marks[:-1], marks[1:])]
        assert counts[:-1] == [1] * (len(counts) - 1), counts


def test_a_standalone_evaluation_copies_its_rows_and_reads_changed_data(cuda_device):
    """Outside a fit nothing is held: rows changed in place between two calls are seen."""
    X, y = _data()
    cpu, dev = _model(X, y, "cpu"), _model(X, y, cuda_device)
    first = dev.elbo_and_gradient(X, y)[0]
    y[:] = y[::-1].copy()
    changed = dev.elbo_and_gradient(X, y)[0]
    assert changed != first and changed == pytest.approx(cpu.elbo_and_gradient(X, y)[0], rel=1e-12)


def test_a_row_outside_the_lift_gets_the_lifts_own_error(cuda_device):
    X, y = _data()
    model = _model(X, y, cuda_device)
    X = X.copy()
    X[7, 1] = 1e200
    with pytest.raises(ValueError, match="the lift .X / input_scale, bias. has entries up to 7.69e.199"):
        model.elbo_and_gradient(X, y)


@pytest.mark.parametrize("features", ["points", "activated", "harmonics"])
def test_the_backward_pass_without_its_forward_pass_recomputes_the_same_sums(cuda_device, features):
    from spherelab.bounds import joint_cholesky

    X, y = _data()
    model = _model(X, y, cuda_device, features=features)
    path = StatisticsPath(model)
    rows = ResidentRows(path, X, y)
    LJ = joint_cholesky(*model.inducing_matrices())
    rows.statistics(path, LJ)
    rng = np.random.default_rng(3)
    P = LJ.shape[0]
    Q, qb = rng.standard_normal((P, P)), rng.standard_normal(P)
    kept = rows.row_sums(path, LJ, Q, qb, -0.3)
    rows._last = None  # as if the statistics ran elsewhere: the chunks, the lift of S and Sum r^2 recomputed
    fresh = rows.row_sums(path, LJ, Q, qb, -0.3)
    for a, b in zip(kept[0].values(), fresh[0].values()):
        assert _close(a, b, 1e-13)
    assert _close(kept[1], fresh[1], 1e-13) and _close(kept[2], fresh[2], 1e-13)


@pytest.mark.parametrize("features", ["points", "activated", "harmonics"])
def test_the_collapsed_bound_on_the_device_is_the_cpus(cuda_device, features):
    """q's optimum (the mean and each block's inverse factor) on the device, in the same evaluation."""
    X, y = _data()
    cpu, dev = (_model(X, y, d, 2, None, features) for d in ("cpu", cuda_device))
    names = cpu.collapsed_names
    theta = cpu.parameter_vector(names)
    va, ga = cpu.collapsed_objective(theta, X, y)
    vb, gb = dev.collapsed_objective(theta, X, y)
    assert vb == pytest.approx(va, rel=1e-11) and _close(ga, gb, 1e-9)
