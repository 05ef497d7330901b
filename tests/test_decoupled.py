"""Activated / inducing-point features and the orthogonally-decoupled SVGP (seed 003)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import spherelab as sl
from conftest import check_collapsed_gradient
from spherelab import activations as A
from spherelab import kernels as K
from spherelab import OrthogonalSVGP
from spherelab.features import ActivatedFeatures, HarmonicFeatures, InducingPoints


def data(rng, n=15, D=2):
    X = rng.standard_normal((n, D))
    y = np.sin(1.5 * X[:, 0]) + 0.3 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


FEATURES = {
    "softplus": lambda rng: ActivatedFeatures(A.Softplus(2.0), 4, 4),
    "relu": lambda rng: ActivatedFeatures(A.ReLU(), 4, 5),
    "points": lambda rng: InducingPoints(rng.standard_normal((4, 2))),
    "harmonics": lambda rng: HarmonicFeatures(3),
}
KERNELS = {
    "arccos": lambda: K.ArcCosine(1, 1.3, bias=0.8, input_scale=np.array([1.2, 0.7])),
    "matern52": lambda: K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=0.8),
}


# ---------------------------------------------------------------------------------------------
# features: Kuu, Kuf and their chain rules
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kname", KERNELS)
@pytest.mark.parametrize("fname", FEATURES)
def test_feature_gradients_against_finite_differences(kname, fname, rng):
    kern, feat = KERNELS[kname](), FEATURES[fname](rng)
    X = rng.standard_normal((6, 2))
    feat.initialise(3, rng)
    if isinstance(feat, HarmonicFeatures):
        feat.bind(kern)  # the model does this; arc-cosine drops the odd level 3
    M = feat.num_features
    Gu, Gf = rng.standard_normal((M, M)), rng.standard_normal((M, 6))

    def f():
        return np.sum(Gu * feat.Kuu(kern)) + np.sum(Gf * feat.Kuf(kern, X))

    gu, gf = feat.Kuu_gradients(kern, Gu), feat.Kuf_gradients(kern, Gf, X)
    h = 1e-6
    p = feat.get_params()
    g = feat.param_gradient(gu) + feat.param_gradient(gf)
    for i in range(p.size):
        q = p.copy()
        q[i] += h
        feat.set_params(q)
        fp = f()
        q[i] -= 2 * h
        feat.set_params(q)
        fm = f()
        assert np.isclose(g[i], (fp - fm) / (2 * h), rtol=1e-6, atol=1e-7)
    feat.set_params(p)
    for i in np.ndindex(X.shape):
        X[i] += h
        fp = f()
        X[i] -= 2 * h
        fm = f()
        X[i] += h
        assert np.isclose(gf["X"][i], (fp - fm) / (2 * h), rtol=1e-6, atol=1e-7)
    for name in ["variance", *kern.shape_params, "bias", "input_scale"]:
        an = np.atleast_1d(np.asarray(gu.get(name, 0.0)) + np.asarray(gf.get(name, 0.0)))
        v0 = copy.deepcopy(getattr(kern, name))
        for j in range(np.size(v0)):
            v = np.array(v0, dtype=float).reshape(-1)
            v[j] += h
            setattr(kern, name, v if np.ndim(v0) else float(v[0]))
            fp = f()
            v[j] -= 2 * h
            setattr(kern, name, v if np.ndim(v0) else float(v[0]))
            fm = f()
            setattr(kern, name, v0)
            assert np.isclose(an[j], (fp - fm) / (2 * h), rtol=1e-6, atol=1e-7), name


def test_activated_features_match_their_definition(rng):
    """Kuf is the truncated homogeneous unit ||w|| r sigma_L(w^T x / (||w|| r)); Kuu is the
    RKHS inner product sum sigma_l^2 / lambda_l Z_l, evaluated independently by quadrature of
    the Funk-Hecke coefficients."""
    kern = K.Matern(2.5, 0.7, bias=1.0)
    act = A.Softplus(3.0)
    L, d = 6, 3
    feat = ActivatedFeatures(act, 3, L, weights=rng.standard_normal((3, d)))
    X = rng.standard_normal((5, d - 1))
    Xt = np.column_stack([X, np.ones(5)])
    lam = kern.spectrum(d, L)
    sig = act.coefficients(d, L)
    W = feat.weights
    for m in range(3):
        for n in range(5):
            rw, rx = np.linalg.norm(W[m]), np.linalg.norm(Xt[n])
            t = W[m] @ Xt[n] / (rw * rx)
            Z = sl.zonal_table(L, d, np.array([t]))[0]
            assert np.isclose(feat.Kuf(kern, X)[m, n], rw * rx * np.sum(sig * Z))
    Kuu = feat.Kuu(kern)
    for m in range(3):
        for k in range(3):
            t = W[m] @ W[k] / np.linalg.norm(W[m]) / np.linalg.norm(W[k])
            Z = sl.zonal_table(L, d, np.array([t]))[0]
            ref = np.linalg.norm(W[m]) * np.linalg.norm(W[k]) * np.sum(sig**2 / lam * Z)
            assert np.isclose(Kuu[m, k], ref)
    # joint prior of (u, f) is PSD (same truncation on both sides)
    Kff = sl.kernels.Truncated(kern, d, L).K(X)
    Kuf = feat.Kuf(kern, X)
    joint = np.block([[Kuu, Kuf], [Kuf.T, Kff]])
    assert np.linalg.eigvalsh(joint).min() > -1e-10 * np.abs(joint).max()


def test_levels_with_zero_eigenvalue_are_dropped(rng):
    """Arc-cosine order 1 has lambda_l = 0 at odd l >= 3: softplus (whose odd coefficients
    beyond 1 are also zero) is fine, but a feature with such levels must drop them."""
    kern = K.ArcCosine(1)
    feat = ActivatedFeatures(A.Swish(), 3, 7, weights=rng.standard_normal((3, 3)))
    Kuu = feat.Kuu(kern)
    assert np.all(np.isfinite(Kuu))
    lam = kern.spectrum(3, 7)
    assert np.any(lam == 0)


# ---------------------------------------------------------------------------------------------
# orthogonally-decoupled bound
# ---------------------------------------------------------------------------------------------


def _check_objective_gradient(model, X, y, num_data, h=1e-6):
    """Every entry of the flat gradient against central differences of the objective."""
    theta = model.parameter_vector()
    _, g = model.objective(theta, X, y, num_data=num_data)
    for i in range(theta.size):
        t = theta.copy()
        t[i] += h
        fp = model.objective(t, X, y, num_data=num_data)[0]
        t[i] -= 2 * h
        fm = model.objective(t, X, y, num_data=num_data)[0]
        num = (fp - fm) / (2 * h)
        assert np.isclose(g[i], num, rtol=1e-4, atol=1e-6), (i, g[i], num)


def _randomise_q(model, rng):
    model.m_u = rng.standard_normal(model.m_u.size)
    model.m_v = rng.standard_normal(model.m_v.size)
    model.L_u = model.L_u + 0.1 * np.tril(rng.standard_normal(model.L_u.shape))
    model.L_v = model.L_v + 0.1 * np.tril(rng.standard_normal(model.L_v.shape))


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("lik", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("fname", ["softplus", "points", "harmonics"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_every_parameter_gradient_against_finite_differences(whiten, lik, fname, num_orth, rng):
    X, y = data(rng, n=12)
    likelihood = sl.likelihoods.Gaussian(0.3) if lik == "gaussian" else sl.likelihoods.Bernoulli()
    if lik == "bernoulli":
        y = (y > 0).astype(float)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=np.array([0.8, 1.3]))
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), num_orth, likelihood, whiten=whiten).fit(X, y, optimize=False)
    _randomise_q(model, rng)
    _check_objective_gradient(model, X, y, 40)  # minibatch scaling N / B = 40 / 12


def _stats_model(fname, num_orth, rng, n=70):
    X, y = data(rng, n=n)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=np.array([0.8, 1.3]))
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), num_orth, sl.likelihoods.Gaussian(0.3)).fit(X, y, optimize=False)
    _randomise_q(model, rng)
    assert model._use_stats(n)
    return model, X, y


@pytest.mark.parametrize("fname", ["softplus", "relu", "points", "harmonics"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_sufficient_statistics_path_equals_the_per_row_bound(fname, num_orth, rng, monkeypatch):
    """Gaussian + whitened: the ELBO from (Phi, beta) streamed over chunks (cache off, 7-row
    chunks) equals the per-row whitened bound, value and every gradient, full data and minibatch."""
    model, X, y = _stats_model(fname, num_orth, rng)
    monkeypatch.setattr(model, "chunk_entries", 7 * model.num_inducing)
    monkeypatch.setattr(OrthogonalSVGP, "keep_entries", 0)
    for num_data in (None, 400):
        v1, g1 = model.elbo_and_gradient(X, y, num_data)
        model.sufficient_statistics = False
        v0, g0 = model.elbo_and_gradient(X, y, num_data)
        model.sufficient_statistics = True
        assert np.isclose(v1, v0, rtol=1e-12, atol=1e-9)
        assert g1.keys() == g0.keys()
        for k in g0:
            a, b = np.asarray(g1[k], dtype=float), np.asarray(g0[k], dtype=float)
            assert np.allclose(a, b, rtol=1e-9, atol=1e-9 * (1 + np.abs(b).max(initial=0))), k


@pytest.mark.parametrize("variance, noise", [(1.0, 1e-2), (50.0, 1e-4)])
def test_sufficient_statistics_keep_their_precision_on_ill_conditioned_kuu(variance, noise):
    """kappa(Kuu) 2e6-4e7, small noise, q at its optimum: the streamed bound equals the per-row
    bound to 1e-10 (whitening K_pf before the product; forming K_pf K_fp first lost kappa
    digits: 1e-8 and 6e-5 relative in these two cases)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 2))
    y = np.sin(1.5 * X[:, 0]) + 0.3 * X[:, 1] + 1e-3 * rng.standard_normal(300)
    kern = K.Matern(2.5, variance, 1.0 if variance == 1.0 else 2.0, bias=1.0)
    model = OrthogonalSVGP(kern, InducingPoints(X[:40].copy()), 20, sl.likelihoods.Gaussian(noise))
    model.fit(X, y, optimize=False)
    assert np.linalg.cond(model._inducing_matrices()[0]) > 1e6
    v_stats = model.elbo()
    model.sufficient_statistics = False
    assert model.elbo() == pytest.approx(v_stats, rel=1e-10)


@pytest.mark.parametrize("fname", ["softplus", "points"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_sufficient_statistics_gradients_against_finite_differences(fname, num_orth, rng, monkeypatch):
    model, X, y = _stats_model(fname, num_orth, rng, n=30)
    monkeypatch.setattr(model, "chunk_entries", 11 * model.num_inducing)
    _check_objective_gradient(model, X, y, 90)


def test_sufficient_statistics_memory_does_not_grow_with_n(rng, monkeypatch):
    """Peak memory of an ELBO + gradient evaluation with K_pf recomputed (not kept) is the same
    for N and 4N rows: nothing of shape (M + K, N) is formed."""
    import tracemalloc

    monkeypatch.setattr(OrthogonalSVGP, "keep_entries", 0)
    monkeypatch.setattr(OrthogonalSVGP, "chunk_entries", 500 * 16)
    peaks = []
    for n in (4000, 16000):
        X, y = data(np.random.default_rng(0), n=n)
        model = OrthogonalSVGP(K.Matern(2.5, 1.0), ActivatedFeatures(A.Softplus(1.0), 8, 4), 8).fit(X, y, optimize=False)
        model.elbo_and_gradient(X, y)
        tracemalloc.start()
        model.elbo_and_gradient(X, y)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0], peaks
    assert peaks[1] < 16 * 16000 * 8  # well below one (M + K, N) array


def _titsias(kern, feat, X, y, noise):
    Kuu, Kuf, Kff = feat.Kuu(kern), feat.Kuf(kern, X), kern.K(X)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    C = Q + noise * np.eye(len(y))
    sign, logdet = np.linalg.slogdet(C)
    return (-0.5 * y @ np.linalg.solve(C, y) - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
            - 0.5 * np.trace(Kff - Q) / noise)


@pytest.mark.parametrize("fname", ["softplus", "points", "harmonics"])
def test_k0_is_svgp_and_reaches_the_titsias_bound_at_the_optimal_q(fname, rng):
    X, y = data(rng, n=20)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    noise = 0.2
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), 0, sl.likelihoods.Gaussian(noise), whiten=False, jitter=0.0)
    model.fit(X, y, optimize=False)
    feat = model.features
    Kuu, Kuf = feat.Kuu(kern), feat.Kuf(kern, X)
    S = Kuu @ np.linalg.solve(Kuu + Kuf @ Kuf.T / noise, Kuu)
    model.m_u = S @ np.linalg.solve(Kuu, Kuf @ y) / noise
    model.L_u = np.linalg.cholesky(S)
    assert np.isclose(model.elbo(), _titsias(kern, feat, X, y, noise), rtol=1e-9)
    # and the SVGP predictive equations
    Xs = rng.standard_normal((7, 2))
    mean, var = model.predict_f(Xs)
    Ksu = feat.Kuf(kern, Xs).T
    Kinv = np.linalg.inv(Kuu)
    assert np.allclose(mean, Ksu @ Kinv @ model.m_u)
    assert np.allclose(var, kern.diag(Xs) + np.einsum("ij,jk,ik->i", Ksu @ Kinv, S - Kuu, Ksu @ Kinv))


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("fname", ["softplus", "relu", "points"])
def test_optimal_q_reaches_the_titsias_bound_and_is_stationary(fname, whiten, rng):
    """K = 0: the ELBO at optimal_q() is the collapsed (Titsias) bound computed independently;
    K = 4: no q-gradient remains and every random q scores lower."""
    X, y = data(rng, n=25)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    noise = 0.2
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), 0, sl.likelihoods.Gaussian(noise), whiten=whiten, jitter=0.0)
    model.fit(X, y, optimize=False, init_q="prior")
    assert np.abs(model.m_u).max() == 0.0  # the prior
    model.optimal_q(X, y)
    assert np.isclose(model.elbo(), _titsias(kern, model.features, X, y, noise), rtol=1e-9)
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), 4, sl.likelihoods.Gaussian(noise), whiten=whiten)
    model.fit(X, y, optimize=False)  # init_q="optimal" by default
    best = model.elbo()
    for per_row in (False, True):  # both evaluation paths agree that it is stationary
        model.sufficient_statistics = not per_row
        _, g = model.elbo_and_gradient(X, y)
        for k, attr in (("q_mu", "m_u"), ("q_sqrt", "L_u"), ("q_mu_orth", "m_v"), ("q_sqrt_orth", "L_v")):
            assert np.abs(g[k]).max() < 1e-7 * (1 + np.abs(getattr(model, attr)).max()), k
    for _ in range(3):
        _randomise_q(model, rng)
        assert model.elbo() < best


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("fname", ["softplus", "points"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_collapsed_bound_gradient_against_finite_differences(whiten, fname, num_orth, rng):
    """fit(collapsed=True) climbs max_q ELBO: its gradient in every non-q parameter (features,
    W, kernel, noise) from the envelope theorem, against differences of the re-solved bound; the
    value is the ELBO at optimal_q() on either evaluation path, whitened or not."""
    X, y = data(rng, n=24)
    kern = KERNELS["matern52"]()
    model = OrthogonalSVGP(kern, FEATURES[fname](rng), num_orth, sl.likelihoods.Gaussian(0.2), whiten=whiten)
    model.fit(X, y, optimize=False, init_q="prior")
    value = check_collapsed_gradient(model, X, y)
    model.optimal_q(X, y)
    assert model.elbo() == pytest.approx(value, rel=1e-10)
    model.sufficient_statistics = False
    assert model.elbo() == pytest.approx(value, rel=1e-10)


def test_harmonic_features_at_the_optimal_q_equal_collapsed_vish(rng):
    # an independent implementation of the same bound: VISH's streamed collapsed ELBO
    X, y = data(rng, n=40)
    noise = 0.15
    for kern in (K.Matern(1.5, 0.8, bias=0.9, input_scale=np.array([1.1, 0.7])), K.ArcCosine(1, bias=0.6)):
        model = OrthogonalSVGP(kern, HarmonicFeatures(5), 0, sl.likelihoods.Gaussian(noise), whiten=False, jitter=0.0)
        model.fit(X, y, optimize=False)
        feat = model.features
        Kuu, Kuf = feat.Kuu(kern), feat.Kuf(kern, X)
        S = Kuu @ np.linalg.solve(Kuu + Kuf @ Kuf.T / noise, Kuu)
        model.m_u = S @ np.linalg.solve(Kuu, Kuf @ y) / noise
        model.L_u = np.linalg.cholesky(S)
        vish = sl.VISH(copy.deepcopy(kern), 5, sl.likelihoods.Gaussian(noise)).fit(X, y, optimize=False)
        assert model.elbo() == pytest.approx(vish.elbo(), rel=1e-10)
        Xs = rng.standard_normal((6, 2))
        for a, b in zip(model.predict_f(Xs), vish.predict_f(Xs)):
            assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
        if isinstance(kern, K.ArcCosine):  # odd levels >= 3 carry no mass and are dropped
            assert set(feat.degrees) == {0, 1, 2, 4}


def test_harmonics_with_orthogonal_points_raise_the_elbo(rng):
    # VISH's features miss the high frequencies of a rough target; K orthogonal points add them
    X = rng.uniform(-2, 2, size=(150, 1))
    y = np.sign(np.sin(3 * X[:, 0])) + 0.05 * rng.standard_normal(150)
    elbos = {}
    for K_orth in (0, 12):
        model = OrthogonalSVGP(K.Matern(1.5, 0.5, bias=1.0), HarmonicFeatures(6), K_orth, sl.likelihoods.Gaussian(0.05))
        elbos[K_orth] = model.fit(X, y, maxiter=300, seed=0).elbo()
    assert elbos[12] > elbos[0] + 10


def test_cv_equal_svv_recovers_odvgp(rng):
    X, y = data(rng, n=20)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    feat = ActivatedFeatures(A.Softplus(2.0), 4, 4)
    model = OrthogonalSVGP(kern, feat, 3, sl.likelihoods.Gaussian(0.2), whiten=False, jitter=0.0).fit(X, y, optimize=False)
    _randomise_q(model, rng)
    Kuu = feat.Kuu(kern)
    Kvu = feat.Kuf(kern, model.W).T
    Svv = kern.K(model.W) - Kvu @ np.linalg.solve(Kuu, Kvu.T)
    model.L_v = np.linalg.cholesky(Svv)  # C_v = S_vv
    svgp = OrthogonalSVGP(kern, copy.deepcopy(feat), 0, sl.likelihoods.Gaussian(0.2), whiten=False, jitter=0.0)
    svgp.fit(X, y, optimize=False)
    svgp.m_u, svgp.L_u = model.m_u, model.L_u
    Xs = rng.standard_normal((9, 2))
    mean, var = model.predict_f(Xs)
    mean0, var0 = svgp.predict_f(Xs)
    assert np.allclose(var, var0, rtol=1e-9, atol=1e-12)  # ODVGP: orthogonal part only in the mean
    Ssf = kern.K(model.W, Xs) - Kvu @ np.linalg.solve(Kuu, feat.Kuf(kern, Xs))
    assert np.allclose(mean, mean0 + Ssf.T @ np.linalg.solve(Svv, model.m_v))
    # with C_v = S_vv, KL[q(v') || p(v')] is the mean term alone: 0.5 m_v^T S_vv^-1 m_v
    lik = sl.likelihoods.Gaussian(0.2)
    res, res0 = model.bound(X, y), svgp.bound(X, y)
    data_diff = (lik.variational_expectations(y, res.mean, res.var)[0].sum()
                 - lik.variational_expectations(y, res0.mean, res0.var)[0].sum())
    kl_v = 0.5 * model.m_v @ np.linalg.solve(Svv, model.m_v)
    assert np.isclose(res.value - res0.value, data_diff - kl_v, rtol=1e-8)


@pytest.mark.parametrize("num_orth", [0, 3])
def test_whitened_bound_equals_the_plain_bound_at_the_mapped_q(num_orth, rng):
    """m = L_uu m~, C = L_uu C~ L_uu^T (and likewise with L_vv for v'): same ELBO, same
    predictions, same five variance terms."""
    X, y = data(rng, n=15)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    feat = ActivatedFeatures(A.Softplus(2.0), 4, 4)
    white = OrthogonalSVGP(kern, feat, num_orth, sl.likelihoods.Gaussian(0.3), jitter=0.0).fit(X, y, optimize=False)
    _randomise_q(white, rng)
    plain = OrthogonalSVGP(kern, feat, num_orth, sl.likelihoods.Gaussian(0.3), whiten=False, jitter=0.0,
                           orthogonal_inputs=white.W if num_orth else None).fit(X, y, optimize=False)
    Kuu = feat.Kuu(kern)
    Lk = np.linalg.cholesky(Kuu)
    plain.m_u, plain.L_u = Lk @ white.m_u, Lk @ np.tril(white.L_u)
    if num_orth:
        Kvu = feat.Kuf(kern, white.W).T
        Ls = np.linalg.cholesky(kern.K(white.W) - Kvu @ np.linalg.solve(Kuu, Kvu.T))
        plain.m_v, plain.L_v = Ls @ white.m_v, Ls @ np.tril(white.L_v)
    assert np.isclose(white.elbo(), plain.elbo(), rtol=1e-10)
    Xs = rng.standard_normal((6, 2))
    for a, b in zip(white.predict_f(Xs), plain.predict_f(Xs)):
        assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
    ta, tb = white.variance_terms(Xs), plain.variance_terms(Xs)
    assert all(np.allclose(ta[k], tb[k], rtol=1e-9, atol=1e-12) for k in ta)


def test_cholesky_backward_against_finite_differences(rng):
    from spherelab.linalg import cholesky_backward

    A0 = rng.standard_normal((5, 5))
    S = A0 @ A0.T + 5 * np.eye(5)
    G = np.tril(rng.standard_normal((5, 5)))
    dS = cholesky_backward(np.linalg.cholesky(S), G)
    E = rng.standard_normal((5, 5))
    E = E + E.T
    h = 1e-6
    num = (np.sum(G * np.linalg.cholesky(S + h * E)) - np.sum(G * np.linalg.cholesky(S - h * E))) / (2 * h)
    assert np.isclose(np.sum(dS * E), num, rtol=1e-7)


def test_whitening_trains_ill_conditioned_softplus_features():
    """Softplus coefficients decay geometrically, so 10 units on the circle span ~5 effective
    dimensions (cond(Kuu) ~ 1e14): the whitened parameterisation still trains."""
    X, y = sl.datasets.snelson_like(seed=2)
    X = (X - X.mean()) / X.std()
    y = (y - y.mean()) / y.std()
    model = OrthogonalSVGP(K.ArcCosine(1), ActivatedFeatures(A.Softplus(1.0), 10, 8), 4, sl.likelihoods.Gaussian(1.0))
    model.fit(X, y, optimize=False)
    start = model.elbo()
    model.fit(X, y, maxiter=150)
    assert model.optimizer_result.nit > 20
    assert model.elbo() > start + 50


def test_variance_terms_sum_to_the_predictive_variance(rng):
    X, y = data(rng, n=20)
    kern = K.ArcCosine(1, bias=1.0)
    model = OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 5, 8), 4, sl.likelihoods.Gaussian(0.1))
    model.fit(X, y, maxiter=30)
    Xs = rng.standard_normal((25, 2))
    terms = model.variance_terms(Xs)
    assert list(terms) == ["Kff", "-Qff", "+QCuQ", "-SfvSvv^-1Svf", "+SfvSvv^-1CvSvv^-1Svf"]
    _, var = model.predict_f(Xs)
    assert np.allclose(sum(terms.values()), var, rtol=1e-10, atol=1e-12)
    assert np.all(terms["Kff"] > 0) and np.all(terms["-Qff"] <= 1e-12) and np.all(terms["-SfvSvv^-1Svf"] <= 1e-12)


def test_orthogonal_inputs_at_the_data_give_the_exact_posterior_mean(rng):
    """W = X: u and v' together span f at the data, and at the optimal q (closed form for the
    Gaussian likelihood) the predictive mean is the exact GP mean; the ELBO stays below the exact
    log marginal likelihood (q(u) q(v') is factorised, so variances are not exact)."""
    X, y = data(rng, n=12)
    kern = K.Matern(2.5, 0.8, 1.0, bias=1.0)
    noise = 0.1
    feat = ActivatedFeatures(A.Softplus(2.0), 3, 4)
    model = OrthogonalSVGP(kern, feat, X.shape[0], sl.likelihoods.Gaussian(noise), orthogonal_inputs=X, whiten=False, jitter=0.0)
    model.fit(X, y, optimize=False)
    Kuu, Kuf = feat.Kuu(kern), feat.Kuf(kern, X)
    Amat = np.linalg.solve(Kuu, Kuf)
    Svv = kern.K(X) - Kuf.T @ Amat
    Bmat = np.linalg.solve(Svv, kern.K(X) - Kuf.T @ Amat)  # = I
    # optimal means: the exact posterior mean of (u, v') under y = A^T u + B^T v' + eps
    F = np.vstack([Amat, Bmat])
    P0 = np.block([[np.linalg.inv(Kuu), np.zeros((3, 12))], [np.zeros((12, 3)), np.linalg.inv(Svv)]])
    post = np.linalg.solve(P0 + F @ F.T / noise, F @ y / noise)
    model.m_u, model.m_v = post[:3], post[3:]
    model.L_u = np.linalg.cholesky(np.linalg.inv(np.linalg.inv(Kuu) + Amat @ Amat.T / noise))
    model.L_v = np.linalg.cholesky(np.linalg.inv(np.linalg.inv(Svv) + Bmat @ Bmat.T / noise))
    Xs = rng.standard_normal((8, 2))
    mean, _ = model.predict_f(Xs)
    Kxx = kern.K(X) + noise * np.eye(12)
    exact = kern.K(Xs, X) @ np.linalg.solve(Kxx, y)
    assert np.allclose(mean, exact, atol=1e-8)
    _, g = model.elbo_and_gradient(X, y)
    assert np.abs(g["q_mu"]).max() < 1e-6 and np.abs(g["q_mu_orth"]).max() < 1e-6  # optimal
    assert np.abs(g["q_sqrt"]).max() < 1e-6 and np.abs(g["q_sqrt_orth"]).max() < 1e-6
    manual = (model.m_u, model.m_v, model.L_u @ model.L_u.T, model.L_v @ model.L_v.T)
    model.optimal_q(X, y)  # the library's closed form reaches the same q
    for a, b in zip(manual, (model.m_u, model.m_v, model.L_u @ model.L_u.T, model.L_v @ model.L_v.T)):
        assert np.allclose(a, b, rtol=1e-7, atol=1e-9)
    C = np.linalg.cholesky(Kxx)
    alpha = np.linalg.solve(C, y)
    lml = -0.5 * alpha @ alpha - np.log(np.diag(C)).sum() - 6 * np.log(2 * np.pi)
    assert model.elbo() < lml


@pytest.mark.parametrize("collapsed", [False, True])
def test_fit_raises_the_elbo_and_stays_below_the_exact_lml(collapsed, rng):
    X, y = data(rng, n=40)
    kern = K.Matern(2.5, 1.0, bias=1.0)
    model = OrthogonalSVGP(kern, ActivatedFeatures(A.Softplus(2.0), 6, 6), 4, sl.likelihoods.Gaussian(0.3))
    model.fit(X, y, optimize=False)
    before = model.elbo()
    g0 = np.abs(model.objective(model.parameter_vector(), X, y, num_data=X.shape[0])[1]).max()
    model.fit(X, y, maxiter=2000 if collapsed else 200, collapsed=collapsed)
    after = model.elbo()
    if collapsed:
        # converged, and q left at its optimum for the final parameters: no q-gradient, and
        # the rest's gradient 1000x smaller than at the start
        assert model.optimizer_result.success, model.optimizer_result.message
        _, g = model.objective(model.parameter_vector(), X, y, num_data=X.shape[0])
        nq = model.parameter_vector([n for n in model.param_names if n.startswith("q_")]).size
        assert np.abs(g[:nq]).max() < 1e-9 * g0
        assert np.abs(g[nq:]).max() < 1e-3 * g0
    assert after > before + 5
    Kxx = kern.K(X) + model.likelihood.variance * np.eye(40)
    C = np.linalg.cholesky(Kxx)
    alpha = np.linalg.solve(C, y)
    lml = -0.5 * alpha @ alpha - np.log(np.diag(C)).sum() - 20 * np.log(2 * np.pi)
    assert after <= lml + 1e-8
    mean, var = model.predict_y(X)
    assert np.mean((mean - y) ** 2) < 0.1 and np.all(var > 0)


def test_adam_minibatches_and_bernoulli(rng):
    X = rng.uniform(-2, 2, size=(200, 2))
    y = (X[:, 1] > np.sin(1.5 * X[:, 0])).astype(float)
    model = OrthogonalSVGP(K.Matern(2.5, 1.0, bias=1.0), ActivatedFeatures(A.Softplus(2.0), 8, 6), 4,
                           sl.likelihoods.Bernoulli())
    model.fit_adam(X, y, batch_size=50, iterations=300, lr=0.03)
    p, _ = model.predict_y(X)
    assert np.mean((p > 0.5) == y) > 0.85
    assert np.mean(model.trace[-30:]) > np.mean(model.trace[:30])


def test_bad_input_gives_clear_errors(rng):
    X, y = data(rng)
    kern = K.Matern(2.5, 1.0)
    with pytest.raises(TypeError, match="features must be"):
        OrthogonalSVGP(kern, "relu", 2)
    with pytest.raises(ValueError, match="num_orthogonal"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), -1)
    with pytest.raises(ValueError, match="y in"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), 0, sl.likelihoods.Bernoulli()).fit(X, y + 3)
    with pytest.raises(ValueError, match="rows"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), 2).fit(X, y[:-1])
    with pytest.raises(TypeError, match="collapsed=True needs a Gaussian"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), 0, sl.likelihoods.Bernoulli()).fit(
            X, (y > 0).astype(float), collapsed=True)
    with pytest.raises(ValueError, match="NaN|finite"):
        X2 = X.copy()
        X2[0, 0] = np.nan
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), 2).fit(X2, y)
    # a unit with zero weight has no direction
    W0 = rng.standard_normal((3, 3))
    W0[1] = 0.0
    with pytest.raises(ValueError, match="zero row"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4, weights=W0), 0).fit(X, y, optimize=False)
    # a Kuu that no bounded jitter repairs is explained, naming the matrix
    from spherelab.linalg import cholesky_or_explain

    with pytest.raises(np.linalg.LinAlgError, match="Kuu"):
        cholesky_or_explain(-np.eye(3), "Kuu", "hint")
    with pytest.raises(RuntimeError, match="fit"):
        OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 3, 4), 0).predict_f(X)
