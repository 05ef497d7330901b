"""VISH's lift stage on the rows floor (spherelab.rows.vish): on the CPU the same bound, gradient
and predictions as the features' own host pass; on a device the same as the CPU's own pass, the
same fit, and — the spy — per evaluation one copy back (the bound, its spectrum and noise
derivatives, the lift's sums), one copy there (the spectrum) and nothing of size N, counted on
every path a transfer can take."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data
from spherelab.features import HarmonicFeatures
from spherelab.rows.device import DeviceRows
from spherelab.rows.vish import ResidentLift

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


def _data(n=60):
    return toy_data(1, n, 3, inputs="uniform", signal=lambda X: np.sin(X.sum(1)))


def _model(device, scale=None, degree=3, features=None, prior="kernel"):
    scale = np.array([1.0, 1.3, 0.9]) if scale is None else scale
    kernel = sl.kernels.Matern(1.5, 0.8, bias=0.7, input_scale=scale)
    return sl.VISH(kernel, None if features else degree, sl.likelihoods.Gaussian(0.1), device=device,
                   features=features, prior=prior)


def _close(a, b, tol=1e-11):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b), initial=0.0) <= tol * max(1.0, np.max(np.abs(a), initial=0.0))


def _prepared(device, X, **kw):
    model = _model(device, **kw)
    model._setup(X)
    return model


def _own_pass(model) -> bool:
    return model.ops.device != "cpu" and type(model.features) is HarmonicFeatures


@pytest.fixture
def own_host(monkeypatch):
    """The CPU's reference: the features' own host pass (lift_statistics, lift_gradient,
    predict_rows), not the rows floor."""
    monkeypatch.setattr(ResidentLift, "applies", staticmethod(_own_pass))


@pytest.mark.parametrize("prior", ["kernel", "features"])
@pytest.mark.parametrize("kept", [True, False])
@pytest.mark.parametrize("rows", [7, None])
def test_the_cpus_floor_equals_its_own_pass(monkeypatch, prior, kept, rows):
    """On the CPU the floor's loop (each chunk lifted once, the harmonics' columns, the chunks dealt
    to the cores, the backward pass reading the harmonics from the kept or recomputed columns) and
    the features' own pass give one bound and one gradient: sums of 60 rows in another order."""
    X, y = _data()
    model = _prepared("cpu", X, prior=prior)
    if not kept:
        monkeypatch.setattr(sl.VISH, "lift_cache_elements", 0)
    if rows:
        monkeypatch.setattr(sl.VISH, "chunk_size", rows)
    used = []
    with monkeypatch.context() as m:
        m.setattr(ResidentLift, "evaluate", _recording(ResidentLift.evaluate, used))
        va, ga = model.elbo_and_gradient(X, y)
    assert used and all(keep == kept for _, keep in used)
    monkeypatch.setattr(ResidentLift, "applies", staticmethod(_own_pass))
    vb, gb = model.elbo_and_gradient(X, y)
    assert va == pytest.approx(vb, rel=1e-12)
    assert set(ga) == set(gb) and all(_close(ga[k], gb[k]) for k in ga), [k for k in ga if not _close(ga[k], gb[k])]


@pytest.mark.parametrize("prior", ["kernel", "features"])
def test_the_cpus_floor_predicts_as_its_own_pass(monkeypatch, prior):
    X, y = _data(50)
    Xs = np.random.default_rng(4).uniform(-1.5, 1.5, (23, 3))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = _model("cpu", prior=prior).fit(X, y, lift_maxiter=3, maxiter=3)
    ma, va = model.predict_f(Xs)
    monkeypatch.setattr(ResidentLift, "applies", staticmethod(_own_pass))
    mb, vb = model.predict_f(Xs)
    # the variance is a difference of two products of size |Phi|^2 |C|: compared at that scale
    assert _close(ma, mb, 1e-12) and _close(va, vb, 1e-12)


def test_a_failed_factor_on_the_cpus_floor_is_the_hosts_bound(monkeypatch):
    """NumPy refuses B's factor where the host's bound would add jitter: the host's bound decides."""
    from spherelab.rows import vish as vish_resident

    X, y = _data()
    model = _prepared("cpu", X)
    reference = model.elbo_and_gradient(X, y)
    fallbacks = []
    monkeypatch.setattr(vish_resident, "_device_cholesky", lambda xp: lambda B: xp.full(B.shape, xp.nan))
    monkeypatch.setattr(ResidentLift, "_on_host", _recording(ResidentLift._on_host, fallbacks))
    value, grad = model.elbo_and_gradient(X, y)
    assert len(fallbacks) == 1 and value == pytest.approx(reference[0], rel=1e-12)
    assert all(_close(grad[k], reference[1][k]) for k in grad)


@pytest.mark.parametrize("scale, kept, rows", [(None, True, None), (1.4, True, None), (None, False, None),
                                               (None, True, 16), (None, False, 16)])
def test_bound_and_gradient_equal_the_cpu(cuda_device, monkeypatch, scale, kept, rows, own_host):
    X, y = _data()
    cpu, dev = _prepared("cpu", X, scale=scale), _prepared(cuda_device, X, scale=scale)
    assert ResidentLift.applies(dev) and not ResidentLift.applies(cpu)
    if not kept:
        monkeypatch.setattr(sl.VISH, "lift_cache_elements", 0)
    if rows:
        monkeypatch.setattr(DeviceRows, "chunk_entries", rows * dev.features.all_degrees.size)
    used = []
    monkeypatch.setattr(ResidentLift, "evaluate", _recording(ResidentLift.evaluate, used))
    va, ga = cpu.elbo_and_gradient(X, y)
    vb, gb = dev.elbo_and_gradient(X, y)
    assert used, "the device's evaluation did not keep its rows there"
    assert vb == pytest.approx(va, rel=1e-12)
    assert set(ga) == set(gb) and all(_close(ga[k], gb[k]) for k in ga), [k for k in ga if not _close(ga[k], gb[k])]


def _recording(method, calls):
    def recorded(self, *args, **kwargs):
        calls.append((self.rows.rows, self.rows.keep))
        return method(self, *args, **kwargs)

    return recorded


def test_a_fit_on_the_device_is_the_cpus_fit(cuda_device, own_host):
    X, y = _data(50)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        fits = [_model(d).fit(X, y, lift_maxiter=4, maxiter=4) for d in ("cpu", cuda_device)]
    assert _close(fits[0].parameter_vector(), fits[1].parameter_vector(), 1e-9)
    assert fits[1].elbo() == pytest.approx(fits[0].elbo(), rel=1e-10)
    assert fits[0].lift_result.nfev == fits[1].lift_result.nfev


def test_phase_truncated_harmonics_stay_on_the_host_path(cuda_device):
    feats = sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0)
    assert not ResidentLift.applies(_model(cuda_device, features=feats))


class _Spy:
    """Counts every host-device transfer of one model's device (the operation table's entries and
    the CUDA operations' own methods, which the table's other operations call)."""

    def __init__(self, model, monkeypatch):
        self.events: list[tuple[str, int]] = []
        impl = model.ops.harmonic_columns.__self__
        for owner in (model.ops, impl):
            for name in ("to_device", "to_host"):
                monkeypatch.setattr(owner, name, self._wrap(name, getattr(owner, name)))

    def _wrap(self, name, func):
        def counted(a, *args, **kwargs):
            self.events.append((name, int(np.size(a))))
            return func(a, *args, **kwargs)

        return counted


def test_a_lift_stage_moves_no_n_sized_array_and_copies_once_each_way(cuda_device, monkeypatch):
    n = 300
    X, y = _data(n)
    model = _model(cuda_device, degree=2)  # 14 harmonics on S^3: M^2 + M + 2 = 212 < n
    spy = _Spy(model, monkeypatch)
    spans = []
    evaluate = ResidentLift.evaluate

    def counted(self, *args, **kwargs):  # each evaluation's transfers, from its start to its end
        start = len(spy.events)
        try:
            return evaluate(self, *args, **kwargs)
        finally:
            spans.append((start, len(spy.events)))

    monkeypatch.setattr(ResidentLift, "evaluate", counted)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, lift_maxiter=5, maxiter=2)
    evaluations = model.lift_result.nfev
    assert evaluations >= 3 and len(spans) == evaluations
    before, lift = spy.events[:spans[0][0]], spy.events[spans[0][0]:spans[-1][1]]
    assert max(size for _, size in before) >= n  # the rows were copied, once, before the first evaluation
    M = model.features.num_features
    assert max(size for _, size in lift) <= M * M + M + 2 < n
    # after the first evaluation (which copies the harmonics' constants once), each evaluation sends
    # the spectrum and copies back one packed array: the bound, dL/dlambda, dL/dnoise, the lift's sums
    for start, end in spans[1:]:
        events = spy.events[start:end]
        names = [name for name, _ in events]
        assert names.count("to_host") == 1 and names.count("to_device") == 1, names
        assert [size for name, size in events if name == "to_host"] == [5 + M + X.shape[1] + 1]


@pytest.mark.parametrize("checked", [True, False], ids=["solve raises", "NaN carried (cuSOLVER)"])
def test_a_factor_that_fails_on_the_device_falls_back_to_the_hosts_bound(cuda_device, monkeypatch, checked, own_host):
    """NumPy's solve refuses a NaN factor, cuSOLVER's carries it into the copy back: either way the
    host's bound (its jitter, its error) decides."""
    from scipy.linalg import solve_triangular
    from spherelab.rows import vish as vish_resident

    X, y = _data()
    cpu, dev = _prepared("cpu", X), _prepared(cuda_device, X)
    monkeypatch.setattr(vish_resident, "_device_cholesky", lambda xp: lambda B: xp.full(B.shape, xp.nan))
    if not checked:
        monkeypatch.setattr(dev.ops, "device_solve", lambda L, B, trans=0: solve_triangular(
            L, B, lower=True, trans=trans, check_finite=False))
    fallbacks = []
    monkeypatch.setattr(ResidentLift, "_on_host", _recording(ResidentLift._on_host, fallbacks))
    (va, ga), (vb, gb) = cpu.elbo_and_gradient(X, y), dev.elbo_and_gradient(X, y)
    assert len(fallbacks) == 1
    assert vb == pytest.approx(va, rel=1e-12) and all(_close(ga[k], gb[k]) for k in ga)


def test_the_device_evaluation_makes_the_hosts_trace_check(cuda_device, monkeypatch, own_host):
    """The trace term's rounding guard sees the same numbers on both paths (and refuses on both)."""
    from spherelab.bounds import vish as host_bounds
    from spherelab.linalg import NumericalFailure
    from spherelab.rows import vish as vish_resident

    X, y = _data()
    calls = {}

    def recorder(name, check):
        def record(*args):
            calls[name] = args
            return check(*args)
        return record

    monkeypatch.setattr(host_bounds, "check_trace_term", recorder("cpu", host_bounds.check_trace_term))
    monkeypatch.setattr(vish_resident, "check_trace_term", recorder("device", vish_resident.check_trace_term))
    _prepared("cpu", X).elbo_and_gradient(X, y)
    _prepared(cuda_device, X).elbo_and_gradient(X, y)
    assert set(calls) == {"cpu", "device"} and _close(calls["cpu"], calls["device"], 1e-12)

    def refuse(*args):
        raise NumericalFailure("refused")

    monkeypatch.setattr(vish_resident, "check_trace_term", refuse)
    with pytest.raises(NumericalFailure, match="refused"):
        _prepared(cuda_device, X).elbo_and_gradient(X, y)


def test_a_row_outside_the_lift_gets_the_lifts_own_error(cuda_device):
    X, y = _data()
    X = X.copy()
    X[7, 1] = 1e200
    with pytest.raises(ValueError, match="the lift .X / input_scale, bias. has entries up to"):
        _prepared(cuda_device, X[:6]).elbo_and_gradient(X, y)


def test_a_device_fit_warns_of_nothing(cuda_device):
    """numba-cuda's low-occupancy warning (a small problem's small grid) is not the user's."""
    X, y = _data(40)
    with warnings.catch_warnings(), sl.models.capped():  # two iterations by design
        warnings.simplefilter("error")
        _model(cuda_device, degree=2).fit(X, y, lift_maxiter=2, maxiter=2).predict_f(X[:5])


@pytest.mark.parametrize("prior", ["kernel", "features"])
def test_predictions_on_the_device_equal_the_cpus(cuda_device, monkeypatch, prior, own_host):
    X, y = _data(50)
    Xs = np.random.default_rng(4).uniform(-1.5, 1.5, (23, 3))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        fits = [_model(d, prior=prior).fit(X, y, lift_maxiter=3, maxiter=3) for d in ("cpu", cuda_device)]
    chunks = []
    monkeypatch.setattr(fits[1].ops, "pass_rows", lambda width: chunks.append(width) or 10)  # 3 chunks of rows
    (ma, va), (mb, vb) = (model.predict_f(Xs) for model in fits)
    assert _close(ma, mb, 1e-9) and _close(va, vb, 1e-9) and chunks
    assert fits[1].predict_f(Xs[:0])[0].shape == (0,)
    bad = Xs.copy()
    bad[5, 2] = 1e200
    with pytest.raises(ValueError, match="has entries up to"):
        fits[1].predict_f(bad)
