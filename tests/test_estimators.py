"""The scikit-learn estimators: scikit-learn's own check suite (every check, none skipped by us),
pipelines and cross-validation, and answers that are actually good."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
import spherelab as sl  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402
from spherelab.estimators import (  # noqa: E402
    BudgetRegressor,
    HybridRegressor,
    InducingPointRegressor,
    OrthogonalRegressor,
    VISHClassifier,
    VISHRegressor,
)

#: checks that compare two fits of one estimator: what fits in a budget depends on the machine's
#: speed at that moment, so two fits may choose differently
BUDGET_CHECKS = {name: "two fits in one budget may choose different models (timing)"
                 for name in ("check_regressor_data_not_an_array", "check_fit_idempotent", "check_regressors_int")}


@parametrize_with_checks([BudgetRegressor(seconds=1.0),
                          VISHRegressor(max_degree=2, maxiter=30),
                          OrthogonalRegressor(num_inducing=4, num_orthogonal=4, maxiter=20),
                          InducingPointRegressor(num_inducing=6, maxiter=20),
                          HybridRegressor(degree=2, num_orthogonal=4, maxiter=20),
                          VISHClassifier(max_degree=2, iterations=30)],
                         expected_failed_checks=lambda est: BUDGET_CHECKS if isinstance(est, BudgetRegressor) else {})
def test_scikit_learn_checks(estimator, check):
    with warnings.catch_warnings(), sl.models.capped():  # the checks' fits are short by design
        warnings.simplefilter("ignore", RuntimeWarning)  # fit reports on the checks' toy data
        check(estimator)


def test_regressor_in_a_pipeline_and_cross_validation():
    X, y = sl.datasets.synthetic_regression(600, num_inputs=3, noise=0.05, seed=0)
    y = 50.0 + 20.0 * y  # targets far from unit scale: normalize_y handles them
    scores = cross_val_score(make_pipeline(StandardScaler(), VISHRegressor(max_degree=4)), X, y, cv=3)
    assert scores.min() > 0.9, scores
    est = VISHRegressor(max_degree=4).fit(X[:400], y[:400])
    mean, std = est.predict(X[400:], return_std=True)
    z = (y[400:] - mean) / std
    assert 0.5 < np.std(z) < 1.5  # calibrated uncertainty, in the targets' units
    assert est.get_params()["max_degree"] == 4 and est.set_params(max_degree=3).max_degree == 3


def test_orthogonal_regressor_learns():
    X, y = sl.datasets.synthetic_regression(400, num_inputs=2, noise=0.05, seed=1)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        est = OrthogonalRegressor(num_inducing=16, num_orthogonal=16).fit(X[:300], y[:300])
        assert est.score(X[300:], y[300:]) > 0.8


def test_inducing_point_regressor_learns_from_greedy_inputs():
    X, y = sl.datasets.synthetic_regression(400, 2, seed=4)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        est = InducingPointRegressor(num_inducing=24, maxiter=200).fit(X[:300], 5.0 + 3.0 * y[:300])
    assert est.score(X[300:], 5.0 + 3.0 * y[300:]) > 0.8
    Z = est.model_.features.Z
    assert Z.shape == (24, 2) and len(np.unique(Z.round(12), axis=0)) == 24
    capped = InducingPointRegressor(num_inducing=24, max_time=1e-9).fit(X[:300], y[:300])
    assert "max_time" in capped.model_.optimizer_result.message  # stopped at the first iterate past the limit


def test_hybrid_regressor_learns_and_reports_the_pair_its_budget_chose():
    X, y = sl.datasets.synthetic_regression(500, num_inputs=2, noise=0.05, seed=2)
    est = HybridRegressor(time_budget=3.0).fit(X[:400], 5.0 + 3.0 * y[:400])
    assert est.score(X[400:], 5.0 + 3.0 * y[400:]) > 0.8
    assert est.degree_ >= 1 and est.num_orthogonal_ >= 1
    assert (est.degree_, est.num_orthogonal_) == (est.model_.features.max_degree, est.model_.num_orthogonal)


def test_classifier_probabilities_and_labels():
    X, y = sl.datasets.banana_like(400, seed=0)
    labels = np.where(y > 0.5, "banana", "apple")
    clf = VISHClassifier(max_degree=6, iterations=300).fit(X[:300], labels[:300])
    proba = clf.predict_proba(X[300:])
    assert proba.shape == (100, 2) and np.allclose(proba.sum(1), 1.0)
    assert set(clf.predict(X[300:])) <= {"apple", "banana"}
    # the classes overlap: scikit-learn's exact GaussianProcessClassifier scores 0.79 on this split
    from sklearn.gaussian_process import GaussianProcessClassifier

    reference = GaussianProcessClassifier().fit(X[:300], labels[:300]).score(X[300:], labels[300:])
    assert clf.score(X[300:], labels[300:]) >= reference - 0.03


@pytest.mark.parametrize("make", [VISHRegressor, OrthogonalRegressor, VISHClassifier])
def test_too_few_rows_and_sparse_input_are_refused_clearly(make):
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="minimum of 2 is required"):
        make().fit(X[:1], y[:1])
    with pytest.raises(TypeError, match="[Ss]parse"):
        make().fit(sp.csr_matrix(X), y)


def test_a_pickled_estimator_weighs_what_its_save_holds(tmp_path):
    """A pickle, like ``save``, holds the parameters and the posterior, not the training rows (a
    fitted VISHRegressor's pickle was 5.0 MB where its save wrote 429 kB): compared with the saved
    arrays uncompressed (pickle does not compress), with room for the objects' structure; the
    unpickled estimator predicts as the original."""
    import pickle
    import zipfile

    from spherelab.estimators import VISHRegressor

    X, y = sl.datasets.synthetic_regression(20_000, 4, seed=0)
    est = VISHRegressor(max_degree=3).fit(X, y)
    path = tmp_path / "m.npz"
    est.model_.save(path)
    saved = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
    blob = pickle.dumps(est)
    assert len(blob) <= 1.05 * saved + 8_192, (len(blob), saved)  # + the objects' structure, a few kB
    again = pickle.loads(blob)
    assert np.array_equal(again.predict(X[:50]), est.predict(X[:50]))
    assert again.fit(X[:500], y[:500]).predict(X[:5]).shape == (5,)  # and fits again, given the rows
