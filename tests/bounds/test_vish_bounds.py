"""VISH's bounds: collapsed and uncollapsed, their matrix gradients, the streamed statistics."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import regression_data
from spherelab import kernels as K
from spherelab.bounds import Statistics, collapsed_bound, uncollapsed_bound
from spherelab.bounds.vish import harmonic_statistics
from spherelab.features import HarmonicFeatures
from spherelab.testing import check_named_gradients

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


def _svgp_problem(rng, n=40, M=6):
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    r2 = 1.0 + rng.random(n)
    lam = np.exp(rng.normal(size=M))
    m = rng.normal(size=M)
    L = np.tril(rng.normal(size=(M, M)) * 0.3) + np.diag(0.5 + rng.random(M))
    return Phi, y, r2, lam, m, L


def test_bound_matrix_gradients(rng):
    """dL/dG, dL/dc, dL/dsum_diag, dL/dv, dL/dlam against finite differences (GPy contract)."""
    M, n = 7, 30
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    stats = Statistics(Phi.T @ Phi, Phi.T @ y, float(y @ y), 41.0, n)
    lam = np.exp(rng.normal(size=M)) * np.logspace(0, -6, M)
    v, noise = 3.0, 0.3
    res = collapsed_bound(lam, v, noise, stats)

    def value(G, c, sum_diag, v, lam):
        return collapsed_bound(lam, v, noise, Statistics(G, c, stats.yy, sum_diag, n), gradients=False)

    # every entry at once, the spectrum (down to 1e-6) and v in logarithms
    check = check_named_gradients(
        value, {"G": stats.G, "c": stats.c, "sum_diag": 41.0, "v": v, "lam": lam},
        {"G": res.dG, "c": res.dc, "sum_diag": res.dsum_r2, "v": res.dv, "lam": res.dlam},
        symmetric=["G"], positive=["v", "lam"], rtol=1e-6, atol=1e-8)
    assert check.ok, str(check)


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_streaming_statistics_are_chunk_independent(chunk, rng):
    kernel = K.Matern(1.5, 1.0, bias=0.6, input_scale=np.array([1.0, 0.5, 2.0]))
    feats = HarmonicFeatures(3, dim=4)
    X = rng.normal(size=(301, 3))
    y = rng.normal(size=301)
    st = harmonic_statistics(kernel, feats, X, y, chunk_size=chunk)
    Phi = feats.Kuf(kernel, X).T
    assert np.allclose(st.G, Phi.T @ Phi, atol=1e-10)
    assert np.allclose(st.c, Phi.T @ y, atol=1e-11)
    assert np.isclose(st.sum_diag, np.sum(kernel.lift(X)[0] ** 2))
    assert st.n == 301 and np.isclose(st.yy, y @ y)


def test_uncollapsed_gradients(rng):
    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    v, noise, N = 2.5, 0.4, 100
    res = uncollapsed_bound(lam, v, noise, m, L, Phi, y, r2, N)
    check = check_named_gradients(
        lambda lam, v, noise, m, L: uncollapsed_bound(lam, v, noise, m, L, Phi, y, r2, N).value,
        {"lam": lam, "v": v, "noise": noise, "m": m, "L": L},
        {"lam": res.dlam, "v": res.dv, "noise": res.dnoise, "m": res.dm, "L": res.dL},
        positive=["lam", "v", "noise"], rtol=1e-6, atol=1e-7)
    assert check.ok, str(check)


@pytest.mark.parametrize("prior", ["features", "kernel"])
def test_uncollapsed_equals_collapsed_at_the_optimal_q(rng, prior):
    X, y = regression_data(rng, n=50)
    kernel = K.Matern(1.5, 0.9, bias=0.8)
    model = sl.VISH(kernel, 4, sl.likelihoods.Gaussian(0.07), prior=prior).fit(X, y, optimize=False)
    lam = model.features.Kuu_inverse_diag(kernel)
    Phi = model.features.Kuf(kernel, X).T
    noise = 0.07
    A = np.diag(1 / lam) + Phi.T @ Phi / noise
    Ainv = np.linalg.inv(A)
    m_opt = (Ainv @ (Phi.T @ y) / noise) / lam  # Lambda^-1 A^-1 c / noise
    S_opt = Ainv / np.outer(lam, lam)  # Lambda^-1 A^-1 Lambda^-1
    r2 = kernel.lift(X)[0] ** 2
    res = uncollapsed_bound(lam, kernel.at_one(), noise, m_opt, np.linalg.cholesky(S_opt), Phi, y, r2, len(y),
                            residual=prior == "kernel")
    assert np.isclose(res.value, model.elbo(), rtol=1e-10)
    assert np.allclose(res.dm, 0.0, atol=1e-6 * np.abs(m_opt).max())


def test_minibatch_estimate_is_unbiased(rng):
    """E over uniformly drawn minibatches of the N/B-scaled bound equals the full-data bound."""
    Phi, y, r2, lam, m, L = _svgp_problem(rng, n=24, M=4)
    full = uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi, y, r2, 24).value
    from itertools import combinations

    # exhaustive over every batch of size 3: the expectation exactly
    values = [uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi[list(b)], y[list(b)], r2[list(b)], 24).value
              for b in combinations(range(24), 3)]
    assert np.isclose(np.mean(values), full, rtol=1e-12)
    # and a plain Monte Carlo average over random batches, within 4 standard errors
    draws = [uncollapsed_bound(lam, 1.5, 0.3, m, L, Phi[idx], y[idx], r2[idx], 24).value
             for idx in (rng.choice(24, 6, replace=False) for _ in range(4000))]
    assert abs(np.mean(draws) - full) < 4 * np.std(draws) / np.sqrt(len(draws))


def test_whitened_uncollapsed_gradients(rng):
    from spherelab.bounds import uncollapsed_bound_whitened as ubw

    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    lam = lam * np.logspace(0, -4, lam.size)  # decaying spectrum
    args = dict(v=2.0, noise=0.3)
    res = ubw(lam, args["v"], args["noise"], m, L, Phi, y, r2, 80)
    check = check_named_gradients(
        lambda lam, m, L: ubw(lam, args["v"], args["noise"], m, L, Phi, y, r2, 80).value,
        {"lam": lam, "m": m, "L": L}, {"lam": res.dlam, "m": res.dm, "L": res.dL},
        positive=["lam"], rtol=1e-6, atol=1e-6)
    assert check.ok, str(check)


def test_general_bound_matches_gaussian_and_bernoulli_gradients(rng):
    from spherelab.bounds import uncollapsed_bound_general as ubg

    Phi, y, r2, lam, m, L = _svgp_problem(rng)
    gauss = sl.likelihoods.Gaussian(0.3)
    v = 50.0  # large enough that every marginal variance is positive, as for real features
    a = uncollapsed_bound(lam, v, 0.3, m, L, Phi, y, r2, 90)
    b = ubg(lam, v, gauss, m, L, Phi, y, r2, 90)
    assert np.isclose(a.value, b.value, rtol=1e-13)
    for x, z in [(a.dm, b.dm), (a.dL, b.dL), (a.dlam, b.dlam)]:
        assert np.allclose(x, z, rtol=1e-12, atol=1e-12)
    # Bernoulli: finite differences through the Gauss-Hermite expectations
    yb = (y > 0).astype(float)
    bern = sl.likelihoods.Bernoulli()
    res = ubg(lam, v, bern, m, L, Phi, yb, r2, 90)
    check = check_named_gradients(
        lambda lam, v, m, L: ubg(lam, v, bern, m, L, Phi, yb, r2, 90).value,
        {"lam": lam, "v": v, "m": m, "L": L}, {"lam": res.dlam, "v": res.dv, "m": res.dm, "L": res.dL},
        positive=["lam", "v"], rtol=1e-5, atol=1e-6)
    assert check.ok, str(check)


@pytest.mark.parametrize("residual", [True, False])
def test_uncollapsed_phi_gradients_against_finite_differences(residual, rng):
    from spherelab.bounds import uncollapsed_bound, uncollapsed_bound_general

    n, M = 12, 5
    Phi = rng.normal(size=(n, M))
    y = rng.normal(size=n)
    yb = (y > 0).astype(float)
    r2 = 1.0 + rng.random(n)
    lam = np.exp(rng.normal(size=M))
    m = rng.normal(size=M)
    L = np.tril(0.3 * rng.normal(size=(M, M))) + np.diag(0.5 + rng.random(M))
    cases = [
        lambda P, g=False: uncollapsed_bound(lam, 1.7, 0.3, m, L, P, y, r2, 30, residual, phi_gradient=g),
        lambda P, g=False: uncollapsed_bound_general(lam, 1.7, sl.likelihoods.Bernoulli(), m, L, P, yb, r2, 30,
                                                     residual, phi_gradient=g),
    ]
    for f in cases:
        check = check_named_gradients(lambda Phi: f(Phi).value, {"Phi": Phi}, {"Phi": f(Phi, True).dPhi},
                                      rtol=1e-6, atol=1e-7)
        assert check.ok, str(check)


def test_lift_stage_columns_kept_between_bound_and_gradient_equal_the_streamed_path(rng):
    """The lift stage's path (rows evaluated once, [K_uf^T, y] kept per chunk by lift_statistics
    and reused by lift_gradient) gives the bound and every gradient of the streamed path."""
    X = rng.standard_normal((300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(300)
    model = sl.VISH(sl.kernels.Matern(1.5, 1.0, bias=0.8, input_scale=np.array([1.5, 2.0, 2.5])), 4, chunk_size=64)
    model.fit(X, y, optimize=False)
    value, grad = model.elbo_and_gradient(X, y)
    ev = model.features.evaluate(model.kernel, X)
    stats = model._statistics(X, y, ev)
    assert len(stats.chunks) == 5 and stats.chunks[0].shape == (64, model.features.num_features + 1)
    value2, grad2 = model._bound(stats, lift=(X, y, ev))
    assert np.isclose(value, value2, rtol=1e-12)
    for name in grad:
        assert np.allclose(grad[name], grad2[name], rtol=1e-9, atol=1e-10 * np.max(np.abs(grad[name]))), name


@pytest.mark.parametrize("general", [False, True])
def test_minibatch_bounds_refuse_variances_float64_cannot_resolve(general, rng):
    """A row's variance under the kernel prior is r^2 v - Phi Lambda Phi^T + |Phi Lambda L|^2: where
    r^2 reaches 1e20 (a lift that inflates the norms) and the features explain all of it, the
    difference is rounding of up to ~1e6 nats at noise 1e-2, so the minibatch bounds (Gaussian, and
    any likelihood: Bernoulli here) raise NumericalFailure instead of returning it; the features prior, with no
    difference to take, still gives a finite bound."""
    from spherelab.bounds import uncollapsed_bound_general
    from spherelab.linalg import NumericalFailure

    n, M = 30, 3
    lam = np.full(M, 1.0 / M)  # v = sum(lam): the features hold all the prior variance

    def bound(r2, residual=True):
        Phi = np.zeros((n, M))
        Phi[:, 0] = np.sqrt(r2 * M)  # Phi_n Lambda Phi_n^T = r2 = r_n^2 v
        m, L, y = np.zeros(M), 1e-6 * np.eye(M), rng.normal(size=n)
        if general:
            return uncollapsed_bound_general(lam, 1.0, sl.likelihoods.Bernoulli(), m, L, Phi, (y > 0) * 1.0,
                                             np.full(n, r2), 3 * n, residual)
        return uncollapsed_bound(lam, 1.0, 1e-2, m, L, Phi, y, np.full(n, r2), 3 * n, residual)

    assert np.isfinite(bound(1.5).value)
    with pytest.raises(NumericalFailure, match="variances .* not resolved in float64"):
        bound(1e20)
    assert np.isfinite(bound(1e20, residual=False).value)
