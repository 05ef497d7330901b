"""VISH: exact limit, bound properties, gradients, streaming statistics, bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import spherelab as sl
from spherelab import kernels as K
from spherelab.bounds import collapsed_bound
from spherelab.bounds import Statistics
from spherelab.features import HarmonicFeatures
from spherelab.models.vish import harmonic_statistics


def data(rng, n=60, D=2):
    X = rng.normal(size=(n, D))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] + 0.1 * rng.normal(size=n)
    return X, y


def exact_gp(kernel, X, y, Xs, noise):
    Kxx = kernel.K(X) + noise * np.eye(len(y))
    Ksx = kernel.K(Xs, X)
    mean = Ksx @ np.linalg.solve(Kxx, y)
    var = kernel.diag(Xs) - np.einsum("ij,ji->i", Ksx, np.linalg.solve(Kxx, Ksx.T))
    _, logdet = np.linalg.slogdet(Kxx)
    lml = -0.5 * (y @ np.linalg.solve(Kxx, y) + logdet + len(y) * np.log(2 * np.pi))
    return mean, var, lml


@pytest.mark.parametrize(
    "base, D, L",
    [
        (K.Matern(1.5, 0.8, variance=1.3, bias=0.7, input_scale=1.2), 2, 5),
        (K.ArcCosine(1, variance=0.9, bias=1.1), 1, 12),  # d = 2: the circle
        (K.NTK(2, bias=0.5, input_scale=np.array([1.0, 2.0, 0.5])), 3, 4),
        (K.IntrinsicMatern(4, 2.5, 0.9, bias=1.0), 3, 4),
    ],
    ids=["matern-d3", "arccos-d2", "ntk-d4", "intrinsic-d4"],
)
def test_all_harmonics_equal_exact_gp_with_truncated_kernel(base, D, L, rng):
    X, y = data(rng, D=D)
    Xs = rng.normal(size=(9, D))
    kernel = K.Truncated(base, D + 1, L)
    model = sl.VISH(kernel, L, sl.likelihoods.Gaussian(0.05)).fit(X, y, optimize=False)
    mean, var = model.predict_f(Xs)
    mean_ex, var_ex, lml = exact_gp(kernel, X, y, Xs, 0.05)
    assert np.allclose(mean, mean_ex, atol=1e-8)
    assert np.allclose(var, var_ex, atol=1e-8)
    assert abs(model.elbo() - lml) < 1e-8 * abs(lml)


def test_elbo_increases_with_degree_and_stays_below_exact(rng):
    X, y = data(rng, n=80)
    kernel = K.Matern(2.5, 1.0, bias=1.0)
    _, _, lml = exact_gp(kernel, X, y, X[:1], 0.05)
    elbos = [
        sl.VISH(copy.copy(kernel), L, sl.likelihoods.Gaussian(0.05)).fit(X, y, optimize=False).elbo()
        for L in range(0, 9)
    ]
    assert all(b > a for a, b in zip(elbos, elbos[1:])), elbos
    assert elbos[-1] < lml
    assert lml - elbos[-1] < 0.2 * (lml - elbos[2])  # the gap closes as features are added


@pytest.mark.parametrize(
    "kernel",
    [K.Matern(1.5, 0.7, variance=1.4, bias=0.8), K.ArcCosine(1, variance=2.0),
     K.IntrinsicMatern(3, 1.5, 0.9), K.PolynomialDecay(3, 4.5, variance=0.8), K.Matern(np.inf, 0.5)],
    ids=repr,
)
def test_model_gradients_against_finite_differences(kernel, rng):
    X, y = data(rng)
    model = sl.VISH(kernel, 6, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
    grads = model.elbo_gradient()
    for name in ["variance", *kernel.shape_params]:
        v = getattr(kernel, name)
        h = 1e-6 * v
        setattr(kernel, name, v + h)
        up = model.elbo()
        setattr(kernel, name, v - h)
        dn = model.elbo()
        setattr(kernel, name, v)
        assert np.isclose(grads[name], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6), name
    n = model.likelihood.variance
    h = 1e-7
    model.likelihood.variance = n + h
    up = model.elbo()
    model.likelihood.variance = n - h
    dn = model.elbo()
    model.likelihood.variance = n
    assert np.isclose(grads["noise"], (up - dn) / (2 * h), rtol=1e-5)


def test_bound_matrix_gradients(rng):
    """dL/dG, dL/dc, dL/dsum_diag, dL/dv, dL/dlam against finite differences (GPy contract)."""
    M, n = 7, 30
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    stats = Statistics(Phi.T @ Phi, Phi.T @ y, float(y @ y), 41.0, n)
    lam = np.exp(rng.normal(size=M)) * np.logspace(0, -6, M)
    v, noise = 3.0, 0.3
    res = collapsed_bound(lam, v, noise, stats)

    def value(**kw):
        s = Statistics(kw.get("G", stats.G), kw.get("c", stats.c), stats.yy,
                               kw.get("sum_diag", stats.sum_diag), n)
        return collapsed_bound(kw.get("lam", lam), kw.get("v", v), noise, s, gradients=False)

    E = np.zeros((M, M))
    E[2, 4] = E[4, 2] = 1.0
    h = 1e-6
    fd = (value(G=stats.G + h * E) - value(G=stats.G - h * E)) / (2 * h)
    assert np.isclose(res.dG[2, 4] + res.dG[4, 2], fd, rtol=1e-6)
    e = np.zeros(M)
    e[3] = 1.0
    assert np.isclose(res.dc[3], (value(c=stats.c + h * e) - value(c=stats.c - h * e)) / (2 * h), rtol=1e-6)
    assert np.isclose(res.dsum_r2, (value(sum_diag=41.0 + h) - value(sum_diag=41.0 - h)) / (2 * h), rtol=1e-6)
    assert np.isclose(res.dv, (value(v=v + h) - value(v=v - h)) / (2 * h), rtol=1e-6)
    for m in [0, M - 1]:  # largest and smallest (1e-6) eigenvalue
        hm = 1e-4 * lam[m]  # finite-difference noise ~ eps |L| / h must stay small
        fd = (value(lam=lam + hm * np.eye(M)[m]) - value(lam=lam - hm * np.eye(M)[m])) / (2 * hm)
        assert np.isclose(res.dlam[m], fd, rtol=1e-5), m


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_streaming_statistics_are_chunk_independent(chunk, rng):
    kernel = K.Matern(1.5, 1.0, bias=0.6, input_scale=np.array([1.0, 0.5, 2.0]))
    feats = HarmonicFeatures(3, dim=4)
    X = rng.normal(size=(301, 3))
    y = rng.normal(size=301)
    st = harmonic_statistics(kernel, feats, X, y, chunk_size=chunk)
    Phi = feats.Kuf(kernel, X).T
    assert np.allclose(st.G, Phi.T @ Phi, atol=1e-10)
    assert np.allclose(st.c, Phi.T @ y, atol=1e-11)
    assert np.isclose(st.sum_diag, np.sum(kernel.lift(X)[0] ** 2))
    assert st.n == 301 and np.isclose(st.yy, y @ y)


def test_arccos_zero_levels_are_dropped(rng):
    X, y = data(rng)
    model = sl.VISH(K.ArcCosine(1), 7).fit(X, y, optimize=False)
    degrees = model.features.degrees
    assert not np.any((degrees % 2 == 1) & (degrees >= 3))
    assert np.isfinite(model.elbo())


def test_fit_optimises_and_returns_self(rng):
    X, y = data(rng, n=120)
    model = sl.VISH(K.Matern(1.5, 1.0), 6, sl.likelihoods.Gaussian(1.0))
    before = sl.VISH(K.Matern(1.5, 1.0), 6, sl.likelihoods.Gaussian(1.0)).fit(X, y, optimize=False).elbo()
    assert model.fit(X, y) is model
    assert model.optimizer_result.success
    assert model.elbo() > before + 10
    mean, var = model.predict_y(X[:5])
    assert mean.shape == (5,) and np.all(var > model.likelihood.variance * 0.999)


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[np.nan, 1.0]]), np.ones(1), "X contains"),
        (np.ones((3, 2)), np.array([1.0, np.inf, 0.0]), "y contains"),
        (np.ones((3, 2)), np.ones(4), "3 rows but y has 4"),
        (np.ones((0, 2)), np.ones(0), "empty"),
        (np.ones(3), np.ones(3), "2-d array"),
    ],
)
def test_bad_input(X, y, match):
    with pytest.raises(ValueError, match=match):
        sl.VISH(K.Matern(1.5, 1.0), 3).fit(X, y)


def test_bad_construction_and_use():
    with pytest.raises(TypeError, match="kernel"):
        sl.VISH("matern", 3)
    with pytest.raises(ValueError, match="max_degree"):
        sl.VISH(K.Matern(1.5, 1.0), -1)
    with pytest.raises(ValueError, match="noise"):
        sl.likelihoods.Gaussian(0.0)
    with pytest.raises(RuntimeError, match="fit"):
        sl.VISH(K.Matern(1.5, 1.0), 3).elbo()
    with pytest.raises(ValueError, match="vanishes"):
        sl.VISH(K.Matern(1.5, 1.0, bias=0.0), 3).fit(np.zeros((2, 2)), np.ones(2))


@pytest.mark.parametrize(
    "kernel",
    [K.Matern(1.5, 0.8, variance=1.3, bias=0.7, input_scale=1.2),
     K.ArcCosine(1, bias=0.9, input_scale=np.array([0.7, 1.4])),
     K.NTK(2, bias=1.3, input_scale=np.array([1.1, 0.6]))],
    ids=repr,
)
def test_lift_gradients_against_finite_differences(kernel, rng):
    """bias and input_scale change the features: FD recomputes the statistics."""
    X, y = data(rng)
    model = sl.VISH(kernel, 5, sl.likelihoods.Gaussian(0.05)).fit(X, y, optimize=False)
    grads = model.elbo_gradient()

    def elbo_now():
        model.stats = harmonic_statistics(kernel, model.features, X, y)
        model._posterior = None
        return model.elbo()

    h = 1e-6
    b = kernel.bias
    kernel.bias = b + h
    up = elbo_now()
    kernel.bias = b - h
    dn = elbo_now()
    kernel.bias = b
    assert np.isclose(grads["bias"], (up - dn) / (2 * h), rtol=1e-6, atol=1e-6)
    s = np.atleast_1d(kernel.input_scale).astype(float)
    fd = []
    for j in range(s.size):
        for sign in (+1, -1):
            v = s.copy()
            v[j] += sign * h
            kernel.input_scale = v if s.size > 1 else float(v[0])
            fd.append(elbo_now())
    kernel.input_scale = s if s.size > 1 else float(s[0])
    fd = [(fd[2 * j] - fd[2 * j + 1]) / (2 * h) for j in range(s.size)]
    assert np.allclose(np.atleast_1d(grads["input_scale"]), fd, rtol=1e-6, atol=1e-6)


def test_lift_training_on_a_subsample_counts_passes(rng):
    X, y = data(rng, n=400)
    X[:, 1] *= 5.0  # a badly scaled input the lift should learn to shrink
    kernel = K.Matern(1.5, 1.0, input_scale=np.array([1.0, 1.0]))
    model = sl.VISH(kernel, 5).fit(X, y, lift_subsample=150)
    assert model.passes == 1  # the lift was fitted on the subsample; one full pass after
    assert model.lift_result.success or model.lift_result.nit > 5
    assert kernel.input_scale[1] > kernel.input_scale[0]
    full = sl.VISH(K.Matern(1.5, 1.0, input_scale=np.array([1.0, 1.0])), 5).fit(X, y)
    assert full.passes > 1  # subsample = all rows: every lift step was a full pass


def test_synthetic_generator_is_deterministic_and_chunked():
    X1, y1 = sl.datasets.synthetic_regression(2500, seed=3, chunk=1000)
    X2, y2 = sl.datasets.synthetic_regression(2500, seed=3, chunk=1000)
    assert X1.shape == (2500, 8) and y1.shape == (2500,)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert 0.3 < y1.std() < 2.0
    with pytest.raises(ValueError, match="num_points"):
        sl.datasets.synthetic_regression(0)


def test_kappa_at_one():
    for k in [K.Matern(1.5, 0.4, variance=2.0), K.ArcCosine(2, variance=0.5), K.NTK(2)]:
        assert np.isclose(k.at_one(), float(k.shape(np.ones(1))[0]))
    assert K.IntrinsicMatern(3, 0.5, 0.05, variance=1.7).at_one() == 1.7
    t = K.Truncated(K.Matern(1.5, 0.7, variance=1.3), 3, 5)
    assert np.isclose(t.at_one(), float(t.shape(np.ones(1))[0]), rtol=1e-13)
    g = t.at_one_gradients()
    h = 1e-6
    up, dn = copy.copy(t), copy.copy(t)
    up.lengthscale = 0.7 + h
    dn.lengthscale = 0.7 - h
    assert np.isclose(g["lengthscale"], (up.at_one() - dn.at_one()) / (2 * h), rtol=1e-6)


SHARED = __import__("pathlib").Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.mark.skipif(not (SHARED / "yacht" / "yacht.csv").exists(), reason="../shared/data not present")
def test_load_uci_from_a_data_directory():
    Xtr, ytr, Xte, yte = sl.datasets.load_uci("yacht", 3, data_dir_=SHARED)
    assert Xtr.shape == (277, 6) and Xte.shape == (31, 6)
    assert ytr.shape == (277,) and yte.shape == (31,)


@pytest.mark.skipif(not (SHARED / "banana" / "banana.csv").exists(), reason="../shared/data not present")
def test_load_snelson_and_banana_from_a_data_directory():
    X, y = sl.datasets.load_snelson(data_dir_=SHARED)
    assert X.shape == (200, 1) and y.shape == (200,)
    assert np.isclose(y.mean(), -0.342745, atol=1e-6)  # PROVENANCE.md
    X, y = sl.datasets.load_banana(data_dir_=SHARED)
    assert X.shape == (400, 2) and set(np.unique(y)) == {0.0, 1.0}
    assert np.isclose(y.mean(), 0.5425)


def test_generated_stand_ins_resemble_the_originals():
    X, y = sl.datasets.snelson_like(seed=1)
    assert X.shape == (200, 1) and 0.0 < X.min() and X.max() < 6.0
    assert 0.5 < y.std() < 1.2  # Snelson: std 0.84
    X, y = sl.datasets.banana_like(seed=1)
    assert X.shape == (400, 2) and set(np.unique(y)) == {0.0, 1.0}
    assert 0.4 < y.mean() < 0.7  # banana: 0.54 of class 1
    # as hard as the original: least-squares classifiers on linear / cubic features reach
    # 0.68 / 0.80 training accuracy on the real banana set
    x1, x2 = X.T
    one = np.ones_like(x1)
    accuracy = []
    for F in (np.column_stack([one, x1, x2]),
              np.column_stack([one, x1, x2, x1**2, x2**2, x1 * x2, x1**3, x2**3, x1**2 * x2, x1 * x2**2])):
        w = np.linalg.lstsq(F, y - 0.5, rcond=None)[0]
        accuracy.append(np.mean((F @ w > 0) == (y == 1)))
    assert 0.6 < accuracy[0] < 0.76 and 0.76 < accuracy[1] < 0.86


def test_loaders_missing_give_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_snelson()
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_banana()


def test_load_uci_missing_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_uci("energy")
    with pytest.raises(ValueError, match="name must be one of"):
        sl.datasets.load_uci("iris")


# ---------------------------------------------------------------------------------------------
# uncollapsed (SVGP) bound
# ---------------------------------------------------------------------------------------------

from spherelab.bounds import uncollapsed_bound  # noqa: E402


def _svgp_problem(rng, n=40, M=6):
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    r2 = 1.0 + rng.random(n)
    lam = np.exp(rng.normal(size=M))
    m = rng.normal(size=M)
    L = np.tril(rng.normal(size=(M, M)) * 0.3) + np.diag(0.5 + rng.random(M))
    return Phi, y, r2, lam, m, L


def test_uncollapsed_gradients(rng):
    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    v, noise, N = 2.5, 0.4, 100
    res = uncollapsed_bound(lam, v, noise, m, L, Phi, y, r2, N)
    f = lambda **kw: uncollapsed_bound(  # noqa: E731
        kw.get("lam", lam), kw.get("v", v), kw.get("noise", noise), kw.get("m", m), kw.get("L", L),
        Phi, y, r2, N).value
    h = 1e-6
    for k in range(len(m)):
        e = np.eye(len(m))[k]
        assert np.isclose(res.dm[k], (f(m=m + h * e) - f(m=m - h * e)) / (2 * h), rtol=1e-6, atol=1e-7)
        hl = 1e-6 * lam[k]
        assert np.isclose(res.dlam[k], (f(lam=lam + hl * e) - f(lam=lam - hl * e)) / (2 * hl), rtol=1e-5, atol=1e-6)
    for i, j in [(0, 0), (3, 1), (5, 5), (4, 2)]:
        E = np.zeros_like(L)
        E[i, j] = 1.0
        assert np.isclose(res.dL[i, j], (f(L=L + h * E) - f(L=L - h * E)) / (2 * h), rtol=1e-6, atol=1e-6)
    assert np.isclose(res.dv, (f(v=v + h) - f(v=v - h)) / (2 * h), rtol=1e-6)
    assert np.isclose(res.dnoise, (f(noise=noise + h) - f(noise=noise - h)) / (2 * h), rtol=1e-6)


def test_uncollapsed_equals_collapsed_at_the_optimal_q(rng):
    X, y = data(rng, n=50)
    kernel = K.Matern(1.5, 0.9, bias=0.8)
    model = sl.VISH(kernel, 4, sl.likelihoods.Gaussian(0.07)).fit(X, y, optimize=False)
    lam = model.features.Kuu_inverse_diag(kernel)
    Phi = model.features.Kuf(kernel, X).T
    noise = 0.07
    A = np.diag(1 / lam) + Phi.T @ Phi / noise
    Ainv = np.linalg.inv(A)
    m_opt = (Ainv @ (Phi.T @ y) / noise) / lam  # Lambda^-1 A^-1 c / noise
    S_opt = Ainv / np.outer(lam, lam)  # Lambda^-1 A^-1 Lambda^-1
    r2 = kernel.lift(X)[0] ** 2
    res = uncollapsed_bound(lam, kernel.at_one(), noise, m_opt, np.linalg.cholesky(S_opt), Phi, y, r2, len(y))
    assert np.isclose(res.value, model.elbo(), rtol=1e-10)
    assert np.allclose(res.dm, 0.0, atol=1e-6 * np.abs(m_opt).max())


def test_minibatch_estimate_is_unbiased(rng):
    """E over uniformly drawn minibatches of the N/B-scaled bound equals the full-data bound."""
    Phi, y, r2, lam, m, L = _svgp_problem(rng, n=24, M=4)
    full = uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi, y, r2, 24).value
    from itertools import combinations

    # exhaustive over every batch of size 3: the expectation exactly
    values = [uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi[list(b)], y[list(b)], r2[list(b)], 24).value
              for b in combinations(range(24), 3)]
    assert np.isclose(np.mean(values), full, rtol=1e-12)
    # and a plain Monte Carlo average over random batches, within 4 standard errors
    draws = [uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi[idx], y[idx], r2[idx], 24).value
             for idx in (rng.choice(24, 6, replace=False) for _ in range(4000))]
    assert abs(np.mean(draws) - full) < 4 * np.std(draws) / np.sqrt(len(draws))


def test_whitened_uncollapsed_gradients(rng):
    from spherelab.bounds import uncollapsed_bound_whitened as ubw

    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    lam = lam * np.logspace(0, -4, lam.size)  # decaying spectrum
    args = dict(v=2.0, noise=0.3)
    res = ubw(lam, args["v"], args["noise"], m, L, Phi, y, r2, 80)
    f = lambda **kw: ubw(kw.get("lam", lam), args["v"], args["noise"], kw.get("m", m), kw.get("L", L), Phi, y, r2, 80).value  # noqa: E731
    h = 1e-6
    for k in range(len(m)):
        e = np.eye(len(m))[k]
        assert np.isclose(res.dm[k], (f(m=m + h * e) - f(m=m - h * e)) / (2 * h), rtol=1e-6, atol=1e-7)
        hl = 1e-5 * lam[k]
        assert np.isclose(res.dlam[k], (f(lam=lam + hl * e) - f(lam=lam - hl * e)) / (2 * hl), rtol=1e-5, atol=1e-5)
    for i, j in [(0, 0), (3, 1), (5, 5)]:
        E = np.zeros_like(L)
        E[i, j] = 1.0
        assert np.isclose(res.dL[i, j], (f(L=L + h * E) - f(L=L - h * E)) / (2 * h), rtol=1e-6, atol=1e-6)


def test_svi_minibatch_fit_approaches_the_collapsed_optimum(rng):
    X, y = data(rng, n=400)
    collapsed = sl.VISH(K.Matern(1.5, 1.0, bias=1.0), 5, sl.likelihoods.Gaussian(0.5)).fit(X, y, train_lift=False)
    svi = sl.VISH(K.Matern(1.5, 1.0, bias=1.0), 5, sl.likelihoods.Gaussian(0.5))
    svi.fit_svi(X, y, batch_size=64, iterations=1500, lr=0.05)
    assert svi.elbo() > collapsed.elbo() - 25.0  # prior q: about -600 here
    assert svi.elbo() < collapsed.elbo()  # a bound can only be lower
    assert abs(np.log(svi.likelihood.variance / collapsed.likelihood.variance)) < 0.3
    Xs = rng.normal(size=(200, 2))
    ys = np.sin(2 * Xs[:, 0]) + 0.3 * Xs[:, -1]
    mse_svi = np.mean((svi.predict_f(Xs)[0] - ys) ** 2)
    mse_col = np.mean((collapsed.predict_f(Xs)[0] - ys) ** 2)
    assert mse_svi < 1.5 * mse_col + 0.01


def test_general_bound_matches_gaussian_and_bernoulli_gradients(rng):
    from spherelab.bounds import uncollapsed_bound_general as ubg

    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    gauss = sl.likelihoods.Gaussian(0.3)
    v = 50.0  # large enough that every marginal variance is positive, as for real features
    a = uncollapsed_bound(lam, v, 0.3, m, L, Phi, y, r2, 90)
    b = ubg(lam, v, gauss, m, L, Phi, y, r2, 90)
    assert np.isclose(a.value, b.value, rtol=1e-13)
    for x, z in [(a.dm, b.dm), (a.dL, b.dL), (a.dlam, b.dlam)]:
        assert np.allclose(x, z, rtol=1e-12, atol=1e-12)
    # Bernoulli: finite differences through the Gauss-Hermite expectations
    yb = (y > 0).astype(float)
    bern = sl.likelihoods.Bernoulli()
    res = ubg(lam, v, bern, m, L, Phi, yb, r2, 90)
    f = lambda **kw: ubg(kw.get("lam", lam), kw.get("v", v), bern, kw.get("m", m), kw.get("L", L), Phi, yb, r2, 90).value  # noqa: E731
    h = 1e-6
    for k in range(len(m)):
        e = np.eye(len(m))[k]
        assert np.isclose(res.dm[k], (f(m=m + h * e) - f(m=m - h * e)) / (2 * h), rtol=1e-5, atol=1e-7)
        hl = 1e-6 * lam[k]
        assert np.isclose(res.dlam[k], (f(lam=lam + hl * e) - f(lam=lam - hl * e)) / (2 * hl), rtol=1e-5, atol=1e-6)
    E = np.zeros_like(L)
    E[3, 1] = 1.0
    assert np.isclose(res.dL[3, 1], (f(L=L + h * E) - f(L=L - h * E)) / (2 * h), rtol=1e-5, atol=1e-6)
    assert np.isclose(res.dv, (f(v=v + h) - f(v=v - h)) / (2 * h), rtol=1e-5)


def test_bernoulli_expectations_against_quadrature():
    from scipy.integrate import quad
    from scipy.stats import norm

    lik = sl.likelihoods.Bernoulli()
    mu, var = np.array([0.3, -1.2, 2.0]), np.array([0.5, 2.0, 0.1])
    y = np.array([1.0, 0.0, 1.0])
    e, _, _ = lik.variational_expectations(y, mu, var)
    for i in range(3):
        s = 2 * y[i] - 1
        ref = quad(lambda f: norm.logcdf(s * f) * norm.pdf(f, mu[i], np.sqrt(var[i])), -30, 30)[0]
        assert abs(e[i] - ref) < 1e-6 * abs(ref)
    p, _ = lik.predict_y(mu, var)
    assert np.allclose(p, norm.cdf(mu / np.sqrt(1 + var)))
    with pytest.raises(ValueError, match="y in"):
        lik.check_targets(np.array([0.0, 2.0]))


def test_bernoulli_classification_with_svi(rng):
    X = rng.uniform(-2, 2, size=(300, 2))
    y = (X[:, 1] > np.sin(1.5 * X[:, 0])).astype(float)
    model = sl.VISH(K.Matern(1.5, 1.0, bias=1.0), 6, sl.likelihoods.Bernoulli())
    model.fit_svi(X, y, batch_size=100, iterations=800, lr=0.03)
    p, var = model.predict_y(X)
    assert np.all((p >= 0) & (p <= 1)) and np.allclose(var, p * (1 - p))
    assert np.mean((p > 0.5) == y) > 0.9
    untrained = sl.VISH(K.Matern(1.5, 1.0, bias=1.0), 6, sl.likelihoods.Bernoulli())
    untrained.fit_svi(X, y, iterations=0)
    prior_elbo = untrained.elbo()
    assert model.elbo() > prior_elbo + 50
    with pytest.raises(ValueError, match="y in"):
        sl.VISH(K.Matern(1.5, 1.0), 3, sl.likelihoods.Bernoulli()).fit_svi(X, y + 1.0)
    with pytest.raises(TypeError, match="fit_svi"):
        sl.VISH(K.Matern(1.5, 1.0), 3, sl.likelihoods.Bernoulli()).fit(X, y)
