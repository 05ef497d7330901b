"""VISH with phase-truncated features and the features prior (seed 004)."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data
from spherelab import kernels as K
from spherelab.bounds.vish import harmonic_statistics
from spherelab.testing import check_named_gradients


def _data(rng, n=60):
    return toy_data(rng, n, 2, signal=lambda X: np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] ** 2)


def _check_elbo_gradient(model, X, y, names):
    """``elbo_gradient`` against :func:`check_named_gradients` of the collapsed bound, the statistics
    recomputed at each point (directions, bias and input_scale change the features' values)."""
    g, start = model.elbo_gradient(), model.get_params()

    def elbo_at(**params):
        model.set_params(**params)
        model.stats = harmonic_statistics(model.kernel, model.features, X, y)
        model._posterior = None
        return model.elbo()

    point = {k: start[k] for k in names}
    check = check_named_gradients(elbo_at, point, {k: g[k] for k in names},
                                  positive=[k for k in names if k != "directions"], rtol=1e-5, atol=1e-6)
    elbo_at(**point)
    assert check.ok, str(check)


def _exact_lml(Kxx, y, noise):
    C = Kxx + noise * np.eye(len(y))
    L = np.linalg.cholesky(C)
    a = np.linalg.solve(C, y)
    return -0.5 * y @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi), C


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
    _check_elbo_gradient(model, X, y, ["directions", "input_scale", "bias"])


def test_features_prior_gradients_against_finite_differences(rng):
    X, y = _data(rng)
    kern = K.Matern(2.5, 0.9, bias=0.8, input_scale=np.array([1.2, 0.7]))
    F = sl.PhaseTruncatedHarmonics(3, 7, 3, seed=2)
    model = sl.VISH(kern, None, sl.likelihoods.Gaussian(0.05), features=F, prior="features").fit(X, y, optimize=False)
    _check_elbo_gradient(model, X, y, ["directions", "variance", "lengthscale", "bias", "noise", "input_scale"])


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
    check = check_named_gradients(
        lambda lam: uncollapsed_bound(lam, 1.0, noise, m_opt, L_opt, Phi, y, r2, 80, residual=False).value,
        {"lam": lam}, {"lam": uncollapsed_bound(lam, 1.0, noise, m_opt, L_opt, Phi, y, r2, 80, residual=False).dlam},
        positive=["lam"], rtol=1e-5, atol=1e-6)
    assert check.ok, str(check)


def test_prior_argument_is_checked():
    with pytest.raises(ValueError, match="prior"):
        sl.VISH(K.Matern(1.5, 1.0), 3, prior="truncated")


@pytest.mark.slow
def test_vish_fit_trains_the_phases(rng):
    X, y = _data(rng, n=150)
    F = sl.PhaseTruncatedHarmonics(3, 8, 2, seed=0)
    start = F.get_params()
    model = sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1), features=F)
    model.fit(X, y, optimize=False)
    elbo0 = model.elbo()
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model.fit(X, y, lift_maxiter=60)
    assert not np.allclose(F.get_params(), start)
    assert model.elbo() > elbo0
    mean, var = model.predict_y(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_statistics_without_a_subset_are_the_other_rows_statistics(rng):
    X, y = _data(rng, n=120)
    kernel, F = K.Matern(1.5, 1.0), sl.PhaseTruncatedHarmonics(3, 5, 3, seed=1)
    F.initialise(3)
    F.bind(kernel)
    part = np.arange(120) % 3 == 0
    whole, some, rest = (harmonic_statistics(kernel, F, X[m], y[m]) for m in (slice(None), part, ~part))
    other = whole.without(some)
    assert other.n == rest.n and np.isclose(other.yy, rest.yy, rtol=1e-13)
    assert np.allclose(other.G, rest.G, rtol=0, atol=1e-12 * np.abs(whole.G).max())
    assert np.allclose(other.c, rest.c, rtol=0, atol=1e-12 * np.abs(whole.c).max())
    with pytest.raises(ValueError, match="strict, non-empty subset"):
        some.without(whole)
    # rows that are not among these (other targets, other inputs): not a subset, refused
    alien = harmonic_statistics(kernel, F, 3.0 * X[part], 10.0 * y[part])
    with pytest.raises(ValueError, match="not a subset.*yy"):
        whole.without(alien)
    empty = sl.bounds.Statistics(some.G * 0, some.c * 0, 0.0, 0.0, 1)
    empty.n = 0
    with pytest.raises(ValueError, match="non-empty"):
        whole.without(empty)


def test_trained_directions_leave_the_spectrum_and_noise_to_the_rows_they_did_not_see(rng):
    """Directions are hyper-parameters of the prior that fit their subsample's noise: the spectrum
    and noise are fitted on the other rows (an optimum there, not on every row), the posterior on all."""
    import copy

    from spherelab.distributed import subsample_rows

    X, y = _data(rng, n=200)
    model = sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1),
                    features=sl.PhaseTruncatedHarmonics(3, 6, 3, seed=0))
    with sl.models.capped():
        model.fit(X, y, lift_maxiter=40, seed=3)
    Xs, _ = subsample_rows(X, y, 100, 3)  # at most half the rows train the directions
    seen = (X[:, None, :] == Xs[None, :, :]).all(axis=2).any(axis=1)
    assert seen.sum() == 100

    def refit(rows):  # the spectrum and noise alone, from the fitted model's values, on these rows
        again = sl.VISH(copy.deepcopy(model.kernel), None, copy.deepcopy(model.likelihood),
                        features=copy.deepcopy(model.features))
        return again.fit(X[rows], y[rows], train_lift=False).likelihood.variance

    noise = model.likelihood.variance
    assert refit(~seen) == pytest.approx(noise, rel=1e-4)  # already the optimum on the unseen rows
    assert abs(refit(np.ones(200, bool)) - noise) > 1e-3 * noise  # not the optimum on every row
    assert model.stats.n == 200  # the posterior conditions on every row
