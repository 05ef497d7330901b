"""Kernels as covariance functions in data space: Gram matrices, hyper-parameter and input gradients."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from spherelab import kernels as K
from spherelab.testing import check_named_gradients


def _with(kernel, name, value):
    k = copy.copy(kernel)
    setattr(k, name, value)
    return k


DATA_KERNELS = [
    K.ArcCosine(1, variance=1.5, bias=0.7, input_scale=1.3),
    K.ArcCosine(2, bias=1.2, input_scale=np.array([0.8, 1.5])),
    K.Matern(1.5, 0.9, bias=0.5, input_scale=np.array([1.1, 0.6])),
    K.Matern(np.inf, 0.7, variance=0.8, bias=2.0),
    K.NTK(2, bias=1.0, input_scale=0.9),
    K.IntrinsicMatern(3, 2.5, 0.8, bias=0.9, input_scale=np.array([1.0, 2.0])),
    K.PolynomialDecay(3, 5.0, bias=1.1),
]


@pytest.mark.parametrize("kernel", DATA_KERNELS, ids=lambda k: repr(k)[:50])
@pytest.mark.parametrize("cross", [False, True])
def test_data_space_gradients(kernel, cross, rng):
    X = rng.normal(size=(7, 2))
    X2 = rng.normal(size=(5, 2)) if cross else None
    G = rng.normal(size=(7, 5 if cross else 7))
    grads = kernel.gradients(G, X, X2)
    point = kernel.hyperparameters

    def value(**params):
        k = copy.copy(kernel)
        for name, v in params.items():
            setattr(k, name, v)
        return float(np.sum(G * k.K(X, X2)))

    # relative steps of 1e-6 (fixed, in logarithms): PolynomialDecay's truncation follows beta, so
    # its value has kinks a larger step would cross
    check = check_named_gradients(value, point, {k: grads[k] for k in point}, positive=list(point),
                                  step=1e-6, rtol=1e-5, atol=1e-7)
    assert check.ok, str(check)


@pytest.mark.parametrize("kernel", DATA_KERNELS, ids=lambda k: repr(k)[:50])
@pytest.mark.parametrize("cross", [False, True])
def test_data_space_input_gradients(kernel, cross, rng):
    X = rng.normal(size=(6, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        smooth_at_one = abs(kernel.shape_dt(np.array([1.0 - 1e-10]))[0]) < 1e3
    if smooth_at_one:  # a repeated row: t = 1 off the diagonal (K is not differentiable there otherwise)
        X[3] = X[1]
    X2 = rng.normal(size=(4, 2)) if cross else None
    G = rng.normal(size=(6, 4 if cross else 6))
    hyper, dX, dX2 = kernel.gradients_with_inputs(G, X, X2)
    assert hyper.keys() == kernel.gradients(G, X, X2).keys()
    assert (dX2 is None) == (not cross)
    # a fixed step: the repeated row sits at t = 1, where a larger step crosses the kink of |x - x'|
    if cross:
        check = check_named_gradients(lambda X, X2: float(np.sum(G * kernel.K(X, X2))), {"X": X, "X2": X2},
                                      {"X": dX, "X2": dX2}, step=1e-6, rtol=1e-6, atol=1e-7)
    else:
        check = check_named_gradients(lambda X: float(np.sum(G * kernel.K(X))), {"X": X}, {"X": dX},
                                      step=1e-6, rtol=1e-6, atol=1e-7)
    assert check.ok, str(check)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, np.inf])
def test_matern_fused_shape_matches_parts(nu):
    k = K.Matern(nu, 0.7, variance=1.3)
    t = np.linspace(-1.0, 0.999, 41)
    kap, kap_t, grads = k.unit_shape_all(t, "cpu")
    assert np.allclose(kap, k.unit_shape(t, "cpu"), rtol=1e-14, atol=0)
    assert np.allclose(kap_t, k.unit_shape_dt(t, "cpu"), rtol=1e-13, atol=0)
    assert np.allclose(grads["lengthscale"], k.unit_shape_gradients(t, "cpu")["lengthscale"], rtol=1e-14, atol=0)


def test_gram_matches_definition(rng):
    k = K.ArcCosine(1, variance=2.0, bias=0.5, input_scale=np.array([2.0, 0.5, 1.0]))
    X = rng.normal(size=(6, 3))
    Xt = np.concatenate([X / k.input_scale, np.full((6, 1), 0.5)], 1)
    r = np.linalg.norm(Xt, axis=1)
    T = np.clip((Xt / r[:, None]) @ (Xt / r[:, None]).T, -1, 1)
    th = np.arccos(T)
    ref = 2.0 * np.outer(r, r) * (np.sin(th) + (np.pi - th) * np.cos(th)) / np.pi
    assert np.allclose(k.K(X), ref, atol=1e-12)
    assert np.allclose(k.diag(X), np.diag(ref))
    assert np.all(np.linalg.eigvalsh(k.K(X)) > -1e-12)


def test_kappa_at_one():
    for k in [K.Matern(1.5, 0.4, variance=2.0), K.ArcCosine(2, variance=0.5), K.NTK(2)]:
        assert np.isclose(k.at_one(), float(k.shape(np.ones(1))[0]))
    assert K.IntrinsicMatern(3, 0.5, 0.05, variance=1.7).at_one() == 1.7
    t = K.Truncated(K.Matern(1.5, 0.7, variance=1.3), 3, 5)
    assert np.isclose(t.at_one(), float(t.shape(np.ones(1))[0]), rtol=1e-13)
    g = t.at_one_gradients()
    assert check_named_gradients(lambda lengthscale: _with(t, "lengthscale", lengthscale).at_one(),
                                 {"lengthscale": 0.7}, {"lengthscale": g["lengthscale"]}, rtol=1e-6).ok
