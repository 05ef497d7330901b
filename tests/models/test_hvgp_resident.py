"""HVGP's blocks on the rows floor (spherelab.rows.hvgp): the statistics path there, on the CPU and
on the device, gives the CPU's dense bound and gradient (full batch, minibatch, collapsed), a fit
copies its rows once and then moves only arrays of the inducing size, and a row outside the lift
gets the lift's own error."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import hvgp_data, peak_memory, randomise_block_q
from spherelab import kernels as K
from spherelab.features.device_columns import OrbitColumns
from spherelab.groups import Antipodal, Product, Reflection, Rotation
from spherelab.rows.device import DeviceRows
from spherelab.rows.hvgp import DeviceBlocks

CASES = {
    "reflect each, ARD": (lambda: Reflection(2),
                          lambda: K.Matern(2.5, 0.9, bias=0.7, input_scale=np.array([1.2, 0.8])), 2),
    "rotate 4": (lambda: Rotation(2, 4), lambda: K.Matern(1.5, 1.1, bias=0.5, input_scale=1.3), 2),
    "rotate 3 x reflect": (lambda: Product(Rotation(3, 3, (0, 1)), Reflection(3, [[2]])),
                           lambda: K.Matern(2.5, 0.8, bias=0.6), 3),
}


def _close(a, b, tol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b), initial=0.0) <= tol * max(1.0, np.max(np.abs(a), initial=0.0))


def _same(a, b) -> bool:
    if isinstance(a, list):  # one array per block
        return len(a) == len(b) and all(_close(x, z) for x, z in zip(a, b))
    return _close(a, b)


def _models(case, device, rng, n=40):
    group, kern, D = CASES[case]
    X, y = hvgp_data(rng, n, D)
    models = []
    for dev in ("cpu", device):
        m = sl.HarmonicSVGP(kern(), group(), 3, sl.likelihoods.Gaussian(0.3), device=dev).fit(X, y, optimize=False)
        models.append(m)
    models[1].set_params(**models[0].get_params())  # the same inducing inputs and q
    randomise_block_q(models[0], np.random.default_rng(4))
    randomise_block_q(models[1], np.random.default_rng(4))
    return models, X, y


@pytest.fixture
def dense_host(monkeypatch):
    """The CPU's reference: its dense bound (every block's K_uf at once), not the rows floor."""
    monkeypatch.setattr(DeviceBlocks, "applies", lambda self, n: self.ops.device != "cpu" and self.has_device_blocks())


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("collapsed", [False, True])
def test_the_cpus_floor_equals_its_dense_bound(case, collapsed, rng, monkeypatch):
    """On the CPU the rows floor's loop (the orbit columns at each chunk's lift, several chunks
    dealt to the cores) and the dense bound give one value and one gradient: sums of 40 rows'
    products in another order (value to 1e-11 relative; every entry as the device's test)."""
    group, kern, D = CASES[case]
    X, y = hvgp_data(rng, 40, D)
    m = sl.HarmonicSVGP(kern(), group(), 3, sl.likelihoods.Gaussian(0.3)).fit(X, y, optimize=False)
    randomise_block_q(m, np.random.default_rng(4))
    monkeypatch.setattr(DeviceBlocks, "chunk_entries", 7 * DeviceBlocks(m).column_width())  # 7 rows a chunk
    P = sum(m.sizes)  # a minibatch of fewer than 3 P rows takes the dense bound on the CPU
    assert DeviceBlocks(m).applies(3 * P) and not DeviceBlocks(m).applies(3 * P - 1) and 40 >= 3 * P
    names = m.collapsed_names if collapsed else None
    theta = m.parameter_vector(names)

    def evaluate():
        if collapsed:
            return m.collapsed_objective(theta, X, y)
        return m.objective(theta, X, y, num_data=60)

    floor = evaluate()
    monkeypatch.setattr(DeviceBlocks, "applies", lambda self, n: False)
    dense = evaluate()
    assert floor[0] == pytest.approx(dense[0], rel=1e-11)
    assert _close(floor[1], dense[1], 1e-9)


@pytest.mark.parametrize("case", list(CASES))
def test_the_device_bound_and_gradient_equal_the_cpus(cuda_device, case, rng, dense_host):
    (cpu, dev), X, y = _models(case, cuda_device, rng)
    assert DeviceBlocks(dev).applies(len(X)) and not DeviceBlocks(cpu).applies(len(X))
    for rows, num_data in ((slice(None), None), (slice(0, 12), 40)):
        va, ga = cpu.elbo_and_gradient(X[rows], y[rows], num_data)
        vb, gb = dev.elbo_and_gradient(X[rows], y[rows], num_data)
        assert vb == pytest.approx(va, rel=1e-11)
        assert set(ga) == set(gb)
        off = [k for k in ga if not _same(ga[k], gb[k])]
        assert not off, off


def test_the_collapsed_bound_on_the_device_is_the_cpus(cuda_device, rng, dense_host):
    (cpu, dev), X, y = _models("rotate 4", cuda_device, rng)
    names = cpu.collapsed_names
    theta = cpu.parameter_vector(names)
    va, ga = cpu.collapsed_objective(theta, X, y)
    vb, gb = dev.collapsed_objective(theta, X, y)
    assert vb == pytest.approx(va, rel=1e-10) and _close(ga, gb, 1e-8)
    assert all(_close(a, b, 1e-9) for a, b in zip(cpu.Ls, dev.Ls)) and _close(np.concatenate(cpu.ms),
                                                                                np.concatenate(dev.ms), 1e-9)


def test_orbit_columns_are_the_components_values(cuda_device, rng):
    (cpu, dev), X, y = _models("rotate 3 x reflect", cuda_device, rng)
    block = DeviceBlocks(dev).column_blocks()[0]
    assert isinstance(block, OrbitColumns) and block.width == sum(dev.sizes)
    xp = dev.ops.array_namespace()
    r, U = dev.kernel.lift(X)
    _, Kfu = block.columns(dev.ops, xp.asarray(r), xp.asarray(U))
    expected = np.vstack([comp.K(Z, X) for comp, Z in zip(cpu.components, cpu.Z)]).T
    assert _close(dev.ops.to_host(Kfu), expected, 1e-12)


def test_a_fit_copies_back_once_per_evaluation_and_nothing_n_sized(cuda_device, monkeypatch, rng):
    # n just above the bound below (460 here): the simulator's time grows with n x the columns
    (_, dev), X, y = _models("reflect each, ARD", cuda_device, rng, n=480)
    sizes, back, evaluations = [], [], []
    impl = dev.ops.zonal_columns.__self__
    for owner in (dev.ops, impl):
        for name in ("to_device", "to_host"):
            def counted(a, *args, _real=getattr(owner, name), _back=name == "to_host", **kw):
                if _back:
                    back.append(len(sizes))
                sizes.append(np.size(a))
                return _real(a, *args, **kw)

            monkeypatch.setattr(owner, name, counted)
    original = DeviceRows.gram
    monkeypatch.setattr(DeviceRows, "gram",
                        lambda self, *a, **kw: evaluations.append(len(sizes)) or original(self, *a, **kw))
    with pytest.warns(sl.ConvergenceWarning):
        dev.fit(X, y, maxiter=3)
    assert len(evaluations) >= 3
    assert max(sizes[:evaluations[0]]) >= X.size  # the rows, once
    P = sum(dev.sizes)
    # at most dL/dK_uu, q (or its gradient), the orbit points' gradients and a few numbers
    assert max(sizes[evaluations[0]:]) <= P * P + (P + P * P) + DeviceBlocks(dev).column_width() * 3 + 16 < X.shape[0]
    marks = evaluations + [len(sizes)]
    counts = [sum(a <= i < b for i in back) for a, b in zip(marks[:-1], marks[1:])]
    assert counts[:-1] == [1] * (len(counts) - 1), counts  # (the fit's last optimal_q copies after them)


def test_a_row_outside_the_lift_gets_the_lifts_own_error(cuda_device, rng):
    (_, dev), X, y = _models("rotate 4", cuda_device, rng)
    X = X.copy()
    X[5, 0] = 1e200
    with pytest.raises(ValueError, match="the lift .X / input_scale, bias. has entries up to"):
        dev.elbo_and_gradient(X, y)


def test_other_kernels_likelihoods_and_groups_stay_on_the_host(cuda_device):
    """Their dense bound on the host (no column blocks: the rows floor does not take them)."""
    assert not DeviceBlocks(sl.HarmonicSVGP(K.Matern(1.5, 1.0), Antipodal(), 2, device=cuda_device)).applies(10**6)
    assert not DeviceBlocks(sl.HarmonicSVGP(K.ArcCosine(1), Reflection(2), 2, device=cuda_device)).applies(10**6)
    assert not DeviceBlocks(sl.HarmonicSVGP(K.Matern(1.5, 1.0), Reflection(2), 2, sl.likelihoods.Bernoulli(),
                                            device=cuda_device)).applies(10**6)


@pytest.mark.filterwarnings("ignore::spherelab.ConvergenceWarning")
def test_the_device_fits_follow_the_cpus(cuda_device, rng, dense_host):
    (cpu, dev), X, y = _models("rotate 4", cuda_device, rng)
    for m in (cpu, dev):
        m.fit(X, y, maxiter=5)
    a, b = cpu.get_params(), dev.get_params()
    assert all(_same(a[k], b[k]) if k != "q_sqrt" else _same(list(a[k]), list(b[k])) for k in a)
    for m in (cpu, dev):
        m.fit_svi(X, y, batch_size=16, iterations=4, lr=0.02, seed=3)
    assert np.allclose(dev.trace, cpu.trace, rtol=1e-10, atol=0)


def test_the_cpus_floor_memory_does_not_grow_with_n(monkeypatch):
    """Peak memory of one HVGP evaluation on the CPU's rows floor, the chunks' columns recomputed
    for the backward pass (not kept): the same for N and 4N rows, and below one N x M array (the
    dense bound forms every block's K_uf for all rows). On one thread: each share of a split pass
    holds its own chunk's temporaries (:func:`conftest.peak_memory`)."""
    monkeypatch.setattr(DeviceBlocks, "keep_entries", 0)
    monkeypatch.setattr(DeviceBlocks, "chunk_entries", 256 * 96)  # 256-row chunks of 96 orbit points
    peaks = []
    for n in (4000, 16000):
        X, y = hvgp_data(np.random.default_rng(0), n, 2)
        m = sl.HarmonicSVGP(K.Matern(2.5, 0.9), Reflection(2), 6, sl.likelihoods.Gaussian(0.3))
        m.fit(X, y, optimize=False)
        assert DeviceBlocks(m).applies(n) and DeviceBlocks(m).column_width() == 96 and sum(m.sizes) == 24
        peaks.append(peak_memory(lambda: m.elbo_and_gradient(X, y)))
    assert peaks[1] < 1.5 * peaks[0], peaks
    assert peaks[1] < 16000 * sum(m.sizes) * 8, peaks  # below one (N, M) array
