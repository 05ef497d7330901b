"""Greedy conditional-variance selection (spherelab.features.greedy_variance) against the definition
computed densely, and its use for the orthogonal inputs of OrthogonalSVGP and the hybrid started
from VISH."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import toy_data


def _bound(features, kernel, D):
    features.initialise(D + 1, None)
    features.bind(kernel)
    return features


def _dense_greedy(S, count):
    """The definition: at each step the row of largest conditional variance given the rows chosen."""
    chosen = []
    for _ in range(count):
        if chosen:
            C = S[np.ix_(chosen, chosen)]
            cond = np.diag(S) - np.einsum("ij,ji->i", S[:, chosen], np.linalg.solve(C, S[chosen, :]))
        else:
            cond = np.diag(S).copy()
        cond[chosen] = -np.inf
        chosen.append(int(np.argmax(cond)))
    return chosen


@pytest.mark.parametrize("features", [None, "harmonics", "points"])
def test_the_choice_is_the_definitions_on_a_small_exact_case(features):
    X, _ = toy_data(3, 40, 2, inputs="uniform")
    kernel = sl.kernels.Matern(1.5, 0.7, bias=0.6)
    feats = None
    S = kernel.K(X)
    if features is not None:
        feats = _bound(sl.HarmonicFeatures(2) if features == "harmonics" else sl.InducingPoints(X[:3] + 0.05),
                       kernel, 2)
        Kuu = sl.linalg.add_jitter(feats.Kuu(kernel), 1e-6)
        Kuf = feats.Kuf(kernel, X)
        S = S - Kuf.T @ np.linalg.solve(Kuu, Kuf)  # the residual kernel of v's prior
    order = sl.features.greedy_variance(kernel, X, 8, feats)
    assert order.tolist() == _dense_greedy(S, 8)


def test_conditional_variance_falls_and_vanishes_at_the_chosen_rows():
    X, _ = toy_data(4, 60, 2, inputs="uniform")
    kernel = sl.kernels.Matern(2.5, 0.5)
    order = sl.features.greedy_variance(kernel, X, 12)
    S = kernel.K(X)
    tops = []
    for k in range(1, 13):
        c = order[:k]
        cond = np.diag(S) - np.einsum("ij,ji->i", S[:, c], np.linalg.solve(S[np.ix_(c, c)], S[c, :]))
        assert np.max(np.abs(cond[c])) <= 1e-9 * np.max(np.diag(S))
        tops.append(np.max(cond))
    assert all(b <= a * (1 + 1e-12) for a, b in zip(tops, tops[1:]))


def test_duplicate_rows_run_out_of_variance_and_the_rest_come_in_order():
    base, _ = toy_data(5, 4, 2, inputs="uniform")
    X = np.vstack([base, base, base])  # 4 distinct rows, 12 in all
    order = sl.features.greedy_variance(sl.kernels.Matern(1.5, 0.8), X, 7)
    assert len(set(order.tolist())) == 7
    assert sorted(order[:4] % 4) == [0, 1, 2, 3]  # the 4 distinct rows first
    assert order[4:].tolist() == [i for i in range(12) if i not in order[:4]][:3]  # then the rest in order
    assert sl.features.greedy_variance(sl.kernels.Matern(1.5), X, 0).shape == (0,)
    with pytest.raises(ValueError, match="count"):
        sl.features.greedy_variance(sl.kernels.Matern(1.5), X, 13)


def test_orthogonal_inputs_chosen_greedily_from_the_training_rows(monkeypatch):
    X, y = toy_data(6, 80, 3, inputs="uniform")
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 0.8), sl.HarmonicFeatures(2), 6, orthogonal_inputs="greedy")
    model.initialise(X)
    feats = _bound(sl.HarmonicFeatures(2), model.kernel, 3)
    expected = X[sl.features.greedy_variance(model.kernel, X, 6, feats, jitter=model.jitter)]
    np.testing.assert_array_equal(model.W, expected)
    monkeypatch.setattr(sl.OrthogonalSVGP, "greedy_candidates", 30)  # more rows than candidates
    small = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 0.8), sl.HarmonicFeatures(2), 6, orthogonal_inputs="greedy")
    small.initialise(X)
    assert all(np.any(np.all(X == w, axis=1)) for w in small.W)
    with pytest.raises(ValueError, match="orthogonal_inputs must be .* 'random' or 'greedy'"):
        sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.HarmonicFeatures(2), 6, orthogonal_inputs="kmeans")


def test_the_choice_survives_saving_a_model_not_yet_fitted(tmp_path):
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.HarmonicFeatures(2), 4, orthogonal_inputs="greedy")
    model.save(tmp_path / "m.npz")
    assert sl.load(tmp_path / "m.npz").orthogonal_init == "greedy"


def test_the_hybrid_starts_from_a_fitted_vish_and_improves_on_it():
    X, y = toy_data(7, 300, 2, inputs="uniform", signal=lambda X: np.sin(3 * X[:, 0]) * X[:, 1])
    vish = sl.VISH(sl.kernels.Matern(1.5), 3, prior="kernel").fit(X, y)
    hybrid = sl.OrthogonalSVGP.from_vish(vish, 12)
    assert hybrid.kernel is not vish.kernel and hybrid.likelihood is not vish.likelihood
    params = {k: np.copy(v) for k, v in vish.kernel.hyperparameters.items()}
    assert all(np.allclose(hybrid.kernel.hyperparameters[k], v, rtol=0, atol=0) for k, v in params.items())
    hybrid.fit(X, y, optimize=False)
    start = hybrid.elbo()
    assert start >= vish.elbo() - 1e-6 * abs(vish.elbo())  # more inducing variables, same hyper-parameters
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        hybrid.fit(X, y, maxiter=40)
    assert hybrid.elbo() > start
    assert all(np.array_equal(vish.kernel.hyperparameters[k], v) for k, v in params.items())  # VISH untouched
    with pytest.raises(ValueError, match="fitted with fit"):
        sl.OrthogonalSVGP.from_vish(sl.VISH(sl.kernels.Matern(1.5), 3), 4)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        features_prior = sl.VISH(sl.kernels.Matern(1.5), 3).fit(X, y, maxiter=5)  # the default prior
    with pytest.raises(ValueError, match="prior='kernel'"):
        sl.OrthogonalSVGP.from_vish(features_prior, 4)


def test_kmeans_centres_find_separated_clusters_and_are_a_fixed_point_of_lloyd():
    """Three well-separated blobs: the three centres are the blobs' means (to the blobs' spread
    over sqrt(n)); and after convergence each centre is the mean of the rows nearest to it."""
    rng = np.random.default_rng(3)
    means = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 3.0]])
    X = np.concatenate([m + 0.1 * rng.standard_normal((200, 3)) for m in means])
    C = sl.features.kmeans_centres(X, 3, seed=1, iterations=50)
    gaps = np.linalg.norm(means[:, None, :] - C[None], axis=2)  # (blob, centre)
    assert sorted(np.argmin(gaps, axis=1)) == [0, 1, 2] and np.max(np.min(gaps, axis=1)) < 0.03
    Y = rng.standard_normal((500, 2))
    C = sl.features.kmeans_centres(Y, 7, seed=0, iterations=200)
    nearest = np.argmin(((Y[:, None, :] - C[None]) ** 2).sum(-1), axis=1)
    for j in range(7):
        np.testing.assert_allclose(C[j], Y[nearest == j].mean(0), atol=1e-12)


def test_kmeans_centres_subsample_by_seed_and_refuse_bad_counts():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 2))
    a = sl.features.kmeans_centres(X, 5, seed=2, max_rows=100)
    assert a.shape == (5, 2) and np.array_equal(a, sl.features.kmeans_centres(X, 5, seed=2, max_rows=100))
    assert not np.array_equal(a, sl.features.kmeans_centres(X, 5, seed=3, max_rows=100))
    with pytest.raises(ValueError, match="count"):
        sl.features.kmeans_centres(X[:4], 5)
    with pytest.raises(ValueError, match="X"):
        sl.features.kmeans_centres(np.full((4, 2), np.nan), 2)


def test_the_inducing_point_regressor_starts_from_kmeans_or_greedy_rows(rng, monkeypatch):
    """inputs='kmeans' (default) starts Z at k-means centres, 'greedy' at (standardised) training
    rows; any other value is refused by name."""
    from spherelab import estimators

    X, y = toy_data(rng, 120)
    starts = []
    real = estimators.InducingPoints
    monkeypatch.setattr(estimators, "InducingPoints", lambda Z: starts.append(np.array(Z)) or real(Z))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        greedy = estimators.InducingPointRegressor(num_inducing=5, maxiter=1, inputs="greedy").fit(X, y)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        estimators.InducingPointRegressor(num_inducing=5, maxiter=1).fit(X, y)
    rows = {tuple(r) for r in (X - greedy.X_mean_) / greedy.X_scale_}  # the rows the regressor fits
    assert len(starts) == 2 and all(s.shape == (5, 2) for s in starts)
    assert all(tuple(z) in rows for z in starts[0])
    assert not any(tuple(z) in rows for z in starts[1])
    with pytest.raises(ValueError, match="inputs"):
        estimators.InducingPointRegressor(inputs="random").fit(X, y)


def test_the_orthogonal_regressor_starts_from_kmeans_centres_or_random_rows(rng, monkeypatch):
    """inputs='kmeans' (default): Z at k-means centres of the standardised rows, the orthogonal
    inputs chosen greedily; 'random': both at drawn rows, Z shifted by 1e-3; others refused."""
    from spherelab import estimators

    X, y = toy_data(rng, 120)
    seen = []
    real = estimators.OrthogonalSVGP

    def spy(kernel, features, K, likelihood, **options):
        seen.append((np.array(features.Z), options.get("orthogonal_inputs")))
        return real(kernel, features, K, likelihood, **options)

    monkeypatch.setattr(estimators, "OrthogonalSVGP", spy)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        est = estimators.OrthogonalRegressor(num_inducing=5, num_orthogonal=3, maxiter=1).fit(X, y)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        estimators.OrthogonalRegressor(num_inducing=5, num_orthogonal=3, maxiter=1, inputs="random").fit(X, y)
    Xs = (X - est.X_mean_) / est.X_scale_  # the rows the regressor fits
    assert np.array_equal(seen[0][0], sl.features.kmeans_centres(Xs, 5, seed=0)) and seen[0][1] == "greedy"
    shifted = {tuple(r + 1e-3) for r in Xs}
    assert all(tuple(z) in shifted for z in seen[1][0]) and seen[1][1] == "random"
    with pytest.raises(ValueError, match="inputs"):
        estimators.OrthogonalRegressor(inputs="greedy").fit(X, y)


def test_kmeans_centres_of_rows_far_from_the_origin_are_as_good():
    """Offsetting the rows changes nothing but the centres' offset (distances computed from the
    rows' mean, not from the origin)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    near = sl.features.kmeans_centres(X, 20, seed=1)
    far = sl.features.kmeans_centres(X + 1e9, 20, seed=1)
    np.testing.assert_allclose(far - 1e9, near, atol=1e-5)


def test_kmeans_centres_keep_within_the_memory_budget(monkeypatch):
    import tracemalloc

    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", "64M")
    X = np.random.default_rng(0).normal(size=(8000, 2))
    tracemalloc.start()
    sl.features.kmeans_centres(X, 2000, seed=0, iterations=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20, peak
