"""VISH's minibatch fit through the registry: q(u) as registry entries (whitened for non-Gaussian
likelihoods), the uncollapsed bound's derivatives by name against finite differences — the lift and
the directions included — and fit_svi stepping Model.objective."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data
from spherelab import kernels as K
from spherelab.bounds.vish_svi import uncollapsed_bound
from spherelab.models.base import Model
from spherelab.testing import check_model_gradient, checkgrad

G = sl.likelihoods.Gaussian

MODELS = {
    "gaussian": lambda: sl.VISH(K.Matern(1.5, 0.8, bias=0.7, input_scale=np.array([1.0, 1.3])), 3, G(0.2)),
    "gaussian, features prior": lambda: sl.VISH(K.Matern(2.5, 0.9, bias=0.5), 3, G(0.2), prior="features"),
    "bernoulli": lambda: sl.VISH(K.Matern(1.5, 0.8, bias=0.7), 3, sl.likelihoods.Bernoulli()),
    "gaussian, phases": lambda: sl.VISH(K.ArcCosine(1, bias=0.6), None, G(0.2),
                                        features=sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
}


def _fitted(name, rng):
    X, y = toy_data(rng, 30, 2)
    model = MODELS[name]()
    if "bernoulli" in name:
        y = (y > 0).astype(float)
    model.fit_svi(X, y, batch_size=10, iterations=3, lr=0.02)
    M = model.q_mu.size  # away from the prior, so that every derivative is exercised
    model.set_params(q_mu=rng.normal(size=M),
                     q_sqrt=model.get_params()["q_sqrt"] + 0.1 * np.tril(rng.normal(size=(M, M))))
    return model, X, y


@pytest.mark.parametrize("name", list(MODELS))
def test_the_uncollapsed_gradient_of_every_registry_entry(name, rng):
    model, X, y = _fitted(name, rng)
    names = model.param_names
    assert {"q_mu", "q_sqrt", "bias", "input_scale"} <= set(names)
    assert ("directions" in names) == ("phases" in name)
    check = check_model_gradient(model, X, y)
    assert check.ok, str(check)


@pytest.mark.parametrize("name", ["gaussian", "bernoulli"])
def test_the_minibatch_estimate_and_its_gradient(name, rng):
    model, X, y = _fitted(name, rng)
    theta = model.parameter_vector()

    def batch(t):
        value, grad = model.objective(t, X[:8], y[:8], num_data=X.shape[0])
        assert value < 1e300
        return value, grad

    check = checkgrad(batch, theta)
    assert check.ok, str(check)
    # an unbiased estimate: the average over a partition of the rows is the whole data's bound
    parts = [model.objective(theta, X[i::3], y[i::3], num_data=X.shape[0])[0] for i in range(3)]
    assert np.isclose(np.mean(parts), model.objective(theta, X, y)[0], rtol=1e-12)


def test_whitened_entries_for_bernoulli_and_plain_ones_for_the_gaussian(rng):
    X, y = toy_data(rng, 30, 2)
    kernel = K.Matern(1.5, 0.8)
    bern = sl.VISH(kernel, 3, sl.likelihoods.Bernoulli()).fit_svi(X, (y > 0).astype(float), iterations=0)
    lam = bern.features.Kuu_inverse_diag(kernel)
    np.testing.assert_allclose(bern.q_sqrt, np.diag(lam ** -0.5), rtol=1e-15)  # q starts at the prior
    params = bern.get_params()
    np.testing.assert_array_equal(params["q_mu"], 0.0)
    np.testing.assert_allclose(params["q_sqrt"], np.eye(lam.size), atol=1e-15)
    # a whitened q stays whitened when the spectrum moves: the entries, not q itself, are kept
    bern.set_parameter_vector(bern.parameter_vector())
    np.testing.assert_allclose(bern.get_params()["q_sqrt"], np.eye(lam.size), atol=1e-14)

    gauss = sl.VISH(K.Matern(1.5, 0.8), 3, G(0.2)).fit_svi(X, y, iterations=5, batch_size=10)
    np.testing.assert_array_equal(gauss.get_params()["q_sqrt"], gauss.q_sqrt)
    np.testing.assert_array_equal(gauss.get_params()["q_mu"], gauss.q_mu)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
def test_fit_svi_takes_one_objective_step_per_minibatch(likelihood, rng, monkeypatch):
    X, y = toy_data(rng, 40, 2)
    lik = G(0.2) if likelihood == "gaussian" else sl.likelihoods.Bernoulli()
    y = y if likelihood == "gaussian" else (y > 0).astype(float)
    calls = []
    original = Model.objective

    def spy(self, theta, X, y, **kwargs):
        calls.append((X.shape[0], kwargs.get("num_data"), tuple(kwargs.get("names"))))
        return original(self, theta, X, y, **kwargs)

    monkeypatch.setattr(Model, "objective", spy)
    model = sl.VISH(K.Matern(1.5, 0.8), 3, lik).fit_svi(X, y, batch_size=16, iterations=7)
    assert len(calls) == 7 == len(model.trace)
    assert all(c[:2] == (16, 40) for c in calls)
    # the lift stays fixed; q is Adam's only for the whitened (non-conjugate) case
    names = set(calls[0][2])
    assert not names & {"bias", "input_scale"}
    assert ({"q_mu", "q_sqrt"} <= names) == (likelihood == "bernoulli")
    assert np.all(np.isfinite(model.trace))


def test_the_factor_of_s_may_have_any_signs_on_its_diagonal(rng):
    M, B = 5, 12
    lam, Phi, y, r2 = rng.uniform(0.5, 2, M), rng.normal(size=(B, M)), rng.normal(size=B), rng.uniform(1, 2, B)
    L = np.tril(rng.normal(size=(M, M))) + 2 * np.eye(M)
    flip = L * np.where(rng.random(M) < 0.5, -1.0, 1.0)[None, :]  # S = L L^T unchanged
    m = rng.normal(size=M)
    a = uncollapsed_bound(lam, 1.0, 0.3, m, L, Phi, y, r2, 40)
    b = uncollapsed_bound(lam, 1.0, 0.3, m, flip, Phi, y, r2, 40)
    assert np.isclose(a.value, b.value, rtol=1e-13)
    with pytest.raises(sl.linalg.NumericalFailure, match="zero on its diagonal"):
        uncollapsed_bound(lam, 1.0, 0.3, m, L - np.diag(np.diag(L)), Phi, y, r2, 40)
