"""Phase-truncated harmonics (seed 004): orthonormality, span, VJPs, errors."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.features import greedy_directions
from spherelab.sphere.gegenbauer import zonal_table
from spherelab.testing import check_named_gradients


def _sphere(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("dim,L,P", [(3, 6, 3), (3, 4, 20), (5, 4, 7)])
def test_orthonormal_by_exact_quadrature(dim, L, P):
    # the product rule integrates degree-2L polynomials exactly: an independent check of
    # <phi_i, phi_j> = delta_ij within and across degrees
    F = sl.PhaseTruncatedHarmonics(dim, L, P, seed=3)
    pts, w = sl.product_quadrature(dim, 2 * L)
    Phi = F(pts)
    gram = Phi.T @ (Phi * w[:, None])
    assert np.abs(gram - np.eye(F.num_features)).max() < 1e-11


@pytest.mark.parametrize("dim,L,P", [(4, 5, 6), (9, 3, 40), (17, 3, 50)])
def test_within_reference_harmonic_space(dim, L, P, rng):
    # each block is Q^T phi_l with Q orthonormal columns: inside H_l, orthonormal
    F = sl.PhaseTruncatedHarmonics(dim, L, P, seed=1)
    X = _sphere(rng, 3 * sl.num_harmonics(L, dim) + 200, dim)
    for ell in range(L + 1):
        Q = F.projection_check(ell, X)
        assert np.abs(Q - np.eye(F.phases[ell])).max() < 1e-10, ell


def test_all_phases_satisfy_the_addition_theorem(rng):
    dim, L = 4, 5
    F = sl.PhaseTruncatedHarmonics(dim, L, 10_000, seed=2)
    assert F.num_features == sl.cumulative_num_harmonics(L, dim)
    X, Y = _sphere(rng, 30, dim), _sphere(rng, 20, dim)
    PX, PY = F(X), F(Y)
    Z = zonal_table(L, dim, np.clip(X @ Y.T, -1, 1))
    for ell in range(L + 1):
        s = F.degree_slice(ell)
        assert np.allclose(PX[:, s] @ PY[:, s].T, Z[..., ell], atol=1e-10), ell


def test_high_dimension_counts_and_speed():
    F = sl.PhaseTruncatedHarmonics(17, 10, 100)
    assert F.phases[:3] == [1, 17, 100] and F.num_features == 918
    assert np.array_equal(F.degrees[:19], [0] + [1] * 17 + [2])


def test_vjp_directions_against_finite_differences(rng):
    F = sl.PhaseTruncatedHarmonics(4, 4, 5, seed=0)
    F.set_params(F.get_params() * rng.uniform(0.5, 2.0, F.get_params().size))  # unnormalised rows
    X = _sphere(rng, 9, 4)
    G = rng.standard_normal((9, F.num_features))
    gp, _ = F.vjp(X, G)
    p = F.get_params()

    def value(directions):
        F.set_params(directions)
        return float(np.sum(G * F(X)))

    check = check_named_gradients(value, {"directions": p}, {"directions": gp}, rtol=1e-6, atol=1e-7)
    F.set_params(p)
    assert check.ok, str(check)
    F.set_params(p)


def test_vjp_points_along_tangents(rng):
    F = sl.PhaseTruncatedHarmonics(3, 5, 4, seed=4)
    X = _sphere(rng, 6, 3)
    G = rng.standard_normal((6, F.num_features))
    _, dX = F.vjp(X, G)
    for n in range(6):
        t = rng.standard_normal(3)
        t -= (t @ X[n]) * X[n]

        def along(e, n=n, t=t):  # moving X[n] on the sphere along the tangent t
            Y = X.copy()
            Y[n] = (X[n] + e * t) / np.linalg.norm(X[n] + e * t)
            return float(np.sum(G * F(Y)))

        check = check_named_gradients(along, {"e": 0.0}, {"e": float(dX[n] @ t)}, rtol=1e-6, atol=1e-7)
        assert check.ok, (n, str(check))


def test_as_inducing_features():
    F = sl.PhaseTruncatedHarmonics(3, 4, 3)
    k = K.Matern(1.5, 0.8, bias=0.7)
    assert np.allclose(F.Kuu_inverse_diag(k), k.spectrum(3, 4)[F.degrees])
    X = np.random.default_rng(0).standard_normal((5, 2))
    r, Xh = k.lift(X)
    assert np.allclose(F.Kuf(k, X), (F(Xh) * r[:, None]).T)


def test_greedy_directions_are_well_conditioned(rng):
    V = greedy_directions(5, 3, 11, rng)  # N(5, 3) = 11: a full fundamental system
    G = zonal_table(5, 3, np.clip(V @ V.T, -1, 1))[..., 5]
    assert np.linalg.cond(G) < 1e3


def test_bad_input(rng):
    F = sl.PhaseTruncatedHarmonics(3, 2, 3)
    with pytest.raises(ValueError, match="unit vectors"):
        F(np.ones((2, 3)))
    with pytest.raises(ValueError, match="3 columns"):
        F(_sphere(rng, 2, 4))
    with pytest.raises(ValueError, match="directions\\[1\\] must have shape"):
        F.set_directions([np.ones((1, 3)), np.ones((2, 3)), np.ones((3, 3))])
    bad = [V.copy() for V in F.directions]
    bad[2][1] = 0.0
    with pytest.raises(ValueError, match="zero row"):
        F.set_directions(bad)
    bad = [V.copy() for V in F.directions]
    bad[2][1] = -bad[2][0]  # antipodal: the same even zonal function
    F.set_directions(bad)
    with pytest.raises(np.linalg.LinAlgError, match="degree-2 Gram matrix"):
        F(_sphere(rng, 2, 3))
    with pytest.raises(ValueError, match="max_phases"):
        sl.PhaseTruncatedHarmonics(3, 2, 0)
    with pytest.raises(ValueError, match="G must have shape"):
        sl.PhaseTruncatedHarmonics(3, 2, 3).vjp(_sphere(rng, 2, 3), np.ones((2, 2)))
