"""HVGP: gradients, exact limits, fitting, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import check_collapsed_gradient, hvgp_data, randomise_block_q
from spherelab import HarmonicSVGP, OrthogonalSVGP
from spherelab import kernels as K
from spherelab.features import InducingPoints
from spherelab.groups import Antipodal, Product, Reflection, Rotation
from spherelab.likelihoods import Bernoulli, Gaussian


def _fd_check(model, X, y, rng):
    """The objective's gradient along 60 random directions and along every hyper-parameter (the
    last six entries), against :func:`spherelab.testing.checkgrad` with a fixed step of 1e-6."""
    theta = model.parameter_vector()
    value, grad = model.objective(theta, X, y, num_data=X.shape[0])
    assert value < 1e300, "the objective rejects the point checked"  # a rejected point has no gradient
    tol = {"rtol": 2e-5, "atol": 2e-6 * max(1.0, np.abs(grad).max()), "step": 1e-6}
    sampled = sl.testing.check_model_gradient(model, X, y, directions=60, rng=rng, **tol)
    assert sampled.ok, str(sampled)
    last = np.arange(theta.size - 6, theta.size)

    def hyper(t):
        full = theta.copy()
        full[last] = t
        value, g = model.objective(full, X, y, num_data=X.shape[0])
        return value, g[last]

    check = sl.testing.checkgrad(hyper, theta[last], **tol)
    model.set_parameter_vector(theta)
    assert check.ok, str(check)


CASES = {
    "reflect each, ARD": (
        lambda: Reflection(2),
        lambda: K.Matern(2.5, 0.9, bias=0.7, input_scale=np.array([1.2, 0.8])),
    ),
    "rotate 4": (lambda: Rotation(2, 4), lambda: K.Matern(1.5, 1.1, bias=0.5, input_scale=1.3)),
    "rotate 3 x reflect": (
        lambda: Product(Rotation(3, 3, (0, 1)), Reflection(3, [[2]])),
        lambda: K.ArcCosine(1, bias=0.8),
    ),
    "antipodal": (lambda: Antipodal(), lambda: K.NTK(2, bias=0.6, input_scale=np.array([1.0, 0.7]))),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("lik", ["gauss", "bernoulli"])
def test_every_gradient_against_finite_differences(case, lik, rng):
    group, kern = (f() for f in CASES[case])
    D = 3 if case == "rotate 3 x reflect" else 2
    X, y = hvgp_data(rng, 30, D, classify=lik == "bernoulli")
    likelihood = Gaussian(0.3) if lik == "gauss" else Bernoulli()
    model = HarmonicSVGP(kern, group, 4, likelihood=likelihood).fit(X, y, optimize=False)
    randomise_block_q(model, rng)
    # inducing inputs off the data: the NTK's kappa'(1) is infinite, so at Z = a training input the
    # objective has no gradient (and rejects the point; the old hand-written check compared zeros there)
    model.Z = [Z + 0.05 * rng.standard_normal(Z.shape) for Z in model.Z]
    _fd_check(model, X, y, rng)


def test_named_gradients_cover_every_parameter(rng):
    X, y = hvgp_data(rng)
    model = HarmonicSVGP(K.Matern(2.5, 0.9), Reflection(2), 3).fit(X, y, optimize=False)
    _, g = model.elbo_and_gradient(X, y)
    assert set(g) == {"q_mu", "q_sqrt", "Z", "variance", "lengthscale", "bias", "input_scale", "noise"}
    assert len(g["q_sqrt"]) == model.num_blocks == 4
    assert g["Z"].shape == (model.num_inducing, 2) and g["q_mu"].shape == (model.num_inducing,)


def test_trivial_group_is_the_whitened_svgp(rng):
    X, y = hvgp_data(rng, 50)
    Z = X[:7].copy() + 0.05
    k1, k2 = K.Matern(2.5, 0.8, bias=0.6), K.Matern(2.5, 0.8, bias=0.6)
    hv = HarmonicSVGP(k1, Rotation(2, 1), 7, likelihood=Gaussian(0.2), inducing_inputs=[Z]).fit(X, y, optimize=False)
    sv = OrthogonalSVGP(k2, InducingPoints(Z.copy()), 0, likelihood=Gaussian(0.2), whiten=True).fit(
        X, y, optimize=False
    )
    randomise_block_q(hv, rng)
    sv.m_u, sv.L_u = hv.ms[0].copy(), hv.Ls[0].copy()
    v1, g1 = hv.elbo_and_gradient(X, y)
    v2, g2 = sv.elbo_and_gradient(X, y)
    assert v1 == pytest.approx(v2, rel=1e-12)
    assert np.allclose(g1["Z"], g2["features"].reshape(Z.shape), rtol=1e-9, atol=1e-11)
    for k in ("variance", "lengthscale", "bias", "input_scale", "noise"):
        assert g1[k] == pytest.approx(g2[k], rel=1e-9), k
    assert np.allclose(g1["q_sqrt"][0], g2["q_sqrt"], atol=1e-10)
    m1, s1 = hv.predict_f(X[:10])
    m2, s2 = sv.predict_f(X[:10])
    assert np.allclose(m1, m2, atol=1e-12) and np.allclose(s1, s2, atol=1e-12)


@pytest.mark.parametrize("group", [Reflection(2), Rotation(2, 4), Rotation(2, 5)], ids=["reflect", "rot4", "rot5"])
def test_interdomain_covariances_are_block_diagonal(group, rng):
    # u_c(z) = sum_s w_cs f(G^s z) computed from the base kernel alone: Cov(u_c, u_c') = 0 for
    # c != c', Cov(u_c, u_c) = k_c(Z, Z) and Cov(u_c, f(X)) = k_c(Z, X) (seed 002 App. D)
    kern = K.Matern(2.5, 0.8, bias=0.5)
    comps = sl.harmonic_decomposition(kern, group)
    Z = [rng.normal(size=(3, 2)) for _ in comps]
    X = rng.normal(size=(6, 2))
    rows = []  # (block, weights, points): u = W f(P)
    for comp, Zc in zip(comps, Z):
        idx, w = comp.weights()
        P = np.concatenate([group.apply(Zc, s) for s in idx])
        W = np.kron(w[None, :], np.eye(Zc.shape[0]))
        rows.append((W, P))
    for a, (Wa, Pa) in enumerate(rows):
        for b, (Wb, Pb) in enumerate(rows):
            cov = Wa @ kern.K(Pa, Pb) @ Wb.T
            expect = comps[a](Z[a]) if a == b else np.zeros_like(cov)
            assert np.allclose(cov, expect, atol=1e-12), (a, b)
        assert np.allclose(Wa @ kern.K(Pa, X), comps[a](Z[a], X), atol=1e-12)


def test_closed_data_with_orbit_representatives_is_exact(rng):
    # X closed under the group and Z_c = the orbit representatives in every block: the
    # block-independent optimum is the exact GP (ELBO = log marginal likelihood)
    group = Reflection(2)
    X0 = rng.normal(size=(6, 2))
    X = np.concatenate([group.apply(X0, s) for s in group.indices()])
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=X.shape[0])
    kern = K.Matern(2.5, 0.9, bias=0.7)
    s2 = 0.05
    model = HarmonicSVGP(kern, group, 6, likelihood=Gaussian(s2), inducing_inputs=[X0] * 4, jitter=0.0)
    model.optimal_q(X, y)
    Kxx = kern.K(X) + s2 * np.eye(X.shape[0])
    Lc = np.linalg.cholesky(Kxx)
    a = np.linalg.solve(Kxx, y)
    logml = -0.5 * y @ a - np.log(np.diag(Lc)).sum() - 0.5 * X.shape[0] * np.log(2 * np.pi)
    assert model.elbo() == pytest.approx(logml, rel=1e-8, abs=1e-8)
    Xs = rng.normal(size=(5, 2))
    Ks = kern.K(Xs, X)
    mean, var = model.predict_f(Xs)
    assert np.allclose(mean, Ks @ a, atol=1e-7)
    assert np.allclose(var, kern.diag(Xs) - np.einsum("ij,ji->i", Ks, np.linalg.solve(Kxx, Ks.T)), atol=1e-7)
    # off the symmetry the block-independent optimum is a strict lower bound
    y2 = y.copy()
    X2 = X + 0.3 * rng.normal(size=X.shape)
    model2 = HarmonicSVGP(kern, group, 6, likelihood=Gaussian(s2), inducing_inputs=[X0] * 4, jitter=0.0).optimal_q(
        X2, y2
    )
    K2 = kern.K(X2) + s2 * np.eye(X.shape[0])
    logml2 = (
        -0.5 * y2 @ np.linalg.solve(K2, y2)
        - np.log(np.diag(np.linalg.cholesky(K2))).sum()
        - 0.5 * X.shape[0] * np.log(2 * np.pi)
    )
    assert model2.elbo() < logml2 - 1e-3


def test_optimal_q_is_a_stationary_point(rng):
    X, y = hvgp_data(rng, 45)
    model = HarmonicSVGP(K.Matern(2.5, 0.8), Rotation(2, 4), 4, likelihood=Gaussian(0.1)).fit(X, y, optimize=False)
    model.optimal_q(X, y)
    _, g = model.elbo_and_gradient(X, y)
    scale = max(np.abs(np.concatenate(model.ms)).max(), 1.0)
    for dm, dL in zip(np.split(g["q_mu"], np.cumsum(model.sizes)[:-1]), g["q_sqrt"]):
        assert np.abs(dm).max() < 1e-8 * scale and np.abs(dL).max() < 1e-8 * scale


@pytest.mark.parametrize("group", [Reflection(2), Rotation(2, 4)], ids=["reflect", "rot4"])
def test_collapsed_bound_gradient_against_finite_differences(group, rng):
    X, y = hvgp_data(rng, 30)
    model = HarmonicSVGP(K.Matern(2.5, 0.8, bias=0.7), group, 3, likelihood=Gaussian(0.1)).fit(X, y, optimize=False)
    value = check_collapsed_gradient(model, X, y)
    model.optimal_q(X, y)
    assert model.elbo() == pytest.approx(value, rel=1e-12)
    before = value
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, maxiter=100, collapsed=True)
    assert model.elbo() > before


def test_minibatch_estimate_is_unbiased(rng):
    X, y = hvgp_data(rng, 40)
    model = HarmonicSVGP(K.Matern(2.5, 0.8), Reflection(2), 3).fit(X, y, optimize=False)
    randomise_block_q(model, rng)
    perm = rng.permutation(40)
    parts = [model.bound(X[p], y[p], 40).value for p in perm.reshape(4, 10)]
    assert np.mean(parts) == pytest.approx(model.elbo(), rel=1e-12)


@pytest.mark.slow
def test_components_add_up_and_fit_improves(rng):
    X, y = hvgp_data(rng, 80)
    model = HarmonicSVGP(K.Matern(2.5, 1.0), Reflection(2), 4, likelihood=Gaussian(0.5)).fit(X, y, optimize=False)
    before = model.elbo()
    model.fit(X, y, maxiter=150)
    assert model.elbo() > before + 10
    means, varis = model.predict_components(X[:9])
    mean, var = model.predict_f(X[:9])
    assert means.shape == (4, 9) and np.allclose(means.sum(0), mean) and np.allclose(varis.sum(0), var)
    rmse = np.sqrt(np.mean((model.predict_y(X)[0] - y) ** 2))
    assert rmse < 0.5 * y.std()


@pytest.mark.slow
def test_fit_adam_and_classification(rng):
    X, y = hvgp_data(rng, 120, classify=True)
    model = HarmonicSVGP(K.Matern(2.5, 1.0), Reflection(2), 4, likelihood=Bernoulli())
    model.fit_adam(X, y, batch_size=40, iterations=150, lr=0.05)
    assert model.trace[-1] > model.trace[0]
    p, _ = model.predict_y(X)
    assert np.all((p >= 0) & (p <= 1))
    assert sl.metrics.roc_auc(y, p) > 0.85


def test_antipodal_hvgp_splits_even_and_odd_functions(rng):
    # data on the sphere without bias: an odd target belongs to the odd block
    X = sl.sample_sphere(200, 3, rng)[:, :2] * 0.9
    y = X[:, 0] ** 3 - 0.5 * X[:, 1] + 0.02 * rng.normal(size=200)
    kern = K.ArcCosine(1, bias=0.0)
    model = HarmonicSVGP(kern, Antipodal(), 8, likelihood=Gaussian(0.01)).fit(X, y, maxiter=200)
    means, _ = model.predict_components(X)
    assert np.abs(means[0]).max() < 0.1 * np.abs(means[1]).max()


def test_bad_input_errors(rng):
    X, y = hvgp_data(rng)
    with pytest.raises(ValueError, match="scalar input_scale"):
        HarmonicSVGP(K.Matern(2.5, input_scale=np.array([1.0, 1.0])), Rotation(2, 4))
    with pytest.raises(ValueError, match="input_scale"):
        HarmonicSVGP(K.Matern(2.5, input_scale=np.array([1.0, 2.0])), Rotation(2, 4))
    with pytest.raises(ValueError, match="one entry per block"):
        HarmonicSVGP(K.Matern(2.5), Reflection(2), [3, 3])
    with pytest.raises(ValueError, match="num_inducing_per_block"):
        HarmonicSVGP(K.Matern(2.5), Reflection(2), 0)
    with pytest.raises(TypeError, match="group"):
        HarmonicSVGP(K.Matern(2.5), "flip")
    with pytest.raises(ValueError, match="group acts on 3"):
        HarmonicSVGP(K.Matern(2.5), Reflection(3), 3).fit(X, y)
    with pytest.raises(ValueError, match="X"):
        HarmonicSVGP(K.Matern(2.5), Reflection(2), 3).fit(np.where(X > 1, np.nan, X), y)
    # the odd block vanishes on the mirror x0 = 0: a clear error naming the block
    Z = np.c_[np.zeros(3), rng.normal(size=3)]
    model = HarmonicSVGP(K.Matern(2.5), Reflection(2, [[0]]), 3, inducing_inputs=[Z, Z], jitter=0.0)
    with pytest.raises(np.linalg.LinAlgError, match="block 1"):  # q's optimum needs the factor
        model.fit(X, y, optimize=False)
    model = HarmonicSVGP(K.Matern(2.5), Reflection(2, [[0]]), 3, inducing_inputs=[Z, Z], jitter=0.0)
    model.fit(X, y, optimize=False, init_q="prior")
    with pytest.raises(np.linalg.LinAlgError, match="block 1"):
        model.elbo()
    with pytest.raises(RuntimeError, match="fit"):
        HarmonicSVGP(K.Matern(2.5), Reflection(2), 3).predict_f(X)


def test_elbo_names_bad_targets(rng):
    X, y = hvgp_data(rng, 40)
    model = HarmonicSVGP(K.Matern(2.5, 0.8), Reflection(2), 3).fit(X, y, optimize=False)
    bad = y.copy()
    bad[4] = np.nan
    with pytest.raises(ValueError, match="y"):
        model.elbo(X, bad)
    with pytest.raises(ValueError, match="rows|length|same number"):
        model.elbo(X, y[:-3])
