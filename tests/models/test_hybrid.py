"""The hybrid's front door (spherelab.models.fit_hybrid): an explicit (L, K) pair, a pair chosen from a
time budget, the time limit itself, and the bound never below the VISH it starts from."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl


@pytest.fixture(scope="module")
def data():
    X, y = sl.datasets.synthetic_regression(500, 2, noise=0.1, seed=3)
    return X, y


def test_an_explicit_pair_gives_that_model_and_a_bound_no_lower_than_its_vish(data):
    X, y = data
    model = sl.models.fit_hybrid(sl.kernels.Matern(1.5), X, y, degree=3, num_orthogonal=6, maxiter=40, seed=1)
    assert isinstance(model, sl.OrthogonalSVGP)
    assert (model.features.max_degree, model.num_orthogonal) == (3, 6)
    vish = sl.VISH(sl.kernels.Matern(1.5), 3, prior="kernel").fit(X, y, maxiter=40, seed=1)
    # the same features and hyper-parameters plus K more inducing variables, then only ascent
    assert model.elbo(X, y) >= vish.elbo(X, y) - 1e-8 * abs(vish.elbo(X, y))
    mean, var = model.predict_y(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)


def test_a_time_budget_chooses_a_pair_and_the_fit_ends_within_its_stages(data):
    X, y = data
    model = sl.models.fit_hybrid(sl.kernels.Matern(1.5), X, y, time_budget=3.0, max_orthogonal=40)
    assert model.features.max_degree >= 1
    assert 1 <= model.num_orthogonal <= 40  # max_orthogonal caps the count the budget affords
    M, K = model.features.num_features, model.num_orthogonal
    assert M <= K or K == 40 or model.features.max_degree == 1  # half the affordable P at least is points
    report = model.fit_report_["fit"]
    assert report["iterations"] >= 1 and not model.fit_report_["warnings"]


def test_max_time_stops_at_the_first_iterate_after_it_and_says_so(data):
    X, y = data
    vish = sl.VISH(sl.kernels.Matern(1.5), 2, prior="kernel").fit(X, y, maxiter=20)
    model = sl.OrthogonalSVGP.from_vish(vish, 4).fit(X, y, maxiter=500, max_time=1e-9)
    report = model.fit_report_["fit"]
    assert report["iterations"] == 1 and "time limit" in report["message"]
    assert not model.fit_report_["warnings"]  # the user asked for the stop: no warning


def test_a_callback_sees_every_iterate_and_can_end_the_fit(data):
    X, y = data
    vish = sl.VISH(sl.kernels.Matern(1.5), 2, prior="kernel").fit(X, y, maxiter=20)
    seen = []
    model = sl.OrthogonalSVGP.from_vish(vish, 4)
    model.fit(X, y, maxiter=500, callback=lambda theta: seen.append(theta) or len(seen) == 3)
    report = model.fit_report_["fit"]
    assert report["iterations"] == 3 and "callback" in report["message"] and len(seen) == 3
    assert np.allclose(seen[-1], model.parameter_vector(model.collapsed_names), rtol=1e-12)  # ended there
    assert seen[0].shape == seen[-1].shape and not np.array_equal(seen[0], seen[-1])
    with pytest.raises(TypeError, match="callback must be a function"):
        sl.OrthogonalSVGP.from_vish(vish, 4).fit(X, y, callback=3)


@pytest.mark.parametrize("kwargs, words", [({"degree": 2}, "degree and num_orthogonal"),
                                           ({"num_orthogonal": 3}, "degree and num_orthogonal"),
                                           ({}, "time_budget")])
def test_a_half_pair_or_no_budget_is_refused_by_name(data, kwargs, words):
    X, y = data
    with pytest.raises(ValueError, match=words):
        sl.models.fit_hybrid(sl.kernels.Matern(1.5), X, y, **kwargs)
