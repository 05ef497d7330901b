"""Decisions that depend on the machine's state are made once per evaluation: the load read by
``machine_busy()`` flipping at every reading — between the forward and the backward pass of every
streamed path — changes neither the answer nor whether there is one. (A collapsed fit of an
orthogonally-decoupled model once died on ``operands could not be broadcast together with shapes
(361,5809) (361,4306)`` when the load changed between its two passes.)"""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import hvgp_data, sine_data
from spherelab import kernels as K
from spherelab import threads
from spherelab.rows.decoupled import StatisticsPath

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts

G = sl.likelihoods.Gaussian



@pytest.fixture(autouse=True)
def auto_policy():
    """The size-based policy, which reads the load (the suite itself runs with set_threads(1))."""
    previous = sl.get_threads()
    sl.set_threads("auto")
    if threads.numba_threads_for(1e12) < 2:
        pytest.skip("one core: nothing to split")
    try:
        yield
    finally:
        sl.set_threads(previous if previous is not None else "auto")


def _flipping(monkeypatch, period=1):
    """``machine_busy()`` alternating every ``period`` readings (the passes read it a different
    number of times each: some period puts a flip between any two readings)."""
    state = {"reads": 0}

    def flip():
        state["reads"] += 1
        return (state["reads"] // period) % 2 == 1

    monkeypatch.setattr(threads, "machine_busy", flip)
    return state


MODELS = {
    "orthogonal, points": lambda X: sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:8]), 8, G(0.1)),
    "orthogonal, harmonics": lambda X: sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.HarmonicFeatures(3), 8, G(0.1)),
    "activated": lambda X: sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(sl.activations.ReLU(), 8, 3), G(0.1)),
    "vish": lambda X: sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)),
    "hvgp": lambda X: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 4, G(0.1)),
}


def _fit(name, model, X, y):
    if name == "vish":
        return model.fit(X, y, maxiter=3, lift_maxiter=3)
    return model.fit(X, y, maxiter=3)  # collapsed: the statistics path, forward and backward


def _at(model, theta, X, y):
    value, grad = model.objective(theta, X, y)
    return np.concatenate([[value], grad, *model.predict_f(X[:5])])


@pytest.mark.parametrize("period", [1, 2, 3])
@pytest.mark.parametrize("name", list(MODELS))
def test_a_load_that_flips_between_passes_changes_nothing(name, period, monkeypatch):
    """A fit, an evaluation or a prediction under a load that flips at every few readings is, bit
    for bit, the same call under one steady load (the load is read once per call, and every
    decision inside the call follows that reading): no tolerance, so true on any machine."""
    X, y = hvgp_data(np.random.default_rng(0)) if name == "hvgp" else sine_data(3000)
    with sl.models.capped():  # three iterations, meant
        steady = {}
        for busy in (False, True):
            monkeypatch.setattr(threads, "machine_busy", lambda b=busy: b)
            model = _fit(name, MODELS[name](X), X, y)
            steady[busy] = (model, model.parameter_vector())
        state = _flipping(monkeypatch, period)
        model = _fit(name, MODELS[name](X), X, y)
        theta = model.parameter_vector()
        assert any(np.array_equal(theta, t) for _, t in steady.values())
        flipped = [_at(model, theta, X, y) for _ in range(3)]
        assert state["reads"] > period  # the load was read, and flipped between readings
        candidates = []
        for busy in (False, True):
            monkeypatch.setattr(threads, "machine_busy", lambda b=busy: b)
            candidates += [_at(m, theta, X, y) for m, t in steady.values() if np.array_equal(t, theta)]
    for got in flipped:
        assert any(np.array_equal(got, c) for c in candidates), got - candidates[0]


@pytest.mark.parametrize("period", [1, 2])
def test_the_chunking_of_one_evaluation_is_decided_once(period, monkeypatch):
    X, y = sine_data(3000)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = MODELS["orthogonal, points"](X).fit(X, y, maxiter=2)
    sizes = []
    original = StatisticsPath.chunk_rows

    def recorded(self, n=None):
        sizes.append(original(self, n))
        return sizes[-1]

    monkeypatch.setattr(StatisticsPath, "chunk_rows", recorded)
    _flipping(monkeypatch, period)
    model.objective(model.parameter_vector(), X, y)
    assert len(sizes) == 1, sizes
