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


def _ulps(got: float, want) -> float:
    exact = float(want)
    return abs(got - exact) / float(np.spacing(exact)) if exact else abs(got) / 5e-324


def test_exp_nonpositive_within_one_ulp_of_mpmath(rng):
    import mpmath
    from spherelab.kernels.matern_jit import exp_nonpositive

    mpmath.mp.prec = 120
    # the whole range: tiny arguments, the polynomial's interval, large ones, subnormal results, 0
    xs = np.concatenate([-10.0 ** rng.uniform(-20, 0, 300), -rng.uniform(0, 40, 300), -rng.uniform(40, 708, 300),
                         -rng.uniform(708, 746, 300), [0.0, -np.log(2) / 2, -744.4, -745.13, -745.2, -800.0]])
    worst = max(_ulps(exp_nonpositive(x), mpmath.exp(mpmath.mpf(x))) for x in xs)
    assert worst <= 1.0, worst


def test_exp_nonpositive_edges():
    from spherelab.kernels.matern_jit import exp_nonpositive

    assert exp_nonpositive(0.0) == 1.0 and exp_nonpositive(-0.0) == 1.0
    assert exp_nonpositive(-np.inf) == 0.0 and exp_nonpositive(-1e300) == 0.0
    assert np.isnan(exp_nonpositive(np.nan))  # invalid values stay visible
    assert exp_nonpositive(-745.0) > 0.0  # the last subnormal, as libm gives it
    assert exp_nonpositive(-745.0) == np.exp(-745.0)
