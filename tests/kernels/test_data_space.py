"""Kernels as covariance functions in data space: Gram matrices, hyper-parameter and input gradients."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from spherelab import kernels as K


def _with(kernel, name, value):
    import copy

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
    for name, value in kernel.hyperparameters.items():
        if name == "input_scale" and np.ndim(value) == 1:
            fd = np.zeros_like(value)
            for k in range(value.size):
                h = 1e-6 * value[k]
                vu, vd = value.copy(), value.copy()
                vu[k] += h
                vd[k] -= h
                fd[k] = (
                    np.sum(G * _with(kernel, name, vu).K(X, X2)) - np.sum(G * _with(kernel, name, vd).K(X, X2))
                ) / (2 * h)
            assert np.allclose(grads[name], fd, rtol=1e-5, atol=1e-7), name
        else:
            h = 1e-6 * value
            fd = (
                np.sum(G * _with(kernel, name, value + h).K(X, X2))
                - np.sum(G * _with(kernel, name, value - h).K(X, X2))
            ) / (2 * h)
            assert math.isclose(grads[name], fd, rel_tol=1e-5, abs_tol=1e-7), (name, grads[name], fd)


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
    h = 1e-6
    for A, dA in [(X, dX)] + ([(X2, dX2)] if cross else []):
        for i in np.ndindex(A.shape):
            A[i] += h
            fp = np.sum(G * kernel.K(X, X2))
            A[i] -= 2 * h
            fm = np.sum(G * kernel.K(X, X2))
            A[i] += h
            assert np.isclose(dA[i], (fp - fm) / (2 * h), rtol=1e-6, atol=1e-7), (i, dA[i])


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, np.inf])
def test_matern_fused_shape_matches_parts(nu):
    k = K.Matern(nu, 0.7, variance=1.3)
    t = np.linspace(-1.0, 0.999, 41)
    kap, kap_t, grads = k._shape_all(t)
    assert np.allclose(kap, k._shape(t), rtol=1e-14, atol=0)
    assert np.allclose(kap_t, k._shape_dt(t), rtol=1e-13, atol=0)
    assert np.allclose(grads["lengthscale"], k._shape_grads(t)["lengthscale"], rtol=1e-14, atol=0)


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
    h = 1e-6
    up, dn = copy.copy(t), copy.copy(t)
    up.lengthscale = 0.7 + h
    dn.lengthscale = 0.7 - h
    assert np.isclose(g["lengthscale"], (up.at_one() - dn.at_one()) / (2 * h), rtol=1e-6)
