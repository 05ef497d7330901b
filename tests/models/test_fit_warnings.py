"""What a fit says about its own end and about the data it was given: an iteration limit reached
before converging (ConvergenceWarning, naming the argument to raise), inputs or targets far from
unit scale (ScaleWarning, naming the columns and the fix), and neither where it does not apply."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def _caught(fit) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, (sl.ConvergenceWarning, sl.ScaleWarning))]


def test_reaching_maxiter_warns_with_the_argument_to_raise():
    X, y = _data()
    model = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1))
    caught = _caught(lambda: model.fit(X, y, lift_maxiter=2, maxiter=2))
    texts = [str(w.message) for w in caught if w.category is sl.ConvergenceWarning]
    assert any("lift: stopped at the iteration limit (lift_maxiter = 2)" in t for t in texts), texts
    assert any("spectrum: stopped at the iteration limit (maxiter = 2)" in t and "raise maxiter" in t
               for t in texts), texts
    assert all(w.filename == __file__ for w in caught)  # the user's line, not the package's
    assert any("iteration limit" in t for t in model.fit_report_["warnings"])
    points = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:10]), 0, sl.likelihoods.Gaussian(0.1))
    caught = _caught(lambda: points.fit(X, y, maxiter=2))
    assert [str(w.message).split(":")[0] for w in caught] == ["OrthogonalSVGP.fit"]
    assert "with max_time=..." in str(caught[0].message) and "with max_time=..." in texts[0]  # both fits take one


def test_a_converged_fit_or_a_time_limit_does_not_warn():
    X, y = _data()
    assert not _caught(lambda: sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, y))
    points = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:10]), 0, sl.likelihoods.Gaussian(0.1))
    assert not _caught(lambda: points.fit(X, y, maxiter=1000, max_time=1e-9))  # the user's own stop


def test_capped_fits_record_the_limit_without_warning_and_only_in_their_own_thread():
    X, y = _data()
    model = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1))
    with sl.models.capped():
        assert not _caught(lambda: model.fit(X, y, lift_maxiter=2, maxiter=2))
    assert any("iteration limit" in t for t in model.fit_report_["warnings"])
    inside, outside = threading.Event(), threading.Event()

    def other():
        with sl.models.capped():
            inside.set()
            outside.wait(60)

    worker = threading.Thread(target=other)
    worker.start()
    inside.wait(60)
    try:  # another thread's capped() does not silence this one
        assert _caught(lambda: sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, y, maxiter=2))
    finally:
        outside.set()
        worker.join()


def test_inputs_and_targets_far_from_unit_scale_warn_by_column_with_the_fix():
    X, y = _data(400)
    raw = np.column_stack([X[:, 0], 1000.0 + 6.0 * X[:, 1]])  # an offset of 170 sd, as power's pressure
    caught = _caught(lambda: sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(
        raw, 450.0 + 17.0 * y, maxiter=5, lift_maxiter=5))
    text = next(str(w.message) for w in caught if w.category is sl.ScaleWarning)
    assert text.startswith("VISH.fit: inputs X far from unit scale, column 1 (mean 1e+03")
    assert "column 0" not in text and "targets y far from unit scale (mean 449" in text
    assert "spherelab.datasets.Standardizer" in text
    wide = X * np.array([1.0, 100.0])  # a scale of 100: the input scale could learn it, but far from its start
    caught = _caught(lambda: sl.models.ExactGP(K.Matern(1.5), 0.1).fit(wide, y))
    assert [str(w.message).split(",")[:2] for w in caught] == [["ExactGP.fit: inputs X far from unit scale",
                                                                 " column 1 (mean 1.89"]]


def test_standardised_data_labels_and_constant_columns_do_not_warn():
    X, y = _data(400)
    X = np.column_stack([X, np.full(len(X), 5.0)])  # a constant column says nothing of scale
    assert not _caught(lambda: sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(X, y))
    labels = (y > 0).astype(float)  # 0/1 labels of a classifier are not targets to standardise
    model = sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Bernoulli())
    assert not [w for w in _caught(lambda: model.fit_svi(X, labels, iterations=3)) if w.category is sl.ScaleWarning]
    assert not _caught(lambda: sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(0.1)).fit(X[:1], y[:1],
                                                                                          optimize=False))


@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_a_tiny_or_huge_scale_warns(scale):
    X, y = _data(200)
    caught = _caught(lambda: sl.models.ExactGP(K.Matern(1.5), 0.1).fit(X * scale, y))
    assert len(caught) == 1 and "columns 0" in str(caught[0].message)
