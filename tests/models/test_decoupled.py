"""OrthogonalSVGP / ActivatedSVGP: gradients, exact limits, fitting, bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import spherelab as sl
from conftest import (
    DECOUPLED_FEATURES,
    check_collapsed_gradient,
    check_objective_gradient,
    decoupled_data,
    randomise_decoupled_q,
)
from spherelab import OrthogonalSVGP
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.features import ActivatedFeatures, HarmonicFeatures, InducingPoints
from spherelab.rows.decoupled import StatisticsPath

KERNELS = {
    "arccos": lambda: K.ArcCosine(1, 1.3, bias=0.8, input_scale=np.array([1.2, 0.7])),
    "matern52": lambda: K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=0.8),
}






def _titsias(kern, feat, X, y, noise):
    Kuu, Kuf, Kff = feat.Kuu(kern), feat.Kuf(kern, X), kern.K(X)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    C = Q + noise * np.eye(len(y))
    sign, logdet = np.linalg.slogdet(C)
    return (-0.5 * y @ np.linalg.solve(C, y) - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
            - 0.5 * np.trace(Kff - Q) / noise)


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("lik", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("fname", ["softplus", "points", "harmonics"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_every_parameter_gradient_against_finite_differences(whiten, lik, fname, num_orth, rng):
    X, y = decoupled_data(rng, n=12)
    likelihood = sl.likelihoods.Gaussian(0.3) if lik == "gaussian" else sl.likelihoods.Bernoulli()
    if lik == "bernoulli":
        y = (y > 0).astype(float)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=np.array([0.8, 1.3]))
    model = OrthogonalSVGP(kern, DECOUPLED_FEATURES[fname](rng), num_orth, likelihood, whiten=whiten).fit(
        X, y, optimize=False
    )
    randomise_decoupled_q(model, rng)
    check_objective_gradient(model, X, y, 40)  # minibatch scaling N / B = 40 / 12


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
@pytest.mark.parametrize("fname", ["softplus", "points", "harmonics"])
def test_k0_is_svgp_and_reaches_the_titsias_bound_at_the_optimal_q(fname, rng):
    X, y = decoupled_data(rng, n=20)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    noise = 0.2
    model = OrthogonalSVGP(
        kern, DECOUPLED_FEATURES[fname](rng), 0, sl.likelihoods.Gaussian(noise), whiten=False, jitter=0.0
    )
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


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("fname", ["softplus", "relu", "points"])
def test_optimal_q_reaches_the_titsias_bound_and_is_stationary(fname, whiten, rng):
    """K = 0: the ELBO at optimal_q() is the collapsed (Titsias) bound computed independently;
    K = 4: no q-gradient remains and every random q scores lower."""
    X, y = decoupled_data(rng, n=25)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    noise = 0.2
    model = OrthogonalSVGP(
        kern, DECOUPLED_FEATURES[fname](rng), 0, sl.likelihoods.Gaussian(noise), whiten=whiten, jitter=0.0
    )
    model.fit(X, y, optimize=False, init_q="prior")
    assert np.abs(model.m_u).max() == 0.0  # the prior
    model.optimal_q(X, y)
    assert np.isclose(model.elbo(), _titsias(kern, model.features, X, y, noise), rtol=1e-9)
    model = OrthogonalSVGP(kern, DECOUPLED_FEATURES[fname](rng), 4, sl.likelihoods.Gaussian(noise), whiten=whiten)
    model.fit(X, y, optimize=False)  # init_q="optimal" by default
    best = model.elbo()
    for per_row in (False, True):  # both evaluation paths agree that it is stationary
        model.sufficient_statistics = not per_row
        _, g = model.elbo_and_gradient(X, y)
        for k, attr in (("q_mu", "m_u"), ("q_sqrt", "L_u"), ("q_mu_orth", "m_v"), ("q_sqrt_orth", "L_v")):
            assert np.abs(g[k]).max() < 1e-7 * (1 + np.abs(getattr(model, attr)).max()), k
    for _ in range(3):
        randomise_decoupled_q(model, rng)
        assert model.elbo() < best


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("fname", ["softplus", "points"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_collapsed_bound_gradient_against_finite_differences(whiten, fname, num_orth, rng):
    """fit(collapsed=True) climbs max_q ELBO: its gradient in every non-q parameter (features,
    W, kernel, noise) from the envelope theorem, against differences of the re-solved bound; the
    value is the ELBO at optimal_q() on either evaluation path, whitened or not."""
    X, y = decoupled_data(rng, n=24)
    kern = KERNELS["matern52"]()
    model = OrthogonalSVGP(kern, DECOUPLED_FEATURES[fname](rng), num_orth, sl.likelihoods.Gaussian(0.2), whiten=whiten)
    model.fit(X, y, optimize=False, init_q="prior")
    value = check_collapsed_gradient(model, X, y)
    model.optimal_q(X, y)
    assert model.elbo() == pytest.approx(value, rel=1e-10)
    model.sufficient_statistics = False
    assert model.elbo() == pytest.approx(value, rel=1e-10)


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
def test_harmonic_features_at_the_optimal_q_equal_collapsed_vish(rng):
    # an independent implementation of the same bound: VISH's streamed collapsed ELBO
    X, y = decoupled_data(rng, n=40)
    noise = 0.15
    for kern in (K.Matern(1.5, 0.8, bias=0.9, input_scale=np.array([1.1, 0.7])), K.ArcCosine(1, bias=0.6)):
        model = OrthogonalSVGP(kern, HarmonicFeatures(5), 0, sl.likelihoods.Gaussian(noise), whiten=False, jitter=0.0)
        model.fit(X, y, optimize=False)
        feat = model.features
        Kuu, Kuf = feat.Kuu(kern), feat.Kuf(kern, X)
        S = Kuu @ np.linalg.solve(Kuu + Kuf @ Kuf.T / noise, Kuu)
        model.m_u = S @ np.linalg.solve(Kuu, Kuf @ y) / noise
        model.L_u = np.linalg.cholesky(S)
        vish = sl.VISH(copy.deepcopy(kern), 5, sl.likelihoods.Gaussian(noise), prior="kernel").fit(X, y, optimize=False)
        assert model.elbo() == pytest.approx(vish.elbo(), rel=1e-10)
        Xs = rng.standard_normal((6, 2))
        for a, b in zip(model.predict_f(Xs), vish.predict_f(Xs)):
            assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
        if isinstance(kern, K.ArcCosine):  # odd levels >= 3 carry no mass and are dropped
            assert set(feat.degrees) == {0, 1, 2, 4}


@pytest.mark.slow
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
    X, y = decoupled_data(rng, n=20)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    feat = ActivatedFeatures(A.Softplus(2.0), 4, 4)
    model = OrthogonalSVGP(kern, feat, 3, sl.likelihoods.Gaussian(0.2), whiten=False, jitter=0.0).fit(
        X, y, optimize=False
    )
    randomise_decoupled_q(model, rng)
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


@pytest.mark.slow
def test_whitening_trains_ill_conditioned_softplus_features():
    """Softplus coefficients decay geometrically, so 10 units on the circle span ~5 effective
    dimensions (cond(Kuu) ~ 1e14): the whitened parameterisation still trains."""
    X, y = sl.datasets.snelson_like(seed=2)
    X = (X - X.mean()) / X.std()
    y = (y - y.mean()) / y.std()
    model = OrthogonalSVGP(K.ArcCosine(1), ActivatedFeatures(A.Softplus(1.0), 10, 8), 4, sl.likelihoods.Gaussian(1.0))
    model.fit(X, y, optimize=False)
    start = model.elbo()
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=150)
    assert model.optimizer_result.nit > 20
    assert model.elbo() > start + 50


def test_variance_terms_sum_to_the_predictive_variance(rng):
    X, y = decoupled_data(rng, n=20)
    kern = K.ArcCosine(1, bias=1.0)
    model = OrthogonalSVGP(kern, ActivatedFeatures(A.ReLU(), 5, 8), 4, sl.likelihoods.Gaussian(0.1))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=30)
    Xs = rng.standard_normal((25, 2))
    terms = model.variance_terms(Xs)
    assert list(terms) == ["Kff", "-Qff", "+QCuQ", "-SfvSvv^-1Svf", "+SfvSvv^-1CvSvv^-1Svf"]
    _, var = model.predict_f(Xs)
    assert np.allclose(sum(terms.values()), var, rtol=1e-10, atol=1e-12)
    assert np.all(terms["Kff"] > 0) and np.all(terms["-Qff"] <= 1e-12) and np.all(terms["-SfvSvv^-1Svf"] <= 1e-12)


def test_orthogonal_inputs_at_the_data_give_the_exact_posterior_mean(rng):
    """W = X: u and v' together span f at the decoupled_data, and at the optimal q (closed form for the
    Gaussian likelihood) the predictive mean is the exact GP mean; the ELBO stays below the exact
    log marginal likelihood (q(u) q(v') is factorised, so variances are not exact)."""
    X, y = decoupled_data(rng, n=12)
    kern = K.Matern(2.5, 0.8, 1.0, bias=1.0)
    noise = 0.1
    feat = ActivatedFeatures(A.Softplus(2.0), 3, 4)
    model = OrthogonalSVGP(
        kern, feat, X.shape[0], sl.likelihoods.Gaussian(noise), orthogonal_inputs=X, whiten=False, jitter=0.0
    )
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


@pytest.mark.slow
@pytest.mark.parametrize("collapsed", [False, True])
def test_fit_raises_the_elbo_and_stays_below_the_exact_lml(collapsed, rng):
    X, y = decoupled_data(rng, n=40)
    kern = K.Matern(2.5, 1.0, bias=1.0)
    model = OrthogonalSVGP(kern, ActivatedFeatures(A.Softplus(2.0), 6, 6), 4, sl.likelihoods.Gaussian(0.3))
    model.fit(X, y, optimize=False)
    before = model.elbo()
    g0 = np.abs(model.objective(model.parameter_vector(), X, y, num_data=X.shape[0])[1]).max()
    with sl.models.capped():  # a deliberately short fit: its limit is meant
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


@pytest.mark.slow
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
    X, y = decoupled_data(rng)
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


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
@pytest.mark.parametrize("fname", ["softplus", "points"])
@pytest.mark.parametrize("keep", [True, False])
def test_split_pass_gives_the_same_bound_and_gradient_as_one_thread(fname, keep, rng):
    """The statistics pass and its backward pass deal the chunks to one thread per core (issue
    30): the per-row bound's value and gradient, on one thread or two, with many chunks, kept or
    recomputed."""
    X, y = decoupled_data(rng, n=120)
    model = OrthogonalSVGP(K.Matern(2.5, 0.9, bias=1.2), DECOUPLED_FEATURES[fname](rng), 3,
                           sl.likelihoods.Gaussian(0.3))
    model.initialise(X, seed=0)
    randomise_decoupled_q(model, rng)
    if not keep:
        model.keep_entries = 0  # the backward pass recomputes each chunk's A
    theta = model.parameter_vector()
    model.sufficient_statistics = False  # the reference: the per-row bound, no chunks, no shares
    reference = model.objective(theta, X, y)
    model.sufficient_statistics = True
    model.chunk_entries = 7 * 17  # 17 rows per chunk at P = 7: eight chunks
    for threads in (1, 2):
        with sl.thread_limit(threads):
            value, grad = model.objective(theta, X, y)
        assert value == pytest.approx(reference[0], rel=1e-11)
        np.testing.assert_allclose(grad, reference[1], rtol=1e-8, atol=1e-10)


@pytest.mark.equality  # sums in another order: run under other chunk sizes and thread counts
@pytest.mark.parametrize("fname", ["softplus", "points", "harmonics"])
@pytest.mark.parametrize("num_orth", [0, 3])
@pytest.mark.parametrize("collapsed", [False, True])
def test_the_rows_floor_on_the_host_equals_the_features_own_pass(fname, num_orth, collapsed, rng, monkeypatch):
    """On the CPU the rows floor's loop (the column blocks at each chunk's lift, dealt to the cores)
    evaluates the bound; without column blocks the host streams the chunks through the features'
    and the kernel's own methods. The two give one bound and one gradient: sums of 120 rows'
    products in another order (value to 1e-11 relative, gradient as the split pass's test)."""
    X, y = decoupled_data(rng, n=120)
    model = OrthogonalSVGP(K.Matern(2.5, 0.9, bias=1.2), DECOUPLED_FEATURES[fname](rng), num_orth,
                           sl.likelihoods.Gaussian(0.3))
    model.initialise(X, seed=0)
    randomise_decoupled_q(model, rng)
    model.chunk_entries = 7 * 17  # several chunks, dealt to the cores
    theta = model.parameter_vector(model.collapsed_names if collapsed else None)

    def evaluate():
        if collapsed:
            return model.collapsed_objective(theta, X, y)
        return model.objective(theta, X, y)

    floor = evaluate()
    assert StatisticsPath(model).rows_on_device(X, y) is not None  # the floor took these rows
    monkeypatch.setattr(StatisticsPath, "has_device_blocks", lambda self: False)
    assert StatisticsPath(model).rows_on_device(X, y) is None
    streamed = evaluate()
    assert floor[0] == pytest.approx(streamed[0], rel=1e-11)
    np.testing.assert_allclose(floor[1], streamed[1], rtol=1e-8, atol=1e-10)


def test_the_rows_floor_shows_a_bar_over_a_large_pass(rng, monkeypatch, capsys):
    """A pass over more than ``PROGRESS_ROWS`` rows draws a bar over its chunks (a million rows at
    the default), as the host's streamed pass does."""
    from spherelab.rows import device

    X, y = decoupled_data(rng, n=120)
    model = OrthogonalSVGP(K.Matern(2.5, 0.9), InducingPoints(X[:4] + 0.01), 0, sl.likelihoods.Gaussian(0.3))
    model.initialise(X, seed=0)
    model.objective(model.parameter_vector(), X, y)
    assert "statistics" not in capsys.readouterr().err
    monkeypatch.setattr(device, "PROGRESS_ROWS", 100)
    model.objective(model.parameter_vector(), X, y)
    assert "statistics" in capsys.readouterr().err


@pytest.mark.parametrize("num_orth", [0, 3])
def test_a_trial_point_whose_inducing_block_overflows_is_rejected_on_the_floor(num_orth, rng):
    """An optimiser's trial point where k(z, z) overflows (a far inducing point under a large
    variance: r^2 sigma^2 = 1e318) while every row lifts: the floor's solves see the infinite block
    as a GPU's do (no error of their own), the evaluation goes to the host's checks, and the point
    is rejected (1e300), not a raw SciPy ValueError."""
    X, y = decoupled_data(rng, n=120)
    model = OrthogonalSVGP(K.Matern(2.5, 0.9, variance=1e20), InducingPoints(X[:4] + 0.01), num_orth,
                           sl.likelihoods.Gaussian(0.3))
    model.initialise(X, seed=0)
    Z = model.features.Z.copy()
    Z[0] = [1e149, 0.0]
    model.features.Z = Z
    assert StatisticsPath(model).rows_on_device(X, y) is not None
    assert model.objective(model.parameter_vector(), X, y)[0] == 1e300
    assert model.collapsed_objective(model.parameter_vector(model.collapsed_names), X, y)[0] == 1e300
