"""The nearest-neighbour correction of a global model's residual: with every training row as a
neighbour it is the exact GP posterior of the residual (against a dense computation written here),
its compiled loop against NumPy's linear algebra, its fit leaves the parameters the criterion
prefers, a save and load predicts bit for bit, and the errors a user meets."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab.models.local import _conditionals


def _data(rng, n=120, D=2):
    X = rng.normal(size=(n, D))
    y = np.sin(2 * X[:, 0]) + 0.3 * np.cos(5 * X[:, 1]) + 0.05 * rng.normal(size=n)
    return X, y


def _fitted(rng, m=16, n=120):
    X, y = _data(rng, n)
    with sl.models.capped():
        model = sl.models.NeighbourResidual(sl.VISH(sl.kernels.Matern(1.5), 2), m, subsample=60).fit(X, y)
    return model, X, y


def _matern(A, B, a, ell):
    r = np.sqrt(3.0) * np.sqrt(np.maximum(((A[:, None, :] - B[None, :, :]) ** 2).sum(-1), 0.0)) / ell
    return a * (1.0 + r) * np.exp(-r)


def test_the_compiled_conditionals_equal_dense_linear_algebra(rng):
    B, m = 7, 9
    pts = rng.normal(size=(B, m + 1, 3))
    dist = np.sqrt(((pts[:, :, None, :] - pts[:, None, :, :]) ** 2).sum(-1))
    rho = rng.normal(size=(B, m))
    theta = np.array([0.8, 0.7, 0.05])
    mean, var_f, var_y = _conditionals(dist, rho, theta)
    for b in range(B):
        K = _matern(pts[b, 1:], pts[b, 1:], 0.8, 0.7) + 0.05 * np.eye(m)
        k = _matern(pts[b, :1], pts[b, 1:], 0.8, 0.7)[0]
        w = np.linalg.solve(K, k)
        # terms of size a, rounding of an m x m solve with condition ~ a / noise
        tol = 1e-12 * np.linalg.cond(K)
        assert abs(mean[b] - w @ rho[b]) <= tol * (1 + np.abs(w) @ np.abs(rho[b]))
        assert abs(var_f[b] - (0.8 - w @ k)) <= tol
        assert abs(var_y[b] - (0.85 - w @ k)) <= tol


def test_every_row_a_neighbour_is_the_exact_residual_posterior(rng):
    model, X, y = _fitted(rng, m=16, n=40)
    model.num_neighbours = X.shape[0]  # (validated: the model conditions on every training row)
    Xs = rng.normal(size=(6, 2))
    a, ell, noise = model.theta
    Z, Zs = X / model.metric, Xs / model.metric
    rho = y - model.model.predict_f(X)[0]
    K = _matern(Z, Z, a, ell) + noise * np.eye(X.shape[0])
    ks = _matern(Zs, Z, a, ell)
    g_mean, g_var = model.model.predict_f(Xs)
    mean, var = model.predict_f(Xs)
    tol = 1e-10 * np.linalg.cond(K) ** 0.5
    assert np.allclose(mean, g_mean + ks @ np.linalg.solve(K, rho), rtol=0, atol=tol)
    assert np.allclose(var, g_var + a - np.einsum("ij,ji->i", ks, np.linalg.solve(K, ks.T)), rtol=0, atol=tol)


def test_the_correction_beats_its_global_model_and_reports(rng):
    model, X, y = _fitted(rng, n=400)
    Xs, ys = _data(rng, 300)

    def nlpd(m):
        mu, v = m.predict_y(Xs)
        return float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * (ys - mu) ** 2 / v))

    assert nlpd(model) < nlpd(model.model) - 0.1
    report = model.fit_report_["local"]
    assert report["nlpd"] <= report["start nlpd"] and report["rows"] == 60
    assert np.all(model.theta > 0)


def test_copies_of_a_row_do_not_decide_the_noise(rng):
    # every row twice, same target: without passing over copies, each row predicts its twin exactly
    X, y = _data(rng, 150)
    X2, y2 = np.vstack([X, X]), np.concatenate([y, y])
    with sl.models.capped():
        once = sl.models.NeighbourResidual(sl.VISH(sl.kernels.Matern(1.5), 2), 16, subsample=100).fit(X, y)
        twice = sl.models.NeighbourResidual(sl.VISH(sl.kernels.Matern(1.5), 2), 16, subsample=100).fit(X2, y2)
    assert twice.theta[2] > 0.1 * once.theta[2]


def test_noise_free_targets_keep_every_neighbourhood_factorable(rng):
    # without noise the search drives the noise towards 0 and the variance up (1e-17 of it was
    # seen): each neighbourhood's Cholesky then rests on rounding; the floor keeps it far above
    from spherelab.models.local import NOISE_FLOOR

    X = rng.normal(size=(300, 3))
    with sl.models.capped():
        model = sl.models.NeighbourResidual(sl.VISH(sl.kernels.Matern(1.5), 3), 32, subsample=150).fit(
            X, np.sin(X[:, 0]))
    assert model.theta[2] >= NOISE_FLOOR * model.theta[0] * (1 - 4 * np.finfo(float).eps)
    mean, var = model.predict_y(rng.normal(size=(2_000, 3)))
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    model.theta = np.array([1.0, 1e3, 1e-30])  # a user's own noise far below it: named, with the floor
    with pytest.raises(sl.linalg.NumericalFailure, match=r"raise the noise, theta\[2\], to at least 1e-08"):
        model.predict_y(np.repeat(X[:1], 40, axis=0) + 1e-9 * rng.normal(size=(40, 3)))


def test_save_and_load_predict_bit_for_bit(tmp_path, rng):
    model, X, _ = _fitted(rng)
    path = tmp_path / "local.npz"
    model.save(path)
    loaded = sl.load(path)
    assert isinstance(loaded, sl.models.NeighbourResidual)
    for a, b in zip(model.predict_y(X[:9]), loaded.predict_y(X[:9])):
        assert np.array_equal(a, b)


def test_errors_name_what_is_wrong(rng):
    vish = sl.VISH(sl.kernels.Matern(1.5), 2)
    with pytest.raises(TypeError, match="model must be"):
        sl.models.NeighbourResidual(object())
    with pytest.raises(ValueError, match="num_neighbours"):
        sl.models.NeighbourResidual(vish, 0)
    with pytest.raises(RuntimeError, match="not fitted"):
        sl.models.NeighbourResidual(vish).predict_f(np.zeros((2, 2)))
    model, X, _ = _fitted(rng)
    with pytest.raises(ValueError, match="2 columns"):
        model.predict_f(np.zeros((2, 3)))


def test_fixed_inducing_inputs_stay_and_the_rest_fits(rng):
    X, y = _data(rng, 200)
    Z = sl.features.kmeans_centres(X, 12, seed=0)
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(Z, fixed=True), 0)
    with sl.models.capped():
        model.fit(X, y, maxiter=30)
    assert np.array_equal(model.features.Z, Z) and "features" not in model.param_names
    assert {"lengthscale", "noise"} <= set(model.param_names)
    check = sl.testing.check_model_gradient(model, X, y, directions=4)
    assert check.ok, str(check)


def test_a_time_limit_keeps_the_search_s_best_point_so_far(rng):
    X = rng.normal(size=(600, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=600)
    with sl.models.capped():
        base = sl.VISH(sl.kernels.Matern(1.5), 3).fit(X, y)
    quick = sl.models.NeighbourResidual(base, 8, subsample=200).fit(X, y, fit_model=False, max_time=1e-9)
    local = quick.fit_report_["local"]
    # the limit spent at once: the start point alone, and the noise chosen on the search's rows
    assert local["evaluations"] == 1 and local["nlpd"] == local["start nlpd"]
    assert local["noise rows"] == local["rows"] == 200
    mean, var = quick.predict_y(X[:20])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    full = sl.models.NeighbourResidual(base, 8, subsample=200).fit(X, y, fit_model=False)
    assert full.fit_report_["local"]["evaluations"] > 1 and full.fit_report_["local"]["noise rows"] == 600
    with pytest.raises(ValueError, match="max_time"):
        sl.models.NeighbourResidual(base, 8).fit(X, y, fit_model=False, max_time=-1.0)
