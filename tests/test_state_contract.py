"""The whole object under the concurrency contract: ``save``, ``copy.deepcopy``, ``copy.copy`` and
pickling read a model as predictions do (one racing a fit captures the fitted model, never a trial
point); ``set_parameter_vector`` validates everything before it writes, and writes all or nothing;
a scikit-learn estimator's ``fit`` commits the scaling and the model together (an exception at any
line of it leaves the estimator predicting exactly as before)."""

from __future__ import annotations

import copy
import os
import pickle
import sys
import threading

import numpy as np
import pytest
import spherelab as sl
from conftest import fit_in_a_thread, resolved_file, sine_data
from spherelab import _estimator_state as estimator_state
from spherelab import estimators
from spherelab import kernels as K
from spherelab.linalg import NumericalFailure

G = sl.likelihoods.Gaussian


def _model():
    X, y = sine_data(60)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        return sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:6]), 4, G(0.1)).fit(X, y, maxiter=3), X, y


def _fingerprint(model, Xs):
    with sl.thread_limit(1):
        mean, var = model.predict_f(Xs)
    return mean.tobytes() + var.tobytes()


READS = {
    "save": lambda m, tmp: sl.load(_saved(m, tmp)),
    "deepcopy": lambda m, tmp: copy.deepcopy(m),
    "pickle": lambda m, tmp: pickle.loads(pickle.dumps(m)),
}


def _saved(model, tmp):
    path = os.path.join(tmp, "model.npz")
    sl.save(model, path)
    return path


@pytest.mark.parametrize("how", list(READS))
def test_a_read_racing_a_fit_captures_the_fitted_model(how, tmp_path, monkeypatch):
    model, X, y = _model()
    Xs = X[:5]
    fitting, inside = fit_in_a_thread(model, X, y, monkeypatch, maxiter=15, pause=0.01)
    assert inside.wait(30)
    got = READS[how](model, str(tmp_path))
    fitting.join(60)
    monkeypatch.undo()
    assert _fingerprint(got, Xs) == _fingerprint(model, Xs)  # the fitted model, not a trial point


def test_copies_and_pickles_are_independent_and_predict_identically():
    model, X, _ = _model()
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert _fingerprint(twin, X[:5]) == _fingerprint(model, X[:5])
        assert twin.kernel is not model.kernel and twin.features is not model.features
        twin.kernel.lengthscale = 0.3
        assert model.kernel.lengthscale != 0.3
    shallow = copy.copy(model)
    assert shallow.kernel is model.kernel and _fingerprint(shallow, X[:5]) == _fingerprint(model, X[:5])
    shared = sl.VISH(K.Matern(1.5), 2, G(0.1))
    pair = copy.deepcopy((shared, shared.kernel))
    assert pair[0].kernel is pair[1]  # sharing within one copy is kept


# ---- set_parameter_vector --------------------------------------------------------------------------
def test_set_parameter_vector_checks_everything_before_it_writes():
    model, X, _ = _model()
    before = _fingerprint(model, X[:5])
    moved = model.parameter_vector() + 0.1  # every entry changed: a partial write would show
    last_nan = moved.copy()
    last_nan[-1] = np.nan
    for bad, match in ((moved[:-1], "theta must be a 1-d vector"), (np.append(moved, 0.0), "theta must be"),
                       (last_nan, "NaN"), (moved.reshape(1, -1), "1-d")):
        with pytest.raises(ValueError, match=match):
            model.set_parameter_vector(bad)
        assert _fingerprint(model, X[:5]) == before


def test_set_parameter_vector_puts_back_what_a_refusing_setter_follows(monkeypatch):
    model, X, _ = _model()
    before = _fingerprint(model, X[:5])
    theta = model.parameter_vector()
    assert model.param_names.index("features") > 0  # entries before it are written first

    def refuse(self, values):
        raise ValueError("refused by the setter")

    monkeypatch.setattr(type(model.features), "set_params", refuse)
    with pytest.raises(ValueError, match="refused"):
        model.set_parameter_vector(theta + 0.05)
    monkeypatch.undo()
    assert _fingerprint(model, X[:5]) == before


def test_an_unrepresentable_trial_point_writes_nothing():
    model, X, _ = _model()
    before = _fingerprint(model, X[:5])
    theta = model.parameter_vector()
    i = model.param_names.index("lengthscale")
    theta = theta.copy()
    theta[0] += 0.5  # a change before the bad entry: must not be written either
    theta[sum(model.parameter_vector([n]).size for n in model.param_names[:i])] = -800.0  # softplus underflows
    with pytest.raises(NumericalFailure, match="lengthscale"):
        model.set_parameter_vector(theta)
    assert _fingerprint(model, X[:5]) == before


# ---- estimators: fit commits the scaling and the model together -------------------------------------
def _estimator_state(est):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}


def _same_state(est, state) -> bool:
    now = vars(est)
    if set(now) != set(state):
        return False
    return all(np.array_equal(now[k], v) if isinstance(v, np.ndarray) else now[k] is v or now[k] == v
               for k, v in state.items())


ESTIMATORS = {
    "VISHRegressor": lambda: sl.estimators.VISHRegressor(max_degree=2, maxiter=5),
    "OrthogonalRegressor": lambda: sl.estimators.OrthogonalRegressor(num_inducing=4, num_orthogonal=3, maxiter=3),
    "InducingPointRegressor": lambda: sl.estimators.InducingPointRegressor(num_inducing=4, maxiter=3),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_an_exception_at_any_line_of_an_estimators_fit_leaves_it_as_it_was(name):
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (40, 3)), rng.standard_normal(40)
    X2, y2 = rng.uniform(-5, 5, (30, 2)), 50 + 10 * rng.standard_normal(30)  # other scaling, other width
    code = {os.path.realpath(m.__file__) for m in (estimators, estimator_state)}  # the fit and its commit
    total = [0]

    def run(k):
        seen = [0]

        def local(frame, event, arg):
            if event == "line":
                if seen[0] == k:
                    raise KeyboardInterrupt
                seen[0] += 1
            return local

        def calls(frame, event, arg):  # (at every call of every function: the file resolved once)
            return local if resolved_file(frame.f_code.co_filename) in code else None

        sys.settrace(calls)
        try:
            with sl.models.capped():  # a deliberately short fit: its limit is meant
                est.fit(X2, y2)
        except KeyboardInterrupt:
            return True
        finally:
            sys.settrace(None)
            total[0] = seen[0]
        return False

    with sl.models.capped():  # a deliberately short fit: its limit is meant
        est = ESTIMATORS[name]().fit(X, y)
    assert not run(-1)  # counts the lines of an uninterrupted fit
    lines = total[0]
    assert lines > 10
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        after = ESTIMATORS[name]().fit(X2, y2).predict(X2[:5])
        est = ESTIMATORS[name]().fit(X, y)
    state, before = _estimator_state(est), est.predict(X[:5])
    for k in range(lines):
        assert run(k), k
        if not _same_state(est, state):  # interrupted after the one store: the new fit, whole
            assert set(vars(est)) == set(state) and np.array_equal(est.predict(X2[:5]), after), k
            with sl.models.capped():
                est = ESTIMATORS[name]().fit(X, y)
            state = _estimator_state(est)
            continue
        assert np.array_equal(est.predict(X[:5]), before), k
    # and a fit the model itself refuses (an invalid noise, after the new scaling was computed)
    est.set_params(noise=-1.0)
    with pytest.raises(ValueError, match="noise|variance"):
        est.fit(X2, y2)
    assert np.array_equal(est.predict(X[:5]), before)
    est.set_params(noise=0.1)  # the argument itself is the user's, and stays as set
    assert _same_state(est, state)


def test_predictions_during_refits_see_the_old_or_the_new_estimator():
    """Threads predict while another refits the same estimator on other rows (other scaling, other
    targets' units): every prediction is the prediction of one of the two fits, never a mix (the
    scaling of one with the model of the other was off by tens of y's units)."""
    rng = np.random.default_rng(1)
    X1, y1 = rng.uniform(-1, 1, (60, 3)), rng.standard_normal(60)
    X2, y2 = rng.uniform(-4, 6, (60, 3)), 40 + 10 * rng.standard_normal(60)
    Xq = rng.uniform(-1, 1, (7, 3))
    make = lambda: sl.estimators.VISHRegressor(max_degree=2, maxiter=5)  # noqa: E731
    with sl.models.capped():  # deliberately short fits: their limit is meant
        answers = [make().fit(X, y).predict(Xq, return_std=True) for X, y in ((X1, y1), (X2, y2))]
        est = make().fit(X1, y1)
    seen, stop, failures = [], threading.Event(), []

    def predict():
        while not stop.is_set():
            try:
                seen.append(est.predict(Xq, return_std=True))
            except Exception as err:  # noqa: BLE001 - reported below
                failures.append(err)

    readers = [threading.Thread(target=predict) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        with sl.models.capped():
            for k in range(6):
                est.fit(*((X2, y2) if k % 2 == 0 else (X1, y1)))
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert not failures and len(seen) > 6
    for mean, sd in seen:
        assert any(np.allclose(mean, m, rtol=1e-12, atol=0) and np.allclose(sd, s, rtol=1e-12, atol=0)
                   for m, s in answers)


@pytest.mark.parametrize("make, name", [
    (lambda v: sl.estimators.InducingPointRegressor(num_inducing=v, maxiter=3), "num_inducing"),
    (lambda v: sl.estimators.OrthogonalRegressor(num_inducing=v, num_orthogonal=3, maxiter=3), "num_inducing"),
    (lambda v: sl.estimators.OrthogonalRegressor(num_inducing=3, num_orthogonal=v, maxiter=3), "num_orthogonal"),
    (lambda v: sl.estimators.VISHRegressor(max_degree=2, maxiter=3, random_state=v), "random_state"),
])
@pytest.mark.parametrize("value", [0, -5, "8", 2.7])
def test_an_estimators_counts_are_checked_not_coerced(make, name, value):
    if name == "random_state" and value == 0:
        return  # a valid seed
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (30, 2)), rng.standard_normal(30)
    with pytest.raises((TypeError, ValueError), match=name):
        make(value).fit(X, y)


def test_huge_values_are_standardised_without_overflow():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (60, 2)), rng.standard_normal(60)
    with sl.models.capped():
        plain = sl.estimators.VISHRegressor(max_degree=2, maxiter=5).fit(X, y)
        huge = sl.estimators.VISHRegressor(max_degree=2, maxiter=5).fit(X * 1e200, y * 1e200)
    mean, sd = huge.predict(X[:5] * 1e200, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))
    np.testing.assert_allclose(mean / 1e200, plain.predict(X[:5]), rtol=1e-6, atol=1e-8)


def test_a_column_constant_up_to_rounding_is_not_divided_by_its_rounding():
    # 0.1 * 3 and 0.3 differ in the last bit: dividing by their spread (4e-17) put test rows 1e16
    # standard deviations out, and the predictive deviation reached 1e15
    rng = np.random.default_rng(0)
    X = np.c_[rng.uniform(-1, 1, 60), np.where(rng.random(60) < 0.5, 0.1 * 3, 0.3)]
    assert 0 < np.std(X[:, 1]) < 1e-16
    with sl.models.capped():
        model = sl.estimators.InducingPointRegressor(num_inducing=8, maxiter=5).fit(X, np.sin(3 * X[:, 0]))
    assert model.X_scale_[1] == 1.0 and model.X_scale_[0] > 0.1
    _, sd = model.predict(X[:5] + 1.0, return_std=True)
    assert np.all(np.isfinite(sd)) and sd.max() < 10.0
    mean, sd = estimator_state.scale_of(np.array([1.0, 1.0 + 2 ** -52]))  # two ulps apart: within n eps
    assert sd == 0.0
    assert estimator_state.scale_of(np.array([1.0, 1.0 + 2 ** -40]))[1] > 0  # 4096 ulps: a spread


@pytest.mark.parametrize("value", [0, -3, "8", 2.5])
def test_vish_chunk_size_is_checked_when_assigned(value):
    model = sl.VISH(K.Matern(1.5, 1.0), 2)
    with pytest.raises((TypeError, ValueError), match="chunk_size"):
        model.chunk_size = value
    assert model.chunk_size is None
    model.chunk_size = 64
    assert model.chunk_size == 64
