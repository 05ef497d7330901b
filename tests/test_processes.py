"""Processes and threads after a fit: fork- and spawn-started pools return, two threads predict
at once, and the threading layer is the fork-safe one when TBB is installed."""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab import processes


def _fitted():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (300, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(300)
    with sl.thread_limit(2):  # the parallel kernels really start their pool
        vish = sl.VISH(K.Matern(1.5, 1.0), 4, sl.likelihoods.Gaussian(0.1), prior="kernel")
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            vish.fit(X, y, maxiter=20, lift_maxiter=5)
        orth = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:8]), 8, sl.likelihoods.Gaussian(0.1))
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            orth.fit(X, y, maxiter=5)
        sl.SphericalHarmonics(9, 4)(sl.sample_sphere(20_000, 9, rng=rng))
    return vish, orth, X


def _predict(args):
    model, X = args
    with sl.thread_limit(2):
        return model.predict_f(X)[0]


def test_tbb_is_the_layer_when_installed():
    pytest.importorskip("numba.np.ufunc.tbbpool")
    assert processes.threading_layer() == "tbb" and processes.fork_safe()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pools_after_a_fit_return(method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method on {sys.platform}")
    if method == "fork" and not processes.fork_safe():
        pytest.skip("Numba's OpenMP layer (no tbb installed): a fork warns instead (tested below)")
    vish, orth, X = _fitted()
    expected = [vish.predict_f(X[:50])[0], orth.predict_f(X[:50])[0]]
    with mp.get_context(method).Pool(2) as pool:
        result = pool.map_async(_predict, [(vish, X[:50]), (orth, X[:50])])
        got = result.get(timeout=240)  # a hang fails here instead of blocking CI
    for a, b in zip(got, expected):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_fork_on_the_openmp_layer_warns(monkeypatch):
    monkeypatch.setattr(processes, "fork_safe", lambda: False)
    with pytest.warns(RuntimeWarning, match="spawn"):
        processes._before_fork()


def test_two_threads_predict_at_once():
    vish, orth, X = _fitted()
    expected = {id(m): m.predict_f(X)[0] for m in (vish, orth)}
    results, errors = {}, []

    def work(model, k):
        try:
            for _ in range(3):
                results[(id(model), k)] = _predict((model, X))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(m, k)) for k in range(2) for m in (vish, orth)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors and not any(t.is_alive() for t in threads)
    for (key, _), value in results.items():
        assert np.allclose(value, expected[key], rtol=1e-12, atol=1e-12)
