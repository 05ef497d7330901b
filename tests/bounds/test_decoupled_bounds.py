"""The orthogonally-decoupled bounds: whitened = plain, the statistics path = the per-row bound, precision, memory."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import DECOUPLED_FEATURES, check_objective_gradient, decoupled_data, peak_memory, randomise_decoupled_q
from spherelab import OrthogonalSVGP
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.features import ActivatedFeatures, InducingPoints
from spherelab.rows.decoupled import StatisticsPath

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


def _stats_model(fname, num_orth, rng, n=70):
    X, y = decoupled_data(rng, n=n)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2, input_scale=np.array([0.8, 1.3]))
    model = OrthogonalSVGP(kern, DECOUPLED_FEATURES[fname](rng), num_orth, sl.likelihoods.Gaussian(0.3)).fit(
        X, y, optimize=False
    )
    randomise_decoupled_q(model, rng)
    assert StatisticsPath(model).use_stats(n)
    return model, X, y


@pytest.mark.parametrize("num_orth", [0, 3])
def test_whitened_bound_equals_the_plain_bound_at_the_mapped_q(num_orth, rng):
    """m = L_uu m~, C = L_uu C~ L_uu^T (and likewise with L_vv for v'): same ELBO, same
    predictions, same five variance terms."""
    X, y = decoupled_data(rng, n=15)
    kern = K.Matern(2.5, 0.9, 1.1, bias=1.2)
    feat = ActivatedFeatures(A.Softplus(2.0), 4, 4)
    white = OrthogonalSVGP(kern, feat, num_orth, sl.likelihoods.Gaussian(0.3), jitter=0.0).fit(X, y, optimize=False)
    randomise_decoupled_q(white, rng)
    plain = OrthogonalSVGP(kern, feat, num_orth, sl.likelihoods.Gaussian(0.3), whiten=False, jitter=0.0,
                           orthogonal_inputs=white.W if num_orth else None).fit(X, y, optimize=False)
    Kuu = feat.Kuu(kern)
    Lk = np.linalg.cholesky(Kuu)
    plain.m_u, plain.L_u = Lk @ white.m_u, Lk @ np.tril(white.L_u)
    if num_orth:
        Kvu = feat.Kuf(kern, white.W).T
        Ls = np.linalg.cholesky(kern.K(white.W) - Kvu @ np.linalg.solve(Kuu, Kvu.T))
        plain.m_v, plain.L_v = Ls @ white.m_v, Ls @ np.tril(white.L_v)
    assert np.isclose(white.elbo(), plain.elbo(), rtol=1e-10)
    Xs = rng.standard_normal((6, 2))
    for a, b in zip(white.predict_f(Xs), plain.predict_f(Xs)):
        assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
    ta, tb = white.variance_terms(Xs), plain.variance_terms(Xs)
    assert all(np.allclose(ta[k], tb[k], rtol=1e-9, atol=1e-12) for k in ta)


@pytest.mark.parametrize("fname", ["softplus", "relu", "points", "harmonics"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_sufficient_statistics_path_equals_the_per_row_bound(fname, num_orth, rng, monkeypatch):
    """Gaussian + whitened: the ELBO from (Phi, beta) streamed over chunks (cache off, 7-row
    chunks) equals the per-row whitened bound, value and every gradient, full decoupled_data and minibatch."""
    model, X, y = _stats_model(fname, num_orth, rng)
    monkeypatch.setattr(model, "chunk_entries", 7 * model.num_inducing)
    monkeypatch.setattr(OrthogonalSVGP, "keep_entries", 0)
    for num_data in (None, 400):
        v1, g1 = model.elbo_and_gradient(X, y, num_data)
        model.sufficient_statistics = False
        v0, g0 = model.elbo_and_gradient(X, y, num_data)
        model.sufficient_statistics = True
        assert np.isclose(v1, v0, rtol=1e-12, atol=1e-9)
        assert g1.keys() == g0.keys()
        for k in g0:
            a, b = np.asarray(g1[k], dtype=float), np.asarray(g0[k], dtype=float)
            assert np.allclose(a, b, rtol=1e-9, atol=1e-9 * (1 + np.abs(b).max(initial=0))), k


@pytest.mark.parametrize("variance, noise", [(1.0, 1e-2), (50.0, 1e-4)])
def test_sufficient_statistics_keep_their_precision_on_ill_conditioned_kuu(variance, noise):
    """kappa(Kuu) 2e6-4e7, small noise, q at its optimum: the streamed bound equals the per-row
    bound to 1e-10 (whitening K_pf before the product; forming K_pf K_fp first lost kappa
    digits: 1e-8 and 6e-5 relative in these two cases)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 2))
    y = np.sin(1.5 * X[:, 0]) + 0.3 * X[:, 1] + 1e-3 * rng.standard_normal(300)
    kern = K.Matern(2.5, variance, 1.0 if variance == 1.0 else 2.0, bias=1.0)
    model = OrthogonalSVGP(kern, InducingPoints(X[:40].copy()), 20, sl.likelihoods.Gaussian(noise))
    model.fit(X, y, optimize=False)
    assert np.linalg.cond(model.inducing_matrices()[0]) > 1e6
    v_stats = model.elbo()
    model.sufficient_statistics = False
    assert model.elbo() == pytest.approx(v_stats, rel=1e-10)


@pytest.mark.parametrize("fname", ["softplus", "points"])
@pytest.mark.parametrize("num_orth", [0, 3])
def test_sufficient_statistics_gradients_against_finite_differences(fname, num_orth, rng, monkeypatch):
    model, X, y = _stats_model(fname, num_orth, rng, n=30)
    monkeypatch.setattr(model, "chunk_entries", 11 * model.num_inducing)
    check_objective_gradient(model, X, y, 90)


def test_sufficient_statistics_memory_does_not_grow_with_n(rng, monkeypatch):
    """Peak memory of an ELBO + gradient evaluation with K_pf recomputed (not kept) is the same
    for N and 4N rows: nothing of shape (M + K, N) is formed. On one thread: each share of a split
    pass holds its own chunk's temporaries, and how many shares run depends on the machine's load
    (measured at 512-row chunks: one share 0.47 MB at both sizes, two 0.86 and 0.93 MB; a loaded
    CI run gave 0.60 MB at N and 0.94 MB at 4N)."""
    monkeypatch.setattr(OrthogonalSVGP, "keep_entries", 0)
    monkeypatch.setattr(OrthogonalSVGP, "chunk_entries", 500 * 16)
    peaks = []
    for n in (4000, 16000):
        X, y = decoupled_data(np.random.default_rng(0), n=n)
        model = OrthogonalSVGP(K.Matern(2.5, 1.0), ActivatedFeatures(A.Softplus(1.0), 8, 4), 8).fit(
            X, y, optimize=False
        )
        peaks.append(peak_memory(lambda: model.elbo_and_gradient(X, y)))
    assert peaks[1] < 1.5 * peaks[0], peaks
    assert peaks[1] < 16 * 16000 * 8  # well below one (M + K, N) array


def test_the_statistics_bound_refuses_a_trace_term_float64_cannot_resolve():
    """sum_n k(x_n, x_n) - tr(Phi) at 1e20 and noise 1e-2: its rounding (about 1e6 nats) would be
    the bound, so the bound raises NumericalFailure (an optimiser steps back)."""
    from spherelab.bounds.decoupled import gaussian_stats_bound_whitened
    from spherelab.linalg import NumericalFailure

    M, K, n = 2, 1, 40

    def bound(r2):  # q's covariance near zero: the trace term is the bound's only r^2-sized term
        Phi = np.diag([r2 / 3] * 3)
        return gaussian_stats_bound_whitened(np.eye(M + K), M, Phi, np.zeros(3), r2, 30.0, n, np.zeros(M),
                                             1e-12 * np.eye(M), np.zeros(K), 1e-12 * np.eye(K), 1e-2, n)

    assert np.isfinite(bound(40.0).value)
    with pytest.raises(NumericalFailure, match="trace term .* not resolved in float64"):
        bound(1e20)


@pytest.mark.parametrize("whitened", [False, True])
def test_the_per_row_bounds_refuse_variances_float64_cannot_resolve(whitened):
    """The minibatch bound's variance k(x, x) - Q_ff + ... at k(x, x) = 1e20 with the inducing
    points explaining all of it (noise 1e-2): the difference is rounding of ~1e6 nats, so the
    bound raises NumericalFailure (an optimiser steps back) instead of returning it."""
    from spherelab.bounds.decoupled import orthogonal_bound, orthogonal_bound_whitened
    from spherelab.linalg import NumericalFailure

    n = 20
    bound = orthogonal_bound_whitened if whitened else orthogonal_bound

    def at(r2):  # one inducing variable, u = f at every row: Q_ff = k(x, x) = r2
        Kuf = np.full((1, n), r2)
        return bound(np.array([[r2]]), Kuf, np.full(n, r2), np.zeros(1), 1e-6 * np.eye(1), np.zeros((0, 0)),
                     np.zeros((0, 1)), np.zeros((0, n)), np.zeros(0), np.zeros((0, 0)), np.zeros(n),
                     sl.likelihoods.Gaussian(1e-2), 3 * n)

    assert np.isfinite(at(1.5).value)
    with pytest.raises(NumericalFailure, match="variances .* not resolved in float64"):
        at(1e20)
