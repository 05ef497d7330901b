"""The model base: the reject guard catches only NumericalFailure, the posterior cache follows
every parameter, the registry's chain rule through its transforms."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data
from spherelab import kernels as K
from spherelab.linalg import NumericalFailure


def _data(rng):
    return toy_data(rng, 50, 1, signal=lambda X: np.sin(2 * X[:, 0]))


def test_objective_rejects_numerical_failures_and_propagates_bugs(rng, monkeypatch):
    X, y = _data(rng)
    model = sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:5]), 2).fit(X, y, optimize=False)
    theta = model.parameter_vector()

    def failing(*args, **kwargs):
        raise NumericalFailure("Cholesky of Kuu failed")

    monkeypatch.setattr(model, "elbo_and_gradient", failing)
    value, grad = model.objective(theta, X, y)
    assert value == 1e300 and not np.any(grad)

    def buggy(*args, **kwargs):
        raise ValueError("a programming error")

    monkeypatch.setattr(model, "elbo_and_gradient", buggy)
    with pytest.raises(ValueError, match="programming error"):
        model.objective(theta, X, y)
    with pytest.raises(ValueError, match="programming error"):
        model.fit(X, y, maxiter=3, collapsed=False)


@pytest.mark.parametrize("objective", ["objective", "collapsed_objective"])
def test_a_trial_point_a_setter_refuses_is_rejected_and_leaves_the_model_as_it_was(rng, objective):
    # a long L-BFGS-B step can reach softplus(-617) = 6.5e-269 for a lengthscale, below its 1e-100 floor
    X, y = _data(rng)
    model = sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:5]), 2).fit(X, y, optimize=False)
    names = model.collapsed_names if objective == "collapsed_objective" else None
    theta = model.parameter_vector(names)
    before = model.parameter_vector()
    index = [p.name for p in model._entries(names) for _ in range(p.size())].index("lengthscale")
    trial = theta.copy()
    trial[index] = -617.0
    value, grad = getattr(model, objective)(trial, X, y)
    assert value == 1e300 and not np.any(grad)
    assert np.array_equal(model.parameter_vector(), before)
    with pytest.raises(ValueError, match="theta must be a 1-d vector"):  # a caller's mistake stays one
        getattr(model, objective)(theta[:-1], X, y)


def test_vish_posterior_follows_the_kernel_it_shares(rng):
    """Notebook 06's slider: after fit, setting kernel.beta moves predict_f as it moves elbo(),
    to exactly what a model fitted at that beta predicts."""
    X, y = _data(rng)
    kernel = K.PolynomialDecay(2, 2.0, max_degree=12)
    model = sl.VISH(kernel, 12, sl.likelihoods.Gaussian(0.05)).fit(X, y, maxiter=20)
    Xs = np.linspace(-2, 2, 9)[:, None]
    before = model.predict_f(Xs)
    kernel.beta = kernel.beta + 1.5
    after = model.predict_f(Xs)
    assert not np.allclose(before[0], after[0])
    fresh = sl.VISH(copy.deepcopy(kernel), 12, copy.deepcopy(model.likelihood)).fit(X, y, optimize=False)
    assert np.allclose(after[0], fresh.predict_f(Xs)[0], atol=1e-10)
    assert np.allclose(after[1], fresh.predict_f(Xs)[1], atol=1e-10)
    model.likelihood.variance = 0.5  # the noise too
    assert not np.allclose(model.predict_f(Xs)[1], after[1])


def test_fit_returns_self_and_keyword_only_options(rng):
    X, y = _data(rng)
    model = sl.VISH(K.Matern(1.5, 1.0), 4)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        assert model.fit(X, y, maxiter=5, lift_maxiter=5) is model
    with pytest.raises(TypeError):
        model.fit(X, y, False)  # optimize is keyword-only


def test_wrong_likelihood_for_the_collapsed_fit_is_a_type_error(rng):
    X, y = _data(rng)
    with pytest.raises(TypeError, match="Gaussian"):
        sl.VISH(K.Matern(1.5, 1.0), 3, sl.likelihoods.Bernoulli()).fit(X, (y > 0).astype(float))
    with pytest.raises(TypeError, match="likelihood must be"):
        sl.VISH(K.Matern(1.5, 1.0), 3, "gaussian")


def test_positive_transform_chain_rule(rng):
    """d/du of softplus-parameterised entries: the objective's gradient against differences in u,
    for a model whose every entry is positive (VISH)."""
    X, y = _data(rng)
    model = sl.VISH(K.Matern(1.5, 0.8, bias=0.7), 5, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
    check = sl.testing.checkgrad(lambda t: model.objective(t, X, y), model.parameter_vector())
    assert check.ok, str(check)


def test_exact_gp_noise_is_validated_and_refactorises_when_set():
    import spherelab as sl

    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 2))
    y = np.sin(X[:, 0])
    gp = sl.models.ExactGP(sl.kernels.Matern(1.5), 0.1).fit(X, y)
    for bad in (-1.0, 0.0, float("inf"), "0.1"):
        with pytest.raises((ValueError, TypeError), match="noise"):
            gp.noise = bad
    assert gp.noise == 0.1
    gp.noise = 0.5
    fresh = sl.models.ExactGP(sl.kernels.Matern(1.5), 0.5).fit(X, y)
    for a, b in zip(gp.predict_f(X[:4]), fresh.predict_f(X[:4])):
        assert np.array_equal(a, b)
    assert gp.log_marginal_likelihood() == fresh.log_marginal_likelihood()


def test_num_inducing_answers_before_fit_or_says_to_fit_first():
    X = np.zeros((4, 2))
    assert sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:3]), 2).num_inducing == 5
    assert sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(sl.activations.ReLU(), 2, 3)).num_inducing == 2
    vish = sl.VISH(K.Matern(1.5), 3)
    with pytest.raises(RuntimeError, match=r"fit\(X, y\) first"):  # was: 'NoneType' has no attribute
        vish.num_inducing
    X, y = sl.datasets.synthetic_regression(50, 2, seed=0)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        assert vish.fit(X, y, maxiter=3).num_inducing == sl.cumulative_num_harmonics(3, 3)
