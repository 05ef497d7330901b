"""Activated, inducing-point and harmonic features: Kuu, Kuf and their chain rules."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import DECOUPLED_FEATURES
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.features import ActivatedFeatures, HarmonicFeatures
from spherelab.testing import check_named_gradients

KERNELS = {
    "arccos": lambda: K.ArcCosine(1, 1.3, bias=0.8, input_scale=np.array([1.2, 0.7])),
    "matern52": lambda: K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=0.8),
}


@pytest.mark.parametrize("kname", KERNELS)
@pytest.mark.parametrize("fname", DECOUPLED_FEATURES)
def test_feature_gradients_against_finite_differences(kname, fname, rng):
    kern, feat = KERNELS[kname](), DECOUPLED_FEATURES[fname](rng)
    X = rng.standard_normal((6, 2))
    feat.initialise(3, rng)
    if isinstance(feat, HarmonicFeatures):
        feat.bind(kern)  # the model does this; arc-cosine drops the odd level 3
    M = feat.num_features
    Gu, Gf = rng.standard_normal((M, M)), rng.standard_normal((M, 6))

    gu, gf = feat.Kuu_gradients(kern, Gu), feat.Kuf_gradients(kern, Gf, X)
    names = list(kern.parameter_names)
    start = {"features": feat.get_params(), "X": X, **kern.hyperparameters}

    def value(features, X, **hyper):
        feat.set_params(features)
        for name, v in hyper.items():
            setattr(kern, name, v)
        return float(np.sum(Gu * feat.Kuu(kern)) + np.sum(Gf * feat.Kuf(kern, X)))

    claimed = {"features": feat.param_gradient(gu) + feat.param_gradient(gf), "X": gf["X"],
               **{k: np.asarray(gu.get(k, 0.0)) + np.asarray(gf.get(k, 0.0)) for k in names}}
    # relative steps of 1e-6, fixed: the activated features' truncated series bend within 1e-3
    check = check_named_gradients(value, start, claimed, positive=names, step=1e-6, rtol=1e-6, atol=1e-7)
    value(**start)
    assert check.ok, str(check)


def test_activated_features_match_their_definition(rng):
    """Kuf is the truncated homogeneous unit ||w|| r sigma_L(w^T x / (||w|| r)); Kuu is the
    RKHS inner product sum sigma_l^2 / lambda_l Z_l, evaluated independently by quadrature of
    the Funk-Hecke coefficients."""
    kern = K.Matern(2.5, 0.7, bias=1.0)
    act = A.Softplus(3.0)
    L, d = 6, 3
    feat = ActivatedFeatures(act, 3, L, weights=rng.standard_normal((3, d)))
    X = rng.standard_normal((5, d - 1))
    Xt = np.column_stack([X, np.ones(5)])
    lam = kern.spectrum(d, L)
    sig = act.coefficients(d, L)
    W = feat.weights
    for m in range(3):
        for n in range(5):
            rw, rx = np.linalg.norm(W[m]), np.linalg.norm(Xt[n])
            t = W[m] @ Xt[n] / (rw * rx)
            Z = sl.zonal_table(L, d, np.array([t]))[0]
            assert np.isclose(feat.Kuf(kern, X)[m, n], rw * rx * np.sum(sig * Z))
    Kuu = feat.Kuu(kern)
    for m in range(3):
        for k in range(3):
            t = W[m] @ W[k] / np.linalg.norm(W[m]) / np.linalg.norm(W[k])
            Z = sl.zonal_table(L, d, np.array([t]))[0]
            ref = np.linalg.norm(W[m]) * np.linalg.norm(W[k]) * np.sum(sig**2 / lam * Z)
            assert np.isclose(Kuu[m, k], ref)
    # joint prior of (u, f) is PSD (same truncation on both sides)
    Kff = sl.kernels.Truncated(kern, d, L).K(X)
    Kuf = feat.Kuf(kern, X)
    joint = np.block([[Kuu, Kuf], [Kuf.T, Kff]])
    assert np.linalg.eigvalsh(joint).min() > -1e-10 * np.abs(joint).max()


def test_levels_with_zero_eigenvalue_are_dropped(rng):
    """Arc-cosine order 1 has lambda_l = 0 at odd l >= 3: softplus (whose odd coefficients
    beyond 1 are also zero) is fine, but a feature with such levels must drop them."""
    kern = K.ArcCosine(1)
    feat = ActivatedFeatures(A.Swish(), 3, 7, weights=rng.standard_normal((3, 3)))
    Kuu = feat.Kuu(kern)
    assert np.all(np.isfinite(Kuu))
    lam = kern.spectrum(3, 7)
    assert np.any(lam == 0)


def test_zonal_pair_gradients_accepts_read_only_and_scalar_shape_values():
    """The backward works in place on its own copies: a shape whose values are read-only or
    scalars gives the same result, and the caller's arrays are left alone."""
    rng = np.random.default_rng(3)
    A, B, G = rng.standard_normal((5, 3)), rng.standard_normal((7, 3)), rng.standard_normal((5, 7))

    def both(t):
        s, d = np.exp(t), 2.0 * np.exp(t)
        s.flags.writeable = False
        return s, d

    dA, dB = sl.features.zonal_pair_gradients(G, A, B, both)
    dA2, dB2 = sl.features.zonal_pair_gradients(G, A, B, lambda t: (np.exp(t).copy(), 2.0 * np.exp(t)))
    np.testing.assert_allclose(dA, dA2, rtol=1e-14)
    np.testing.assert_allclose(dB, dB2, rtol=1e-14)
    G0 = G.copy()
    dA3, _ = sl.features.zonal_pair_gradients(G, A, B, lambda t: (1.0, 0.0))  # s = 1: only the norms
    assert np.array_equal(G, G0) and dA3.shape == (5, 3)


def test_activated_covariances_take_nested_lists_as_arrays(rng):
    f = sl.ActivatedFeatures(sl.activations.ReLU(), 3, 3)
    f.initialise(3, rng)
    kernel, X = sl.kernels.ArcCosine(1), rng.standard_normal((4, 2))
    G = rng.standard_normal((3, 4))
    assert np.array_equal(f.Kuf(kernel, X.tolist()), f.Kuf(kernel, X))
    listed, arrays = f.Kuf_gradients(kernel, G, X.tolist()), f.Kuf_gradients(kernel, G, X)
    assert all(np.array_equal(listed[k], arrays[k]) for k in arrays)
