"""The concurrency contract (spherelab.concurrency): predictions from many threads while another
thread changes the parameters or fits each equal the prediction of one complete parameter set, with
no spurious failures; models that share nothing fit concurrently; the lock itself is re-entrant,
prefers writers and refuses an upgrade instead of deadlocking."""

from __future__ import annotations

import copy
import threading
import time

import numpy as np
import pytest
import spherelab as sl
from conftest import sine_data
from spherelab import kernels as K
from spherelab.concurrency import ParameterLock, lock_of
from spherelab.models import capped

G = sl.likelihoods.Gaussian


MODELS = {
    "vish": capped()(lambda X, y: sl.VISH(K.Matern(1.5, 1.0), 4, G(0.1)).fit(X, y, maxiter=5, lift_maxiter=3)),
    "orthogonal": capped()(lambda X, y: sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:8]), 6, G(0.1))
    .fit(X, y, maxiter=5)),
}


def _run(threads, timeout=120):
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish (deadlock?)"


def _key(pred):
    return pred[0].tobytes() + pred[1].tobytes()


@pytest.mark.parametrize("name", list(MODELS))
def test_predictions_see_one_complete_parameter_set(name):
    X, y = sine_data(80)
    model = MODELS[name](X, y)
    Xs = X[:60] * 0.9
    a = model.get_params()
    b = {k: np.asarray(v) * 1.3 if k in ("lengthscale", "variance", "noise") else v for k, v in a.items()}
    with sl.thread_limit(1):  # the same bits in every thread
        expected = {_key(model.set_params(**b).predict_f(Xs)), _key(model.set_params(**a).predict_f(Xs))}
        stop, seen, errors = threading.Event(), [], []

        def writer():
            while not stop.is_set():
                model.set_params(**b)
                model.set_params(**a)

        def reader():
            try:
                for _ in range(15):
                    seen.append(_key(model.predict_f(Xs)))
            except Exception as exc:  # a spurious failure is a failure of the contract
                errors.append(exc)

        readers = [threading.Thread(target=reader) for _ in range(3)]
        w = threading.Thread(target=writer)
        w.start()
        _run(readers)
        stop.set()
        w.join(60)
    assert not errors, errors[:3]
    mixed = [k for k in seen if k not in expected]
    assert not mixed, f"{len(mixed)} of {len(seen)} predictions matched neither parameter set"


def test_predictions_never_see_a_fits_trial_points():
    X, y = sine_data(80)
    model = MODELS["orthogonal"](X, y)
    Xs = X[:40]
    with sl.thread_limit(1):
        before = _key(model.predict_f(Xs))
        seen, done = [], threading.Event()

        def fit():
            with sl.models.capped():  # a deliberately short fit: its limit is meant
                model.fit(X, y + 0.5, maxiter=30)
            done.set()

        def reader():
            while not done.is_set():
                seen.append(_key(model.predict_f(Xs)))
                time.sleep(0.001)

        _run([threading.Thread(target=fit), threading.Thread(target=reader)])
        after = _key(model.predict_f(Xs))
    assert seen and set(seen) <= {before, after}


def test_models_sharing_nothing_fit_concurrently_and_those_sharing_a_kernel_serialise():
    X, y = sine_data(80)
    shared = K.Matern(1.5, 1.0)
    models = [sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)), sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)),
              sl.VISH(shared, 3, G(0.1)), sl.OrthogonalSVGP(shared, sl.InducingPoints(X[:5]), 4, G(0.1))]
    errors = []

    def fit(m):
        try:
            with sl.models.capped():  # a deliberately short fit: its limit is meant
                m.fit(X, y, maxiter=10, **({"lift_maxiter": 3} if isinstance(m, sl.VISH) else {}))
            m.predict_f(X[:5])
        except Exception as exc:
            errors.append(exc)

    _run([threading.Thread(target=fit, args=(m,)) for m in models])
    assert not errors, errors


def test_the_lock_is_reentrant_prefers_writers_and_refuses_upgrades():
    lock = ParameterLock()
    with lock.write(), lock.write(), lock.read():  # a writer may write again and read
        pass
    with lock.read(), lock.read():
        with pytest.raises(RuntimeError, match="inside a prediction"):
            with lock.write():
                pass
    order, reading = [], threading.Event()

    def long_reader():
        with lock.read():
            reading.set()
            time.sleep(0.2)
            order.append("reader 1 done")

    def writer():
        reading.wait()
        with lock.write():
            order.append("writer")

    def late_reader():
        reading.wait()
        time.sleep(0.05)  # arrives while the writer waits: queued behind it
        with lock.read():
            order.append("reader 2")

    _run([threading.Thread(target=f) for f in (long_reader, writer, late_reader)])
    assert order == ["reader 1 done", "writer", "reader 2"]


def test_models_with_locks_copy_and_deepcopy():
    X, y = sine_data(80)
    model = MODELS["vish"](X, y)
    model.predict_f(X[:3])  # locks created
    twin = copy.deepcopy(model)
    assert lock_of(twin.kernel) is not lock_of(model.kernel) and lock_of(twin.kernel).free()
    twin.kernel.lengthscale = 0.5
    assert model.kernel.lengthscale != 0.5
