"""The hybrid's front door (spherelab.selection.fit_hybrid): an explicit (L, K) pair, a pair chosen from a
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
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.selection.fit_hybrid(sl.kernels.Matern(1.5), X, y, degree=3, num_orthogonal=6, maxiter=40, seed=1)
    assert isinstance(model, sl.OrthogonalSVGP)
    assert (model.features.max_degree, model.num_orthogonal) == (3, 6)
    vish = sl.VISH(sl.kernels.Matern(1.5), 3, prior="kernel").fit(X, y, maxiter=40, seed=1)
    # the same features and hyper-parameters plus K more inducing variables, then only ascent
    assert model.elbo(X, y) >= vish.elbo(X, y) - 1e-8 * abs(vish.elbo(X, y))
    mean, var = model.predict_y(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)


def test_a_time_budget_chooses_a_pair_and_the_fit_ends_within_its_stages(data):
    X, y = data
    model = sl.selection.fit_hybrid(sl.kernels.Matern(1.5), X, y, time_budget=3.0, max_orthogonal=40)
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
        sl.selection.fit_hybrid(sl.kernels.Matern(1.5), X, y, **kwargs)


def _titsias(Kww, Kwf, kdiag, y, noise):
    """Titsias's collapsed bound over the inducing set W, dense (N x N), independent of the library."""
    from scipy.linalg import cholesky

    A = np.linalg.solve(cholesky(Kww, lower=True), Kwf)
    Q = A.T @ A
    C = cholesky(Q + noise * np.eye(len(y)), lower=True)
    a = np.linalg.solve(C, y)
    return (-0.5 * a @ a - np.log(np.diag(C)).sum() - 0.5 * len(y) * np.log(2 * np.pi)
            - 0.5 * (kdiag.sum() - np.trace(Q)) / noise)


@pytest.mark.parametrize("D, L", [(2, 2), (3, 3)])
def test_the_collapsed_hybrid_bound_is_titsias_over_u_and_v_less_the_mean_field_gap(D, L):
    r"""The decoupled posterior keeps q(u) and q(v_perp) independent (Tiao, thesis §3.4; Shi, Titsias
    & Mnih 2020): its collapsed bound is Titsias's over u and v together less the information the
    optimal joint q would share between the two blocks, 1/2 [log|P_uu| + log|P_vv| - log|P|] with
    P the optimal joint precision (Fischer's inequality: >= 0). Checked against dense matrices."""
    rng = np.random.default_rng(D)
    X = rng.normal(size=(150, D))
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=150)
    kernel = sl.kernels.Matern(1.5, 0.8, bias=1.0, input_scale=np.full(D, np.sqrt(D)))
    Z = X[:6] + 0.01
    model = sl.OrthogonalSVGP(kernel, sl.HarmonicFeatures(L), 6, sl.likelihoods.Gaussian(0.1), orthogonal_inputs=Z,
                              jitter=0.0).fit(X, y, optimize=False)
    Kuu, Kvv = model.features.Kuu(kernel), kernel.K(Z)
    Kvu, Kuf, Kvf = model.features.Kuf(kernel, Z).T, model.features.Kuf(kernel, X), kernel.K(Z, X)
    joint = _titsias(np.block([[Kuu, Kvu.T], [Kvu, Kvv]]), np.vstack([Kuf, Kvf]), kernel.diag(X), y, 0.1)
    # the optimal q's precision over (u, v_perp): v_perp = v - K_vu K_uu^-1 u, prior S_vv
    Kuu_inv = np.linalg.inv(Kuu)
    Svv = Kvv - Kvu @ Kuu_inv @ Kvu.T
    F = np.hstack([Kuf.T @ Kuu_inv, (Kvf.T - Kuf.T @ Kuu_inv @ Kvu.T) @ np.linalg.inv(Svv)])
    M = Kuu.shape[0]
    P = np.block([[Kuu_inv, np.zeros((M, 6))], [np.zeros((6, M)), np.linalg.inv(Svv)]]) + F.T @ F / 0.1
    gap = 0.5 * (np.linalg.slogdet(P[:M, :M])[1] + np.linalg.slogdet(P[M:, M:])[1] - np.linalg.slogdet(P)[1])
    assert gap > 0.5  # a real gap, not round-off: the two blocks share information about y
    assert abs(model.elbo() - (joint - gap)) <= 1e-10 * abs(joint), (model.elbo(), joint - gap)
