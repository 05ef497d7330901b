"""Spherical harmonics: addition theorem, orthonormality, span, parallel == serial, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import spherelab as sl
from conftest import reference_zonal, unit_rows
from hypothesis import given, settings
from hypothesis import strategies as st

# (dim, max_degree): every level up to max_degree is checked
ADDITION_CASES = [(2, 40), (3, 30), (4, 12), (5, 9), (9, 5), (17, 4)]


@pytest.mark.parametrize("dim, L", ADDITION_CASES)
def test_addition_theorem(dim, L, rng):
    """sum_j phi_lj(x) phi_lj(x') = Z_l(x.x') to 1e-11 at every level."""
    Y = sl.SphericalHarmonics(dim, L)
    X = unit_rows(rng.normal(size=(40, dim)))
    X[1] = X[0]  # the diagonal x = x'
    X[2] = -X[0]  # antipodal pair
    Phi = Y(X)
    gram = X @ X.T
    for ell in range(L + 1):
        block = Phi[:, Y.degree_slice(ell)]
        assert block.shape[1] == sl.num_harmonics(ell, dim)
        err = np.abs(block @ block.T - reference_zonal(ell, dim, gram)).max()
        assert err <= 1e-11, (ell, err)


@settings(max_examples=30, deadline=None)
@given(
    dim=st.integers(min_value=2, max_value=14),
    L=st.integers(min_value=0, max_value=4),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_addition_theorem_random_dims(dim, L, seed):
    rng = np.random.default_rng(seed)
    Y = sl.SphericalHarmonics(dim, L)
    X = unit_rows(rng.normal(size=(5, dim)))
    Phi = Y(X)
    for ell in range(L + 1):
        block = Phi[:, Y.degree_slice(ell)]
        assert np.allclose(block @ block.T, reference_zonal(ell, dim, X @ X.T), atol=1e-11)


@pytest.mark.parametrize("dim, L", [(2, 30), (3, 20), (4, 8), (5, 6)])
def test_orthonormal_exact_quadrature(dim, L):
    """Exact product quadrature (degree 2L) gives the identity Gram matrix."""
    X, w = sl.product_quadrature(dim, 2 * L)
    Phi = sl.SphericalHarmonics(dim, L)(X)
    gram = (Phi * w[:, None]).T @ Phi
    assert np.abs(gram - np.eye(gram.shape[0])).max() <= 1e-12


@pytest.mark.parametrize("dim, L, n", [(9, 3, 20_000), (17, 2, 20_000)])
def test_orthonormal_monte_carlo(dim, L, n, rng):
    """Monte Carlo Gram matrix within 6 standard errors (tolerance ~ 1/sqrt(N)) of the identity."""
    Phi = sl.SphericalHarmonics(dim, L)(sl.sample_sphere(n, dim, rng))
    gram = Phi.T @ Phi / n
    second = (Phi**2).T @ (Phi**2) / n  # E[phi_i^2 phi_j^2] estimates the variance scale
    stderr = np.sqrt(np.maximum(second - gram**2, 1e-300) / n)
    z = np.abs(gram - np.eye(gram.shape[0])) / stderr
    assert z.max() < 6.5, z.max()
    # and the plain tolerance statement: |G - I| = O(1/sqrt(N))
    assert np.abs(gram - np.eye(gram.shape[0])).max() < 30 / np.sqrt(n)


def test_circle_is_fourier_basis(rng):
    theta = rng.uniform(0, 2 * np.pi, size=50)
    X = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    Phi = sl.SphericalHarmonics(2, 6)(X)
    expected = [np.ones_like(theta)]
    for ell in range(1, 7):
        expected += [np.sqrt(2) * np.cos(ell * theta), np.sqrt(2) * np.sin(ell * theta)]
    assert np.allclose(Phi, np.stack(expected, axis=1), atol=1e-13)
    assert list(sl.SphericalHarmonics(2, 6).degrees) == [0] + [e for e in range(1, 7) for _ in (0, 1)]


def test_degree_one_is_scaled_coordinates(rng):
    for dim in [3, 5, 9]:
        X = unit_rows(rng.normal(size=(10, dim)))
        Y = sl.SphericalHarmonics(dim, 1)
        Phi = Y(X)
        assert np.allclose(Phi[:, 0], 1.0)
        lin = Phi[:, Y.degree_slice(1)] / np.sqrt(dim)
        # columns are the coordinates, in some order, with sign +1
        match = np.abs(lin.T @ X / 10)
        coeffs, *_ = np.linalg.lstsq(X, lin, rcond=None)
        assert np.allclose(np.abs(coeffs), np.round(np.abs(coeffs)), atol=1e-12)
        assert match.shape == (dim, dim)


def _real_scipy_harmonics(ell, theta, phi):
    """Real orthonormal (unnormalised measure) harmonics of degree ell from scipy."""
    from scipy import special

    cols = []
    for m in range(-ell, ell + 1):
        if hasattr(special, "sph_harm_y"):
            y = special.sph_harm_y(ell, abs(m), theta, phi)
        else:  # scipy < 1.15
            y = special.sph_harm(abs(m), ell, phi, theta)
        if m < 0:
            cols.append(np.sqrt(2) * y.imag)
        elif m == 0:
            cols.append(y.real)
        else:
            cols.append(np.sqrt(2) * y.real)
    return np.stack(cols, axis=1)


def test_d3_spans_scipy_harmonics(rng):
    """Per degree, our harmonics are an orthogonal rotation of scipy's (times sqrt(4 pi))."""
    L = 12
    X = unit_rows(rng.normal(size=(300, 3)))
    theta = np.arccos(np.clip(X[:, 2], -1, 1))  # polar
    phi = np.arctan2(X[:, 1], X[:, 0])  # azimuth
    Y = sl.SphericalHarmonics(3, L)
    Phi = Y(X)
    for ell in range(L + 1):
        ours = Phi[:, Y.degree_slice(ell)]
        ref = _real_scipy_harmonics(ell, theta, phi) * np.sqrt(4 * np.pi)
        A, *_ = np.linalg.lstsq(ref, ours, rcond=None)
        assert np.abs(ref @ A - ours).max() < 1e-10
        assert np.allclose(A.T @ A, np.eye(2 * ell + 1), atol=1e-10)


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 1001])
def test_parallel_equals_serial(n, rng):
    Y = sl.SphericalHarmonics(6, 4)
    X = unit_rows(rng.normal(size=(n, 6)))
    with sl.thread_limit(2):
        a = Y(X)
    with sl.thread_limit(1):
        b = Y(X)
    assert np.array_equal(a, b)
    out = np.full((n, Y.num_features), np.nan)
    Y(X, out=out)
    assert np.array_equal(out, a)


def test_values_bounded_by_addition_theorem(rng):
    """|phi_lj(x)| <= sqrt(N(l, d)): the construction never amplifies rounding."""
    for dim, L in [(3, 30), (9, 5), (40, 3), (200, 2)]:
        Y = sl.SphericalHarmonics(dim, L)
        X = unit_rows(rng.normal(size=(20, dim)))
        X[0] = np.eye(dim)[-1]  # north pole: every partial norm but the last vanishes
        X[1] = np.eye(dim)[0]
        Phi = Y(X)
        assert np.all(np.isfinite(Phi))
        bound = np.sqrt([sl.num_harmonics(int(e), dim) for e in Y.degrees])
        assert np.all(np.abs(Phi) <= bound * (1 + 1e-12))


def test_multi_indices_label_azimuthal_order(rng):
    """On S^2 the label (l, m) with cos/sin matches the azimuthal dependence cos(m phi)."""
    Y = sl.SphericalHarmonics(3, 6)
    mi, trig = Y.multi_indices, Y.trig
    assert mi.shape == (Y.num_features, 2)
    assert np.array_equal(mi[:, 0], Y.degrees)
    assert np.all(mi[:, 1] <= mi[:, 0])
    assert np.all(trig[mi[:, 1] == 0] == 0)
    # rotating about x_3 by psi mixes (cos m, sin m) pairs exactly like cos/sin of m psi
    psi = 0.37
    R = np.array([[np.cos(psi), -np.sin(psi), 0], [np.sin(psi), np.cos(psi), 0], [0, 0, 1]])
    X = unit_rows(rng.normal(size=(20, 3)))
    A, B = Y(X), Y(X @ R.T)
    for f in range(Y.num_features):
        ell, m = mi[f]
        if m == 0:
            assert np.allclose(B[:, f], A[:, f], atol=1e-12)
        elif trig[f] == 0:
            g = f + 1  # its sine partner
            assert mi[g].tolist() == [ell, m] and trig[g] == 1
            assert np.allclose(B[:, f], np.cos(m * psi) * A[:, f] - np.sin(m * psi) * A[:, g], atol=1e-12)
    for dim in [2, 5]:
        Yd = sl.SphericalHarmonics(dim, 4)
        assert Yd.multi_indices.shape == (Yd.num_features, dim - 1)
        assert np.all(np.diff(Yd.multi_indices, axis=1) <= 0)
        # labels are unique together with trig
        keys = {tuple(r) + (t,) for r, t in zip(Yd.multi_indices.tolist(), Yd.trig.tolist())}
        assert len(keys) == Yd.num_features


def test_attributes():
    Y = sl.SphericalHarmonics(9, 4)
    assert Y.num_features == 660
    assert np.all(np.diff(Y.degrees) >= 0)
    assert np.bincount(Y.degrees).tolist() == [1, 9, 44, 156, 450]
    assert Y.degree_slice(3) == slice(54, 210)
    assert "num_features=660" in repr(Y)
    assert sl.SphericalHarmonics(5, 0)(np.eye(5)).tolist() == [[1.0]] * 5


def test_large_dimension_low_degree(rng):
    Y = sl.SphericalHarmonics(1024, 2)
    X = unit_rows(rng.normal(size=(3, 1024)))
    Phi = Y(X)
    assert Phi.shape == (3, 1 + 1024 + sl.num_harmonics(2, 1024))
    block = Phi[:, Y.degree_slice(2)]
    assert np.allclose(block @ block.T, reference_zonal(2, 1024, X @ X.T), atol=1e-10)


@pytest.mark.parametrize(
    "make, X, match",
    [
        (lambda: sl.SphericalHarmonics(3, 2), np.array([[1.0, 1.0, 0.0]]), "unit vectors"),
        (lambda: sl.SphericalHarmonics(3, 2), np.zeros((2, 3)), "unit vectors"),
        (lambda: sl.SphericalHarmonics(3, 2), np.eye(4), "3 columns"),
        (lambda: sl.SphericalHarmonics(3, 2), np.array([[np.nan, 0, 1.0]]), "NaN"),
        (lambda: sl.SphericalHarmonics(3, 2), np.array([[np.inf, 0, 1.0]]), "NaN or infinite"),
        (lambda: sl.SphericalHarmonics(3, 2), np.array([0.0, 0.0, 1.0]), "2-d array"),
        (lambda: sl.SphericalHarmonics(3, 2), np.ones((2, 3, 1)), "2-d array"),
    ],
)
def test_bad_points(make, X, match):
    with pytest.raises(ValueError, match=match):
        make()(X)


def test_bad_construction():
    with pytest.raises(ValueError, match="max_degree"):
        sl.SphericalHarmonics(3, -1)
    with pytest.raises(ValueError, match="dim"):
        sl.SphericalHarmonics(1, 3)
    with pytest.raises(TypeError, match="dim"):
        sl.SphericalHarmonics("3", 3)
    with pytest.raises(ValueError, match=r"would produce [\d,]+ features"):
        sl.SphericalHarmonics(200, 12)
    with pytest.raises(ValueError, match="out must be"):
        sl.SphericalHarmonics(3, 1)(np.eye(3), out=np.empty((3, 5)))


def test_output_too_large_names_size():
    Y = sl.SphericalHarmonics(40, 4)  # 123,410 features
    X = np.zeros((10**6, 40))
    X[:, 0] = 1.0
    with pytest.raises(MemoryError, match="GiB"):
        Y(X)


@pytest.mark.slow
def test_works_with_read_only_cache_locations(tmp_path):
    """Import and evaluate when Numba can write no cache (read-only package, home, cache dir)."""
    code = textwrap.dedent(
        """
        import os
        if os.environ.get("SIMULATE_READ_ONLY_FS"):
            # root ignores permission bits, so emulate a read-only file system the way the
            # kernel reports it: every attempt to create the cache directory or file fails.
            import errno
            from numba.core import caching

            def read_only(self):
                raise OSError(errno.EROFS, "Read-only file system", self.get_cache_path())

            caching._CacheLocator.ensure_cache_path = read_only
        import numpy as np, spherelab as sl
        from spherelab.backend.jit import caching_enabled
        X = np.eye(4)
        Phi = sl.SphericalHarmonics(4, 3)(X)
        Z = sl.normalized_gegenbauer_table(3, 1.0, np.array([0.5]))
        assert abs(Z[0, 2] - (4 * 0.25 - 1) / 3) < 1e-15
        G = Phi[:, 1:5]
        assert np.allclose(G @ G.T, 4 * X @ X.T)
        print("cache:", caching_enabled("spherelab.sphere.harmonics_jit"))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA")}
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o555)
    env.update(HOME=str(readonly), XDG_CACHE_HOME=str(readonly), NUMBA_CACHE_DIR=str(readonly / "c"))
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if is_root:
        env["SIMULATE_READ_ONLY_FS"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    if is_root:
        assert "cache: False" in result.stdout
