"""Phase-truncated harmonic features (seed 004 §5.2): exact orthonormality, span, gradients."""

from __future__ import annotations

import numpy as np
import pytest

import spherelab as sl
from spherelab import kernels as K
from spherelab.sphere.gegenbauer import zonal_series, zonal_table
from spherelab.features import greedy_directions


def _sphere(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("dim,L,P", [(3, 6, 3), (3, 4, 20), (5, 4, 7)])
def test_orthonormal_by_exact_quadrature(dim, L, P):
    # the product rule integrates degree-2L polynomials exactly: an independent check of
    # <phi_i, phi_j> = delta_ij within and across degrees
    F = sl.PhaseTruncatedHarmonics(dim, L, P, seed=3)
    pts, w = sl.product_quadrature(dim, 2 * L)
    Phi = F(pts)
    gram = Phi.T @ (Phi * w[:, None])
    assert np.abs(gram - np.eye(F.num_features)).max() < 1e-11


@pytest.mark.parametrize("dim,L,P", [(4, 5, 6), (9, 3, 40), (17, 3, 50)])
def test_within_reference_harmonic_space(dim, L, P, rng):
    # each block is Q^T phi_l with Q orthonormal columns: inside H_l, orthonormal
    F = sl.PhaseTruncatedHarmonics(dim, L, P, seed=1)
    X = _sphere(rng, 3 * sl.num_harmonics(L, dim) + 200, dim)
    for ell in range(L + 1):
        Q = F.projection_check(ell, X)
        assert np.abs(Q - np.eye(F.phases[ell])).max() < 1e-10, ell


def test_all_phases_satisfy_the_addition_theorem(rng):
    dim, L = 4, 5
    F = sl.PhaseTruncatedHarmonics(dim, L, 10_000, seed=2)
    assert F.num_features == sl.cumulative_num_harmonics(L, dim)
    X, Y = _sphere(rng, 30, dim), _sphere(rng, 20, dim)
    PX, PY = F(X), F(Y)
    Z = zonal_table(L, dim, np.clip(X @ Y.T, -1, 1))
    for ell in range(L + 1):
        s = F.degree_slice(ell)
        assert np.allclose(PX[:, s] @ PY[:, s].T, Z[..., ell], atol=1e-10), ell


def test_high_dimension_counts_and_speed():
    F = sl.PhaseTruncatedHarmonics(17, 10, 100)
    assert F.phases[:3] == [1, 17, 100] and F.num_features == 918
    assert np.array_equal(F.degrees[:19], [0] + [1] * 17 + [2])


def test_vjp_directions_against_finite_differences(rng):
    F = sl.PhaseTruncatedHarmonics(4, 4, 5, seed=0)
    F.set_params(F.get_params() * rng.uniform(0.5, 2.0, F.get_params().size))  # unnormalised rows
    X = _sphere(rng, 9, 4)
    G = rng.standard_normal((9, F.num_features))
    gp, _ = F.vjp(X, G)
    p, h = F.get_params(), 1e-6
    for i in range(p.size):
        q = p.copy()
        q[i] += h
        F.set_params(q)
        fp = np.sum(G * F(X))
        q[i] -= 2 * h
        F.set_params(q)
        fm = np.sum(G * F(X))
        assert np.isclose(gp[i], (fp - fm) / (2 * h), rtol=1e-6, atol=1e-7), i
    F.set_params(p)


def test_vjp_points_along_tangents(rng):
    F = sl.PhaseTruncatedHarmonics(3, 5, 4, seed=4)
    X = _sphere(rng, 6, 3)
    G = rng.standard_normal((6, F.num_features))
    _, dX = F.vjp(X, G)
    h = 1e-6
    for n in range(6):
        t = rng.standard_normal(3)
        t -= (t @ X[n]) * X[n]
        def f(e):
            Y = X.copy()
            Y[n] = (X[n] + e * t) / np.linalg.norm(X[n] + e * t)
            return np.sum(G * F(Y))
        assert np.isclose(dX[n] @ t, (f(h) - f(-h)) / (2 * h), rtol=1e-6, atol=1e-7)


def test_as_inducing_features():
    F = sl.PhaseTruncatedHarmonics(3, 4, 3)
    k = K.Matern(1.5, 0.8, bias=0.7)
    assert np.allclose(F.Kuu_inverse_diag(k), k.spectrum(3, 4)[F.degrees])
    X = np.random.default_rng(0).standard_normal((5, 2))
    r, Xh = k.lift(X)
    assert np.allclose(F.Kuf(k, X), (F(Xh) * r[:, None]).T)


def test_greedy_directions_are_well_conditioned(rng):
    V = greedy_directions(5, 3, 11, rng)  # N(5, 3) = 11: a full fundamental system
    G = zonal_table(5, 3, np.clip(V @ V.T, -1, 1))[..., 5]
    assert np.linalg.cond(G) < 1e3


def test_bad_input(rng):
    F = sl.PhaseTruncatedHarmonics(3, 2, 3)
    with pytest.raises(ValueError, match="unit vectors"):
        F(np.ones((2, 3)))
    with pytest.raises(ValueError, match="3 columns"):
        F(_sphere(rng, 2, 4))
    with pytest.raises(ValueError, match="directions\\[1\\] must have shape"):
        F.set_directions([np.ones((1, 3)), np.ones((2, 3)), np.ones((3, 3))])
    bad = [V.copy() for V in F.directions]
    bad[2][1] = 0.0
    with pytest.raises(ValueError, match="zero row"):
        F.set_directions(bad)
    bad = [V.copy() for V in F.directions]
    bad[2][1] = -bad[2][0]  # antipodal: the same even zonal function
    F.set_directions(bad)
    with pytest.raises(np.linalg.LinAlgError, match="degree-2 Gram matrix"):
        F(_sphere(rng, 2, 3))
    with pytest.raises(ValueError, match="max_phases"):
        sl.PhaseTruncatedHarmonics(3, 2, 0)
    with pytest.raises(ValueError, match="G must have shape"):
        sl.PhaseTruncatedHarmonics(3, 2, 3).vjp(_sphere(rng, 2, 3), np.ones((2, 2)))


# ---- in VISH ---------------------------------------------------------------------------------
from spherelab.models.vish import harmonic_statistics  # noqa: E402


def _data(rng, n=60, D=2):
    X = rng.normal(size=(n, D))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def test_vish_with_all_phases_equals_full_harmonics(rng):
    # every phase kept: a rotation of the harmonic basis of each degree -> the same posterior
    X, y = _data(rng)
    Xs = rng.normal(size=(9, 2))
    full = sl.VISH(K.Matern(1.5, 0.8), 5, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
    F = sl.PhaseTruncatedHarmonics(3, 5, 10_000, seed=7)
    ours = sl.VISH(K.Matern(1.5, 0.8), None, sl.likelihoods.Gaussian(0.1), features=F).fit(X, y, optimize=False)
    assert np.isclose(ours.elbo(), full.elbo(), rtol=0, atol=1e-9)
    for a, b in zip(ours.predict_f(Xs), full.predict_f(Xs)):
        assert np.allclose(a, b, rtol=0, atol=1e-9)
    ga, gb = ours.elbo_gradient(), full.elbo_gradient()
    for name in ["variance", "lengthscale", "noise", "bias", "input_scale"]:
        assert np.isclose(ga[name], gb[name], rtol=1e-8, atol=1e-9), name
    # the likelihood does not depend on the basis inside a complete degree
    assert np.allclose(ga["directions"], 0.0, atol=1e-7)


def test_vish_phase_gradients_against_finite_differences(rng):
    X, y = _data(rng)
    kern = K.Matern(2.5, 0.9, bias=0.8, input_scale=np.array([1.2, 0.7]))
    F = sl.PhaseTruncatedHarmonics(3, 7, 3, seed=2)  # degrees >= 2 truncated to 3 of 2l+1 phases
    model = sl.VISH(kern, None, sl.likelihoods.Gaussian(0.05), features=F).fit(X, y, optimize=False)
    g = model.elbo_gradient()

    def elbo_now():
        model.stats = harmonic_statistics(kern, F, X, y)
        model._posterior = None
        return model.elbo()

    p, h = F.get_params(), 1e-6
    for i in range(p.size):
        q = p.copy()
        q[i] += h
        F.set_params(q)
        up = elbo_now()
        q[i] -= 2 * h
        F.set_params(q)
        dn = elbo_now()
        assert np.isclose(g["directions"][i], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6), i
    F.set_params(p)
    for j in range(2):
        s = kern.input_scale.copy()
        kern.input_scale = s + h * np.eye(2)[j]
        up = elbo_now()
        kern.input_scale = s - h * np.eye(2)[j]
        dn = elbo_now()
        kern.input_scale = s
        assert np.isclose(g["input_scale"][j], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6)
    b = kern.bias
    kern.bias = b + h
    up = elbo_now()
    kern.bias = b - h
    dn = elbo_now()
    kern.bias = b
    assert np.isclose(g["bias"], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6)


# ---- the prior matched to the features (prior="features") ----------------------------------

def _exact_lml(Kxx, y, noise):
    C = Kxx + noise * np.eye(len(y))
    L = np.linalg.cholesky(C)
    a = np.linalg.solve(C, y)
    return -0.5 * y @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi), C


@pytest.mark.parametrize("phases", [None, 2], ids=["all harmonics", "2 phases"])
def test_features_prior_is_the_exact_finite_rank_gp(phases, rng):
    X, y = _data(rng, n=40)
    Xs = rng.normal(size=(7, 2))
    kern = K.Matern(1.5, 0.8, bias=0.7, input_scale=np.array([1.1, 0.8]))
    noise = 0.05
    F = None if phases is None else sl.PhaseTruncatedHarmonics(3, 6, phases, seed=3)
    model = sl.VISH(kern, 6, sl.likelihoods.Gaussian(noise), features=F, prior="features").fit(X, y, optimize=False)
    if phases is None:  # all harmonics up to L: the Truncated kernel
        k_fin = K.Truncated(kern, 3, 6)
        Kxx, Ksx, kss = k_fin.K(X), k_fin.K(Xs, X), k_fin.diag(Xs)
    else:  # the degenerate kernel of the kept phases, r r' sum_m lambda_m phi_m phi_m
        lam = kern.spectrum(3, 6)[F.degrees]
        Phi, Phis = F.Kuf(kern, X).T, F.Kuf(kern, Xs).T
        Kxx, Ksx, kss = (Phi * lam) @ Phi.T, (Phis * lam) @ Phi.T, np.einsum("nm,m,nm->n", Phis, lam, Phis)
    lml, C = _exact_lml(Kxx, y, noise)
    assert model.elbo() == pytest.approx(lml, rel=1e-10)
    mean, var = model.predict_f(Xs)
    assert np.allclose(mean, Ksx @ np.linalg.solve(C, y), atol=1e-9)
    assert np.allclose(var, kss - np.einsum("ij,ji->i", Ksx, np.linalg.solve(C, Ksx.T)), atol=1e-9)
    kernel_prior = sl.VISH(kern, 6, sl.likelihoods.Gaussian(noise), features=F).fit(X, y, optimize=False)
    assert kernel_prior.elbo() < model.elbo()  # the trace term only ever lowers the bound


def test_features_prior_gradients_against_finite_differences(rng):
    X, y = _data(rng)
    kern = K.Matern(2.5, 0.9, bias=0.8, input_scale=np.array([1.2, 0.7]))
    F = sl.PhaseTruncatedHarmonics(3, 7, 3, seed=2)
    model = sl.VISH(kern, None, sl.likelihoods.Gaussian(0.05), features=F, prior="features").fit(X, y, optimize=False)
    g = model.elbo_gradient()

    def elbo_now():
        model.stats = harmonic_statistics(kern, F, X, y)
        model._posterior = None
        return model.elbo()

    h = 1e-6
    p = F.get_params()
    for i in rng.choice(p.size, 12, replace=False):
        for sign in (1, -1):
            q = p.copy()
            q[i] += sign * h
            F.set_params(q)
            if sign == 1:
                up = elbo_now()
            else:
                dn = elbo_now()
        F.set_params(p)
        assert np.isclose(g["directions"][i], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6), i
    for name, obj in [("variance", kern), ("lengthscale", kern), ("bias", kern), ("variance", model.likelihood)]:
        v = getattr(obj, name)
        setattr(obj, name, v + h)
        up = elbo_now()
        setattr(obj, name, v - h)
        dn = elbo_now()
        setattr(obj, name, v)
        key = "noise" if obj is model.likelihood else name
        assert np.isclose(g[key], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6), key
    for j in range(2):
        s = kern.input_scale.copy()
        kern.input_scale = s + h * np.eye(2)[j]
        up = elbo_now()
        kern.input_scale = s - h * np.eye(2)[j]
        dn = elbo_now()
        kern.input_scale = s
        assert np.isclose(g["input_scale"][j], (up - dn) / (2 * h), rtol=1e-5, atol=1e-6)


def test_features_prior_uncollapsed_bounds(rng):
    from spherelab.bounds import uncollapsed_bound, uncollapsed_bound_general

    X, y = _data(rng, n=50)
    kern = K.Matern(1.5, 0.9, bias=0.8)
    noise = 0.07
    F = sl.PhaseTruncatedHarmonics(3, 5, 2, seed=1)
    model = sl.VISH(kern, None, sl.likelihoods.Gaussian(noise), features=F, prior="features").fit(X, y, optimize=False)
    lam = kern.spectrum(3, 5)[F.degrees]
    Phi = F.Kuf(kern, X).T
    A = np.diag(1 / lam) + Phi.T @ Phi / noise
    Ainv = np.linalg.inv(A)
    m_opt = (Ainv @ (Phi.T @ y) / noise) / lam
    L_opt = np.linalg.cholesky(Ainv / np.outer(lam, lam))
    r2 = kern.lift(X)[0] ** 2
    res = uncollapsed_bound(lam, kern.at_one(), noise, m_opt, L_opt, Phi, y, r2, len(y), residual=False)
    assert res.value == pytest.approx(model.elbo(), rel=1e-10)
    assert res.dv == 0.0
    gen = uncollapsed_bound_general(lam, 123.0, sl.likelihoods.Gaussian(noise), m_opt, L_opt, Phi, y, r2, len(y),
                                    residual=False)  # v does not enter
    assert gen.value == pytest.approx(res.value, rel=1e-12)
    for k in range(0, lam.size, 3):
        e = np.eye(lam.size)[k] * 1e-6 * lam[k]
        up = uncollapsed_bound(lam + e, 1.0, noise, m_opt, L_opt, Phi, y, r2, 80, residual=False).value
        dn = uncollapsed_bound(lam - e, 1.0, noise, m_opt, L_opt, Phi, y, r2, 80, residual=False).value
        an = uncollapsed_bound(lam, 1.0, noise, m_opt, L_opt, Phi, y, r2, 80, residual=False).dlam[k]
        assert an == pytest.approx((up - dn) / (2e-6 * lam[k]), rel=1e-5, abs=1e-6)


def test_prior_argument_is_checked():
    with pytest.raises(ValueError, match="prior"):
        sl.VISH(K.Matern(1.5, 1.0), 3, prior="truncated")


def test_vish_fit_trains_the_phases(rng):
    X, y = _data(rng, n=150)
    F = sl.PhaseTruncatedHarmonics(3, 8, 2, seed=0)
    start = F.get_params()
    model = sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1), features=F)
    model.fit(X, y, optimize=False)
    elbo0 = model.elbo()
    model.fit(X, y, lift_maxiter=60)
    assert not np.allclose(F.get_params(), start)
    assert model.elbo() > elbo0
    mean, var = model.predict_y(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)


def test_vish_phases_in_high_dimension(rng):
    # d = 17, degree 10, 100 phases per degree: 918 features (full harmonics: 7.4 million)
    X = rng.normal(size=(300, 16))
    y = np.tanh(X[:, 0] * X[:, 1]) + 0.1 * rng.normal(size=300)
    F = sl.PhaseTruncatedHarmonics(17, 10, 100)
    model = sl.VISH(K.PolynomialDecay(17, 20.0), None, sl.likelihoods.Gaussian(0.1), features=F)
    model.fit(X, y, train_lift=False, maxiter=50)
    mean, var = model.predict_y(X[:4])
    assert model.features.num_features == 918
    assert np.all(np.isfinite(mean)) and np.all(var > 0) and np.isfinite(model.elbo())


def test_vish_features_dimension_mismatch(rng):
    X, y = _data(rng)
    model = sl.VISH(K.Matern(1.5, 1.0), None, features=sl.PhaseTruncatedHarmonics(4, 3, 5))
    with pytest.raises(ValueError, match="expected 3 inputs"):
        model.fit(X, y)


def test_vish_svi_classification_with_phases(rng):
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(float)
    for phases, floor in [(8, 0.65), (1000, 0.85)]:  # 45 features; all 140 (a rotated full basis)
        F = sl.PhaseTruncatedHarmonics(4, 6, phases, seed=1)
        model = sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Bernoulli(), features=F)
        model.fit_svi(X, y, batch_size=100, iterations=300, lr=0.02)
        p, _ = model.predict_y(X)
        assert np.mean((p > 0.5) == (y > 0.5)) > floor
        assert model.features is F


# ---- continuous depth (seed 004 eq. 15) ------------------------------------------------------
def test_truncated_polynomial_decay_spectrum_and_gradient():
    k = K.PolynomialDecay(10, 3.0, variance=2.0, max_degree=15)  # beta < d - 1: finite series only
    lam = k.spectrum(10, 20)
    counts = np.array([sl.num_harmonics(ell, 10) for ell in range(21)], dtype=float)
    assert np.isclose(lam @ counts, 2.0, rtol=1e-13) and np.all(lam[16:] == 0.0)
    assert np.allclose(lam[2:16] / lam[1], np.arange(2, 16) ** -3.0, rtol=1e-12)
    assert np.isclose(lam[0], lam[1])
    t = np.linspace(-1, 1, 7)
    assert np.allclose(k.shape(t), zonal_series(lam[:16], 10, t), rtol=1e-12)
    g, h = k.spectrum_gradients(10, 15)["beta"], 1e-6
    k.beta = 3.0 + h
    up = k.spectrum(10, 15)
    k.beta = 3.0 - h
    dn = k.spectrum(10, 15)
    assert np.allclose(g, (up - dn) / (2 * h), rtol=1e-6, atol=1e-12)
    with pytest.raises(ValueError, match="max_degree"):
        K.PolynomialDecay(10, 3.0)


@pytest.mark.parametrize("beta0", [1.5, 5.0])
def test_depth_is_learned_by_the_elbo(beta0):
    # data drawn from the continuous-depth prior: the collapsed bound recovers beta
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 2))
    truth = K.PolynomialDecay(3, beta0, max_degree=12)
    y = np.linalg.cholesky(truth.K(X) + 1e-2 * np.eye(500)) @ rng.standard_normal(500)
    k = K.PolynomialDecay(3, 4.0 if beta0 < 4 else 2.5, max_degree=12)
    sl.VISH(k, 12, sl.likelihoods.Gaussian(0.1)).fit(X, y, train_lift=False)
    assert abs(k.beta - beta0) < 0.1 * beta0


# ---- SUSY-like classification data and the AUC -------------------------------------------------
def test_roc_auc_against_pairwise_definition(rng):
    y = (rng.uniform(size=60) < 0.4).astype(float)
    score = np.round(rng.standard_normal(60) + y, 1)  # rounding makes ties
    pos, neg = score[y == 1], score[y == 0]
    pairwise = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert np.isclose(sl.metrics.roc_auc(y, score), pairwise, rtol=0, atol=1e-14)
    assert sl.metrics.roc_auc(y, y) == 1.0
    with pytest.raises(ValueError, match="both classes"):
        sl.metrics.roc_auc(np.ones(3), np.arange(3.0))
    with pytest.raises(ValueError, match="only 0 and 1"):
        sl.metrics.roc_auc(np.array([0, 2.0]), np.arange(2.0))


def test_susy_like():
    X, y = sl.datasets.susy_like(20_000, seed=3)
    assert X.shape == (20_000, 8) and set(np.unique(y)) == {0.0, 1.0}
    assert abs(y.mean() - 0.46) < 0.02 and np.all(np.isfinite(X))
    # informative but not separable: a linear score ranks well, not perfectly
    auc = sl.metrics.roc_auc(y, X[:, 4] + 0.5 * X[:, 0])
    assert 0.7 < auc < 0.95
    X2, y2 = sl.datasets.susy_like(20_000, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)


@pytest.mark.parametrize("residual", [True, False])
def test_uncollapsed_phi_gradients_against_finite_differences(residual, rng):
    from spherelab.bounds import uncollapsed_bound, uncollapsed_bound_general

    n, M = 12, 5
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    yb = (y > 0).astype(float)
    r2 = 1.0 + rng.random(n)
    lam = np.exp(rng.normal(size=M))
    m = rng.normal(size=M)
    L = np.tril(0.3 * rng.normal(size=(M, M))) + np.diag(0.5 + rng.random(M))
    cases = [
        lambda P, g=False: uncollapsed_bound(lam, 1.7, 0.3, m, L, P, y, r2, 30, residual, phi_gradient=g),
        lambda P, g=False: uncollapsed_bound_general(lam, 1.7, sl.likelihoods.Bernoulli(), m, L, P, yb, r2, 30,
                                                     residual, phi_gradient=g),
    ]
    h = 1e-6
    for f in cases:
        dPhi = f(Phi, True).dPhi
        for i, j in [(0, 0), (3, 2), (11, 4), (7, 1)]:
            E = np.zeros_like(Phi)
            E[i, j] = h
            num = (f(Phi + E).value - f(Phi - E).value) / (2 * h)
            assert dPhi[i, j] == pytest.approx(num, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("lik", ["gauss", "bernoulli"])
def test_fit_svi_trains_the_directions(lik, rng):
    X, y = _data(rng, n=300)
    if lik == "bernoulli":
        y = (y > np.median(y)).astype(float)
    likelihood = sl.likelihoods.Gaussian(0.1) if lik == "gauss" else sl.likelihoods.Bernoulli()
    F = sl.PhaseTruncatedHarmonics(3, 6, 3, seed=0)
    start = F.get_params().copy()
    model = sl.VISH(K.Matern(1.5, 1.0), None, likelihood, features=F)
    model.fit_svi(X, y, batch_size=64, iterations=60, lr=0.02, seed=0)
    assert np.abs(F.get_params() - start).max() > 1e-3
    assert np.isfinite(model.elbo())
    F2 = sl.PhaseTruncatedHarmonics(3, 6, 3, seed=0)
    sl.VISH(K.Matern(1.5, 1.0), None, likelihood, features=F2).fit_svi(
        X, y, batch_size=64, iterations=5, seed=0, train_directions=False)
    assert np.array_equal(F2.get_params(), start)
