"""Additive kernels on sub-spheres and their harmonic features through VISH: the Gram matrix is the
sum of the components', the features' prior covariance the sum of the truncated components' Grams,
every harmonic of truncated components is the exact GP with the sum kernel, every gradient against
finite differences, Dask and memory alike, and the errors a user meets."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.bounds.vish import harmonic_statistics
from spherelab.testing import check_model_gradient, checkgrad

G = sl.likelihoods.Gaussian
GROUPS = [0, 1, 2, (0, 2)]


def _data(rng, n=60, D=3):
    X = rng.normal(size=(n, D))
    y = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1]) * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _kernel(truncated=False):
    parts = [K.Matern(1.5, 0.9, variance=0.7, bias=0.8, input_scale=1.3),
             K.Matern(2.5, 1.1, variance=0.4, bias=0.6, input_scale=0.9),
             K.ArcCosine(1, variance=0.5, bias=0.7),
             K.Matern(1.5, 0.8, variance=0.3, bias=0.9, input_scale=np.array([1.1, 0.8]))]
    degrees = [7, 6, 5, 4]
    if truncated:
        parts = [K.Truncated(k, len(g) + 1 if isinstance(g, tuple) else 2, L)
                 for k, g, L in zip(parts, GROUPS, degrees)]
    return K.Additive(parts, GROUPS), degrees


def test_the_gram_matrix_is_the_sum_of_the_components(rng):
    kernel, _ = _kernel()
    X, X2 = rng.normal(size=(9, 3)), rng.normal(size=(5, 3))
    parts = [k.K(X[:, list(g)], X2[:, list(g)]) for k, g in zip(kernel.components, kernel.groups)]
    scale = sum(np.abs(p) for p in parts)
    assert np.all(np.abs(kernel.K(X, X2) - sum(parts)) <= 1e-12 * scale)
    assert np.allclose(kernel.diag(X), np.diag(kernel.K(X)), rtol=1e-13)


def test_the_features_prior_covariance_is_the_sum_of_the_truncated_grams(rng):
    # the features span each truncated component: K_fu K_uu^-1 K_uf = sum_c k_c^(L_c)(X, X)
    kernel, degrees = _kernel(truncated=True)
    X = rng.normal(size=(12, 3))
    feats = sl.features.AdditiveHarmonics(degrees)
    feats.initialise(4)
    feats.bind(kernel)
    Kuf = feats.Kuf(kernel, X)
    prior = Kuf.T @ (feats.Kuu_inverse_diag(kernel)[:, None] * Kuf)
    gram = kernel.K(X)
    assert np.max(np.abs(prior - gram)) <= 1e-12 * np.max(np.abs(gram))
    assert feats.spans(kernel)
    # components are uncorrelated: each block of features covaries with its own component only
    assert feats.num_features == sum(p.num_features for p in feats.parts)


@pytest.mark.parametrize("prior", ["features", "kernel"])
def test_every_harmonic_of_truncated_components_is_the_exact_gp(prior, rng):
    kernel, degrees = _kernel(truncated=True)
    X, y = _data(rng)
    Xs = rng.normal(size=(15, 3))
    model = sl.VISH(kernel, features=sl.features.AdditiveHarmonics(degrees), likelihood=G(0.05), prior=prior)
    model.fit(X, y, optimize=False)
    exact = sl.models.ExactGP(kernel, 0.05).fit(X, y)
    (m1, v1), (m2, v2) = model.predict_f(Xs), exact.predict_f(Xs)
    assert np.max(np.abs(m1 - m2)) <= 1e-10 * max(1.0, np.max(np.abs(m2)))
    assert np.max(np.abs(v1 - v2)) <= 1e-10 * np.max(kernel.diag(Xs))
    assert abs(model.elbo() - exact.log_marginal_likelihood()) <= 1e-10 * abs(exact.log_marginal_likelihood())


def test_kernel_gradients_against_finite_differences(rng):
    kernel, _ = _kernel()
    X, X2 = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    W = rng.normal(size=(7, 4))
    names = [n for n in kernel.parameter_names if np.ndim(kernel.get_hyper(n)) == 0]

    def value_and_grad(theta):
        for n, t in zip(names, theta):
            kernel.set_hyper(n, float(t))
        g, dX, _ = kernel.gradients_with_inputs(W, X, X2)
        return float(np.sum(W * kernel.K(X, X2))), np.array([g[n] for n in names])

    check = checkgrad(value_and_grad, np.array([kernel.get_hyper(n) for n in names]))
    assert check.ok, str(check)
    g, dX, _ = kernel.gradients_with_inputs(W, X, X2)
    check = checkgrad(lambda x: (float(np.sum(W * kernel.K(x.reshape(7, 3), X2))),
                                 kernel.gradients_with_inputs(W, x.reshape(7, 3), X2)[1].ravel()), X.ravel())
    assert check.ok, str(check)


@pytest.mark.parametrize("prior", ["features", "kernel"])
def test_the_collapsed_bound_gradient_of_every_entry(prior, rng):
    kernel, _ = _kernel()
    X, y = _data(rng)
    model = sl.VISH(kernel, features=sl.features.AdditiveHarmonics([4, 4, 3, 2]), likelihood=G(0.2), prior=prior)
    model.fit(X, y, optimize=False)
    assert {"c0_bias", "c3_input_scale", "c2_variance", "noise"} <= set(model.param_names)
    check = check_model_gradient(model, X, y)
    assert check.ok, str(check)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
def test_the_minibatch_bound_gradient_of_every_entry(likelihood, rng):
    kernel, _ = _kernel()
    X, y = _data(rng, 30)
    lik = G(0.2) if likelihood == "gaussian" else sl.likelihoods.Bernoulli()
    y = y if likelihood == "gaussian" else (y > 0).astype(float)
    model = sl.VISH(kernel, features=sl.features.AdditiveHarmonics([2, 2, 1, 1]), likelihood=lik, prior="kernel")
    model.fit_svi(X, y, batch_size=10, iterations=3, lr=0.02)
    M = model.q_mu.size
    model.set_params(q_mu=rng.normal(size=M),
                     q_sqrt=model.get_params()["q_sqrt"] + 0.1 * np.tril(rng.normal(size=(M, M))))
    # 186 entries (q's 170 among them): plain central differences at one step, two evaluations an
    # entry, not Ridders' eight; at h = 1e-5 on unit-scale parameters their rounding (eps |L| / h,
    # about 1e-10 relative) and truncation (h^2) stay far inside checkgrad's 1e-4
    check = check_model_gradient(model, X, y, step=1e-5)
    assert check.ok, str(check)


def test_a_fit_learns_an_additive_function_and_saves(tmp_path, rng):
    X, y = _data(rng, 400)
    kernel = K.Additive.from_groups(K.Matern(1.5), [0, 1, 2, (1, 2)])  # y's terms
    with sl.models.capped():
        model = sl.VISH(kernel, 6).fit(X, y, maxiter=60, lift_maxiter=30)
    Xs, ys = _data(rng, 200)
    mean, var = model.predict_y(Xs)
    assert np.mean((mean - ys) ** 2) < 0.1 * np.var(ys)
    path = tmp_path / "additive.npz"
    model.save(path)
    loaded = sl.load(path)
    assert isinstance(loaded.kernel, K.Additive) and loaded.kernel.groups == model.kernel.groups
    m2, v2 = loaded.predict_y(Xs)
    assert np.array_equal(mean, m2) and np.array_equal(var, v2)


def test_dask_statistics_equal_memory(rng):
    da = pytest.importorskip("dask.array")
    kernel, _ = _kernel()
    X, y = _data(rng, 3_000)
    feats = sl.features.AdditiveHarmonics([4, 4, 3, 2])
    feats.initialise(4)
    feats.bind(kernel)
    ref = harmonic_statistics(kernel, feats, X, y, chunk_size=512)
    got = harmonic_statistics(kernel, feats, da.from_array(X, chunks=(1_100, 3)), da.from_array(y, chunks=1_100),
                              chunk_size=512)
    # sums of N products of entries at most |G_ij|-sized: another order moves them by ~N eps
    A = np.abs(feats.Kuf(kernel, X))
    bound = 2 * 3_000 * np.finfo(float).eps
    assert np.all(np.abs(got.G - ref.G) <= bound * (A @ A.T))
    assert np.all(np.abs(got.c - ref.c) <= bound * (A @ np.abs(y)))
    assert ref.sum_diag.shape == (4,) and np.allclose(got.sum_diag, ref.sum_diag, rtol=bound)
    r, _ = kernel.lift(X)
    assert np.allclose(ref.sum_diag, (r * r).sum(axis=0), rtol=1e-13)


def test_errors_name_what_is_wrong():
    k = K.Matern(1.5)
    with pytest.raises(ValueError, match="distinct"):
        K.Additive([k, k], [0, 1])
    with pytest.raises(ValueError, match="repeats groups"):
        K.Additive.from_groups(k, [(0, 1), (1, 0)])
    with pytest.raises(ValueError, match="empty"):
        K.Additive.from_groups(k, [()])
    with pytest.raises(ValueError, match="one kernel per group"):
        K.Additive([K.Matern(1.5)], [0, 1])
    with pytest.raises(ValueError, match="input_scale has 3 entries"):
        K.Additive([K.Matern(1.5, input_scale=np.ones(3))], [(0, 1)])
    additive = K.Additive.from_groups(k, [0, 4])
    with pytest.raises(ValueError, match="column 4"):
        additive.K(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="AdditiveHarmonics"):
        sl.VISH(additive, features=sl.features.HarmonicFeatures(3))
    with pytest.raises(TypeError, match="AdditiveHarmonics"):
        sl.VISH(k, features=sl.features.AdditiveHarmonics(3))
    with pytest.raises(ValueError, match="3 entries but the additive kernel has 2"):
        sl.VISH(additive, features=sl.features.AdditiveHarmonics([1, 2, 3])).fit(np.zeros((5, 5)), np.zeros(5))
    with pytest.raises(AttributeError, match="c0_variance"):
        additive.set_hyper("variance", 1.0)
    with pytest.raises(ValueError, match="variance"):
        additive.set_hyper("c1_variance", -1.0)


def _interacting(rng, n):
    X = rng.normal(size=(n, 4))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 2] + np.sin(1.5 * X[:, 1] * X[:, 3]) + 0.1 * rng.normal(size=n)
    return X, (y - y.mean()) / y.std()


def test_the_interaction_in_the_data_is_chosen_within_the_feature_budget(rng):
    X, y = _interacting(rng, 2500)
    model = sl.selection.fit_additive(X, y, num_features=300, subsample=1500)
    report = model.fit_report_["additive"]
    gains = report["gains"]
    assert max(gains, key=gains.get) == "(1, 3)" and gains["(1, 3)"] > 10 * np.log(1500)
    assert [1, 3] in report["groups"] and len(report["groups"]) == 5  # no pair the data do not hold
    assert model.features.num_features <= 300 and report["features"] == model.features.num_features
    degrees = dict(zip(map(tuple, report["groups"]), report["degrees"]))
    assert degrees[(0,)] > 0 and degrees[(2,)] > 0 and degrees[(1, 3)] > 0  # every part of y has features
    Xt, yt = _interacting(np.random.default_rng(1), 500)
    first = sl.selection.fit_additive(X, y, interactions=[], num_features=300, subsample=1500)
    err = lambda m: np.mean((m.predict_y(Xt)[0] - yt) ** 2)  # noqa: E731
    assert err(model) < 0.5 * err(first)


def test_given_interactions_are_fitted_as_given(rng):
    X, y = _interacting(rng, 600)
    model = sl.selection.fit_additive(X, y, interactions=[(0, 2)], num_features=120, subsample=400)
    report = model.fit_report_["additive"]
    assert report["criterion"] == "given" and report["gains"] == {} and report["groups"][-1] == [0, 2]
    with pytest.raises(ValueError, match="interactions: each group"):
        sl.selection.fit_additive(X, y, interactions=[(1, 1)])
    with pytest.raises(ValueError, match="interactions entries"):
        sl.selection.fit_additive(X, y, interactions=[(0, 9)])
    with pytest.raises(ValueError, match="one feature per input"):
        sl.selection.fit_additive(X, y, num_features=2)
