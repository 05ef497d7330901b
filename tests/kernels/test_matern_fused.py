"""The compiled Matérn kernels equal the NumPy path (values, hyper-parameter and input gradients)."""

from __future__ import annotations

import numpy as np
import pytest
from spherelab import kernels as K
from spherelab.testing import check_named_gradients


@pytest.fixture
def numpy_path(monkeypatch):
    def run(fn):
        monkeypatch.setattr(K.Matern, "fused", False)
        try:
            return fn()
        finally:
            monkeypatch.setattr(K.Matern, "fused", True)
    return run


@pytest.mark.parametrize("nu", [1.5, 2.5, np.inf])
@pytest.mark.parametrize("same", [True, False])
def test_fused_matern_equals_numpy(nu, same, numpy_path, rng):
    kern = K.Matern(nu, 0.7, variance=1.3, bias=0.6, input_scale=np.array([1.2, 0.8, 1.0]))
    assert kern.fused_code() is not None
    X = rng.normal(size=(17, 3))
    X[5] = X[2]  # a repeated row: t = 1 off the diagonal
    X2 = None if same else np.concatenate([rng.normal(size=(9, 3)), X[:2]])
    G = rng.normal(size=(17, 17 if same else 11))
    ref_K = numpy_path(lambda: kern.K(X, X2))
    ref = numpy_path(lambda: kern.gradients_with_inputs(G, X, X2))
    assert np.allclose(kern.K(X, X2), ref_K, rtol=1e-13, atol=1e-15)
    got = kern.gradients_with_inputs(G, X, X2)
    for k in ref[0]:
        assert np.allclose(got[0][k], ref[0][k], rtol=1e-11, atol=1e-13), k
    assert np.allclose(got[1], ref[1], rtol=1e-11, atol=1e-13)
    if not same:
        assert np.allclose(got[2], ref[2], rtol=1e-11, atol=1e-13)


def test_half_and_other_kernels_keep_the_numpy_path():
    assert K.Matern(0.5, 1.0).fused_code() is None
    assert K.Parity(K.Matern(2.5, 1.0)).fused_code() is None
    assert K.ArcCosine(1).fused_code() is None


@pytest.mark.parametrize("kern", [K.Matern(2.5, 0.7, variance=1.3, bias=0.6, input_scale=np.array([1.2, 0.8])),
                                  K.ArcCosine(1, variance=0.9, bias=1.1, input_scale=0.7)], ids=repr)
def test_diag_gradients_against_finite_differences(kern, rng):
    X = rng.normal(size=(9, 2))
    g = rng.normal(size=9)
    an = kern.diag_gradients(g, X)
    start = kern.hyperparameters

    def value(**params):
        for name, v in params.items():
            setattr(kern, name, v)
        return float(g @ kern.diag(X))

    check = check_named_gradients(value, start, {k: an[k] for k in start}, positive=list(start), rtol=1e-6, atol=1e-8)
    value(**start)
    assert check.ok, str(check)
