"""VISH and the models' predictions on Dask arrays: blockwise statistics equal to the in-memory
pass (threaded scheduler and a LocalCluster of two worker processes), the same fit, lazy
predictions, a worker killed mid-pass retried, bad blocks named, Zarr on disk."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data
from rounding import close_by_rounding
from spherelab import kernels as K
from spherelab.bounds.vish import harmonic_statistics

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts

da = pytest.importorskip("dask.array")


def _data(n=6_000, D=3):
    return toy_data(0, n, D, inputs="uniform", signal=lambda X: np.sin(3 * X[:, 0]) * np.cos(X[:, 1]))


def _features(kernel, degree, D):
    f = sl.HarmonicFeatures(degree)
    f.initialise(D + 1, None)
    f.bind(kernel)
    return f


def _close_stats(a, b, tol=1e-12):
    assert a.n == b.n
    for name in ("G", "c", "yy", "sum_diag"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert np.abs(x - y).max() <= tol * np.abs(y).max(), name


def test_blockwise_statistics_equal_the_in_memory_pass():
    X, y = _data()
    kernel = K.Matern(1.5, 0.9, bias=0.8)
    feats = _features(kernel, 4, 3)
    ref = harmonic_statistics(kernel, feats, X, y, chunk_size=1024)
    for chunks in (1_000, 1_777, 6_000):  # even, uneven with a short last block, one block
        got = harmonic_statistics(kernel, feats, da.from_array(X, chunks=(chunks, 2)), da.from_array(y, chunks=500),
                                  chunk_size=1024)
        _close_stats(got, ref)


def test_vish_fit_on_dask_matches_memory_and_predicts_lazily():
    X, y = _data()
    Xd, yd = da.from_array(X, chunks=(1_500, 3)), da.from_array(y, chunks=1_500)
    kw = {"lift_subsample": 2_000, "maxiter": 100}
    a = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, y, **kw)
    b = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(Xd, yd, **kw)
    assert b.lift_result.nit == a.lift_result.nit  # the same subsample, so the same lift stage
    pa, pb = a.get_params(), b.get_params()
    for key in ("bias", "input_scale"):
        assert np.array_equal(pa[key], pb[key])
    # the spectrum stage ends on a flat optimum, which amplifies the 1e-15 differences of another
    # summation order in its end point, not in the bound it reaches
    assert np.isclose(a.elbo(), b.elbo(), rtol=1e-9)
    for key in ("variance", "lengthscale", "noise"):
        assert np.isclose(pa[key], pb[key], rtol=1e-4), key
    _close_stats(b.stats, a.stats)
    mean, var = b.predict_f(Xd[:2_000])
    assert type(mean).__module__.startswith("dask") and mean.shape == (2_000,)
    m_ref, v_ref = b.predict_f(X[:2_000])
    # each row's prediction is a dot product over the M features (the mean, Phi w) and a quadratic
    # form (the variance, prior - Phi C Phi^T): Dask's blocks and memory's chunks change only the
    # products' shapes, so the two agree to the rounding of those sums (tests/rounding.py)
    w, C, lam = b._cache()
    Phi = np.abs(b.features.Kuf(b.kernel, X[:2_000]).T)
    M = Phi.shape[1]
    close_by_rounding(mean.compute(), m_ref, M, Phi @ np.abs(w))
    prior = b.kernel.diag(X[:2_000]) if b.prior == "kernel" else Phi ** 2 @ np.abs(lam)
    close_by_rounding(var.compute(), v_ref, 2 * M + 1, prior + np.einsum("nm,nm->n", Phi @ np.abs(C), Phi))
    ym, yv = b.predict_y(Xd[:100])
    assert np.allclose(yv.compute(), v_ref[:100] + b.likelihood.variance, rtol=1e-14)


def test_every_model_predicts_on_dask():
    X, y = _data(300, 2)
    model = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:6]), 4, sl.likelihoods.Gaussian(0.1))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=5)
    mean, var = model.predict_f(da.from_array(X, chunks=(70, 2)))
    m_ref, v_ref = model.predict_f(X)
    assert np.allclose(mean.compute(), m_ref, rtol=1e-12, atol=1e-12)
    assert np.allclose(var.compute(), v_ref, rtol=1e-12, atol=1e-12)


def test_bad_blocks_are_named():
    X, y = _data(1_000)
    X[612, 1] = np.nan
    Xd, yd = da.from_array(X, chunks=(250, 3)), da.from_array(y, chunks=250)
    model = sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1))
    with pytest.raises(ValueError, match=r"block 2 \(rows 500..749\): X contains 1 NaN"):
        model.fit(Xd, yd, optimize=False)
    fitted = sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(_data(500)[0], _data(500)[1], optimize=False)
    with pytest.raises(ValueError, match="X must have 3 columns"):
        fitted.predict_f(da.ones((10, 4), chunks=5))
    Xbad = da.from_array(np.where(np.arange(20)[:, None] == 13, np.inf, np.ones((20, 3))), chunks=(5, 3))
    mean, _ = fitted.predict_f(Xbad)
    with pytest.raises(ValueError, match=r"block 2 \(rows 10..14\).*NaN or infinite"):
        mean.compute()
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        model.fit(Xd[Xd[:, 0] > 0], yd[Xd[:, 0] > 0])


def test_blocks_that_lie_about_their_shape_are_named():
    import dask

    X, y = _data(200)
    fitted = sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)

    def liar(rows, cols):  # a hand-built block whose task returns another shape than declared
        late = da.from_delayed(dask.delayed(lambda: X[100:100 + rows, :cols])(), shape=(100, 3), dtype=float)
        return da.concatenate([da.from_array(X[:100], chunks=100), late])

    yd = da.from_array(y, chunks=100)
    for rows, cols in ((50, 3), (100, 2)):
        Xd = liar(rows, cols)
        want = rf"block 1 of X \(rows 100..199\) has shape \({rows}, {cols}\), but X's chunks declare \(100, 3\)"
        with pytest.raises(ValueError, match=want):
            sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(Xd, yd, optimize=False)
        with pytest.raises(ValueError, match=want):  # the lift's subsample gathers rows first
            sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(Xd, yd, maxiter=2)
        mean, _ = fitted.predict_f(Xd)  # a short block would silently give fewer predictions
        with pytest.raises(ValueError, match=want):
            mean.compute()
    y_late = da.from_delayed(dask.delayed(lambda: y[100:150])(), shape=(100,), dtype=float)
    yd = da.concatenate([da.from_array(y[:100], chunks=100), y_late])
    with pytest.raises(ValueError, match=r"block 1 of y \(rows 100..199\) has shape \(50,\)"):
        sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(da.from_array(X, chunks=100), yd, optimize=False)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=40) as lc, distributed.Client(lc) as client:
        yield client


class KillOnce(K.Matern):
    """A Matérn kernel whose first lift on a worker kills that worker (a marker file records it)."""

    marker = ""

    def lift(self, X, name="X", row_offset=0):
        if self.marker and not os.path.exists(self.marker) and os.getpid() != self.parent:
            open(self.marker, "w").close()
            os._exit(1)
        return super().lift(X, name, row_offset)


@pytest.mark.slow
def test_local_cluster_gives_the_same_statistics_and_survives_a_killed_worker(cluster, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    X, y = _data(8_000)
    Xd, yd = da.from_array(X, chunks=(1_000, 3)), da.from_array(y, chunks=1_000)
    kernel = K.Matern(1.5, 0.9, bias=0.8)
    feats = _features(kernel, 3, 3)
    ref = harmonic_statistics(kernel, feats, X, y, chunk_size=512)
    _close_stats(harmonic_statistics(kernel, feats, Xd, yd, chunk_size=512), ref)
    killer = KillOnce(1.5, 0.9, bias=0.8)
    killer.marker, killer.parent = str(tmp_path / "killed"), os.getpid()
    got = harmonic_statistics(killer, _features(killer, 3, 3), Xd, yd, chunk_size=512)
    assert os.path.exists(killer.marker)  # a worker did die mid-pass ...
    _close_stats(got, ref)  # ... and Dask's retry gives the same statistics
    model = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(Xd, yd, lift_subsample=2_000, maxiter=50)
    mem = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, y, lift_subsample=2_000, maxiter=50)
    # the same bound to 1e-9; predictions to 1e-5 (the end point of a flat spectrum optimum)
    assert np.isclose(model.elbo(), mem.elbo(), rtol=1e-9)
    assert np.allclose(model.predict_f(Xd[:500])[0].compute(), mem.predict_f(X[:500])[0], rtol=1e-5, atol=1e-6)


def test_zarr_on_disk(tmp_path):
    zarr = pytest.importorskip("zarr")  # noqa: F841
    X, y = _data(3_000)
    da.from_array(X, chunks=(1_000, 3)).to_zarr(str(tmp_path / "X.zarr"))
    da.from_array(y, chunks=1_000).to_zarr(str(tmp_path / "y.zarr"))
    Xz, yz = da.from_zarr(str(tmp_path / "X.zarr")), da.from_zarr(str(tmp_path / "y.zarr"))
    kernel = K.Matern(1.5, 0.9)
    feats = _features(kernel, 3, 3)
    _close_stats(harmonic_statistics(kernel, feats, Xz, yz), harmonic_statistics(kernel, feats, X, y))


def _decoupled(kind):
    from spherelab import activations as A

    if kind == "activated":
        return sl.OrthogonalSVGP(K.Matern(2.5, 0.9), sl.ActivatedFeatures(A.Softplus(1.0), 12, 4), 6,
                                 sl.likelihoods.Gaussian(0.3))
    Z = np.random.default_rng(5).uniform(-1, 1, (10, 3))
    return sl.OrthogonalSVGP(K.Matern(1.5, 0.8), sl.InducingPoints(Z), 0, sl.likelihoods.Gaussian(0.3))


@pytest.mark.parametrize("kind", ["activated", "points"])
def test_decoupled_bound_and_gradient_on_dask_equal_memory(kind):
    """Issue 30: the decoupled models' Gaussian bound on a Dask array, two passes over its blocks
    (the whitened statistics, then the gradient's row sums), equals the in-memory pass."""
    X, y = _data(2_000)
    model = _decoupled(kind)
    model.initialise(X, seed=0)
    model.optimal_q(X, y)
    theta = model.parameter_vector()
    ref = model.objective(theta, X, y)
    for chunks in (500, 777, 2_000):
        value, grad = model.objective(theta, da.from_array(X, chunks=(chunks, 3)), da.from_array(y, chunks=chunks))
        assert value == pytest.approx(ref[0], rel=1e-12)
        np.testing.assert_allclose(grad, ref[1], rtol=1e-9, atol=1e-10 * np.abs(ref[1]).max())


@pytest.mark.parametrize("collapsed", [True, False])
def test_decoupled_fit_on_dask_matches_memory(collapsed):
    X, y = _data(1_600)
    Xd, yd = da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        mem = _decoupled("activated").fit(X, y, maxiter=10, collapsed=collapsed)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        lazy = _decoupled("activated").fit(Xd, yd, maxiter=10, collapsed=collapsed)
    assert np.array_equal(mem.W.shape, lazy.W.shape)
    assert np.isclose(lazy.elbo(), mem.elbo(), rtol=1e-8)
    assert np.allclose(lazy.parameter_vector(), mem.parameter_vector(), rtol=1e-6, atol=1e-8)
    mean = lazy.predict_y(Xd[:300])[0]
    assert np.allclose(mean.compute(), mem.predict_y(X[:300])[0], atol=1e-7)


def test_decoupled_on_dask_refuses_what_it_cannot_stream():
    X, y = _data(400)
    Xd, yd = da.from_array(X, chunks=(100, 3)), da.from_array((y > 0).astype(float), chunks=100)
    from spherelab import activations as A

    bern = sl.OrthogonalSVGP(K.Matern(2.5), sl.ActivatedFeatures(A.ReLU(), 4, 3), 0, sl.likelihoods.Bernoulli())
    with pytest.raises(TypeError, match="Gaussian likelihood, whiten=True"):
        bern.fit(Xd, yd, maxiter=2)
    with pytest.raises(TypeError, match="fit_svi draws minibatches"):
        _decoupled("points").fit_svi(Xd, da.from_array(y, chunks=100), iterations=2)


@pytest.mark.slow
def test_decoupled_fit_on_a_local_cluster_matches_memory(cluster):
    X, y = _data(3_000)
    Xd, yd = da.from_array(X, chunks=(750, 3)), da.from_array(y, chunks=750)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        mem = _decoupled("activated").fit(X, y, maxiter=10)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        lazy = _decoupled("activated").fit(Xd, yd, maxiter=10)
    assert np.isclose(lazy.elbo(), mem.elbo(), rtol=1e-8)


def test_the_hybrid_started_from_vish_fits_dask_as_memory():
    """Spherical harmonics and greedily chosen orthogonal inputs (OrthogonalSVGP.from_vish) on a Dask
    array: the same inputs chosen, the same collapsed fit as in memory."""
    X, y = _data(2_000)
    Xd, yd = da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500)
    vish = sl.VISH(K.Matern(1.5), 2, prior="kernel").fit(X, y)
    mem = sl.OrthogonalSVGP.from_vish(vish, 6).fit(X, y, optimize=False)
    lazy = sl.OrthogonalSVGP.from_vish(vish, 6).fit(Xd, yd, optimize=False)
    assert np.array_equal(lazy.W, mem.W)
    # the same bound, summed block by block: its sums over the rows (y^T y, sum k(x, x), tr Q, c^T B^-1 c,
    # each over 2 sigma^2) add up in another order, and the trace term subtracts two sums of r^2 of
    # ~1e4 each per row from each other; the rounding of those sums is all that may differ
    terms = (y @ y + 2 * mem.kernel.diag(X).sum()) / (2 * mem.likelihood.variance)
    close_by_rounding(lazy.elbo(), mem.elbo(), X.shape[0], terms)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        mem.fit(X, y, maxiter=15)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        lazy.fit(Xd, yd, maxiter=15)
    # (the blocks' sums round differently; fifteen L-BFGS-B steps carry that to ~1e-6)
    assert np.isclose(lazy.elbo(), mem.elbo(), rtol=1e-5)
