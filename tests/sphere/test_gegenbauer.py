"""Gegenbauer engine against mpmath, closed forms and finite differences."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import spherelab as sl
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import eval_chebyt, eval_gegenbauer
from spherelab.testing import checkgrad

T_GRID = np.concatenate(
    [[-1.0, -0.999999, -0.95, -0.5, -0.1, 0.0, 0.1, 0.3, 0.7, 0.99, 0.999999, 1.0]]
)
DEGREES = [0, 1, 2, 3, 7, 30, 31, 64, 100, 199, 200]
DIMS = [3, 4, 5, 9, 10, 33, 64, 128]


def mp_gegenbauer(n: int, alpha: float, t: float) -> mpmath.mpf:
    """C_n^a(t) from the explicit power sum (DLMF 18.5.10) at 300 digits: independent of any
    recurrence, and exact enough to survive the cancellation of the sum at n = 200."""
    with mpmath.workdps(300):
        a = mpmath.mpf(alpha)
        x = 2 * mpmath.mpf(t)
        total = mpmath.mpf(0)
        for k in range(n // 2 + 1):
            total += (
                (-1) ** k
                * mpmath.rf(a, n - k)
                / (mpmath.factorial(k) * mpmath.factorial(n - 2 * k))
                * x ** (n - 2 * k)
            )
        return +total


@pytest.mark.parametrize("d", DIMS)
def test_gegenbauer_matches_mpmath(d):
    """|C_n^a(t) - reference| <= 1e-12 C_n^a(1) for n <= 200, d <= 128."""
    alpha = (d - 2) / 2
    n = np.array(DEGREES)[:, None]
    t = T_GRID[None, :]
    ours = sl.gegenbauer(n, alpha, t)
    worst = 0.0
    for i, nn in enumerate(DEGREES):
        c1 = float(mp_gegenbauer(nn, alpha, 1))
        for j, tt in enumerate(T_GRID):
            ref = float(mp_gegenbauer(nn, alpha, tt))
            worst = max(worst, abs(ours[i, j] - ref) / c1)
    assert worst <= 1e-12, worst


@pytest.mark.parametrize("d", [2, 3, 9, 128])
def test_tables_match_elementwise_and_mpmath(d):
    alpha = (d - 2) / 2
    L = 200
    P = sl.normalized_gegenbauer_table(L, alpha, T_GRID)
    assert P.shape == (T_GRID.size, L + 1)
    for n in [0, 1, 2, 50, 200]:
        for j, tt in enumerate(T_GRID):
            if d == 2:
                with mpmath.workdps(60):
                    ref = float(mpmath.chebyt(n, mpmath.mpf(tt)))
            else:
                ref = float(mp_gegenbauer(n, alpha, tt) / mp_gegenbauer(n, alpha, 1))
            assert abs(P[j, n] - ref) <= 1e-12
    if d > 2:
        C = sl.gegenbauer_table(60, alpha, T_GRID)
        assert np.allclose(C, sl.gegenbauer(np.arange(61), alpha, T_GRID[:, None]), rtol=1e-14)


def test_scipy_agreement_including_alpha_zero():
    t = np.linspace(-1, 1, 41)
    for alpha in [0.0, 0.5, 1.0, 2.5]:
        for n in range(0, 12):
            assert np.allclose(sl.gegenbauer(n, alpha, t), eval_gegenbauer(n, alpha, t), atol=1e-12)
    # the d = 2 Chebyshev limit of the normalised form
    P = sl.normalized_gegenbauer_table(25, 0.0, t)
    for n in range(26):
        assert np.allclose(P[:, n], eval_chebyt(n, t), atol=1e-13)


@pytest.mark.parametrize("d", [2, 3, 9, 128, 513, 1024])
def test_normalized_never_overflows(d):
    alpha = (d - 2) / 2
    t = np.linspace(-1, 1, 2001)
    P = sl.normalized_gegenbauer_table(200, alpha, t)
    assert np.all(np.isfinite(P))
    assert np.max(np.abs(P)) <= 1.0 + 1e-12
    assert np.allclose(P[[0, -1]], [[(-1.0) ** n for n in range(201)], np.ones(201)], atol=1e-12)
    if d >= 513:
        # relative accuracy where the polynomial is not tiny: compare with mpmath
        for n, tt in [(5, 0.3), (200, 0.999), (37, -0.8)]:
            ref = float(mp_gegenbauer(n, alpha, tt) / mp_gegenbauer(n, alpha, 1))
            got = sl.normalized_gegenbauer_table(n, alpha, np.array([tt]))[0, n]
            assert abs(got - ref) <= 1e-12 * max(abs(ref), 1e-300) + 1e-300


@pytest.mark.parametrize("d", [2, 3, 5, 9, 64])
def test_derivative_table(d):
    alpha = (d - 2) / 2
    L = 40
    t = np.array([-1.0, -0.9, -0.2, 0.0, 0.45, 0.99, 1.0])
    D = sl.normalized_gegenbauer_derivative_table(L, alpha, t)
    assert np.all(np.isfinite(D))
    # finite differences in the interior
    inner = np.array([-0.9, -0.2, 0.0, 0.45])
    Di = sl.normalized_gegenbauer_derivative_table(L, alpha, inner)
    for k, s in enumerate(inner):  # every degree's derivative at each interior point
        check = sl.testing.check_jacobian(lambda u: sl.normalized_gegenbauer_table(L, alpha, np.array([u]))[0], s,
                                          Di[k], rtol=1e-6, atol=1e-5 * np.abs(Di).max())
        assert check.ok, (s, str(check))
    # exact value at t = 1: P_n'(1) = n (n + 2a) / (2a + 1)
    n = np.arange(L + 1)
    assert np.allclose(D[-1], n * (n + 2 * alpha) / (2 * alpha + 1), rtol=1e-13)
    # against mpmath's derivative at one interior point
    with mpmath.workdps(40):
        for nn in [3, 17, 40]:
            if d == 2:
                f = lambda x: mpmath.chebyt(nn, x)  # noqa: E731
            else:
                f = lambda x: mpmath.gegenbauer(nn, alpha, x) / mpmath.gegenbauer(nn, alpha, 1)  # noqa: E731
            ref = float(mpmath.diff(f, mpmath.mpf("0.45")))
            assert abs(Di[3, nn] - ref) <= 1e-11 * max(1.0, abs(ref))


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(min_value=2, max_value=40),
    L=st.integers(min_value=0, max_value=60),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_clenshaw_equals_table_sum(d, L, seed):
    rng = np.random.default_rng(seed)
    alpha = (d - 2) / 2
    c = rng.normal(size=L + 1)
    t = rng.uniform(-1, 1, size=17)
    val, der = sl.gegenbauer_series(c, alpha, t, normalized=True, derivative=True)
    P = sl.normalized_gegenbauer_table(L, alpha, t)
    D = sl.normalized_gegenbauer_derivative_table(L, alpha, t)
    scale = np.abs(c).sum()
    assert np.allclose(val, P @ c, atol=1e-12 * scale)
    assert np.allclose(der, D @ c, atol=1e-10 * scale * max(1, L) ** 2)


def test_unnormalized_series_and_zonal():
    t = np.linspace(-1, 1, 9)
    c = np.array([0.3, -1.0, 0.25, 2.0])
    ref = sum(ci * eval_gegenbauer(n, 1.5, t) for n, ci in enumerate(c))
    assert np.allclose(sl.gegenbauer_series(c, 1.5, t), ref, atol=1e-13)
    for d in [2, 3, 6]:
        Z = sl.zonal_table(5, d, t)
        for ell in range(6):
            alpha = (d - 2) / 2
            exp = (
                2 * np.cos(ell * np.arccos(t))
                if (d == 2 and ell > 0)
                else (np.ones_like(t) if ell == 0 else (ell + alpha) / alpha * eval_gegenbauer(ell, alpha, t))
            )
            assert np.allclose(Z[:, ell], exp, atol=1e-12)
        assert np.allclose(Z[-1], [sl.num_harmonics(e, d) for e in range(6)])
        lam = 1.0 / (1.0 + np.arange(6)) ** 3
        v, g = sl.zonal_series(lam, d, t, derivative=True)
        assert np.allclose(v, Z @ lam, atol=1e-13)
        check = sl.testing.check_jacobian(lambda u: sl.zonal_series(lam, d, u), t[1:-1], np.diag(g[1:-1]),
                                          rtol=1e-6, atol=1e-7)
        assert check.ok, (d, str(check))


def test_shapes_and_scalars():
    assert isinstance(sl.gegenbauer(3, 1.0, 0.2), float)
    assert sl.gegenbauer([1, 2], 1.0, [[0.1], [0.2], [0.3]]).shape == (3, 2)
    assert sl.normalized_gegenbauer_table(4, 1.0, np.zeros((2, 3))).shape == (2, 3, 5)
    assert sl.gegenbauer_series([2.0], 1.0, np.zeros(3)).tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sl.gegenbauer(-1, 1.0, 0.5), "n must be"),
        (lambda: sl.gegenbauer(1.5, 1.0, 0.5), "n must be"),
        (lambda: sl.gegenbauer(2, -1.0, 0.5), "alpha"),
        (lambda: sl.gegenbauer(2, 1.0, np.nan), "t contains"),
        (lambda: sl.normalized_gegenbauer_table(-2, 1.0, [0.1]), "max_degree"),
        (lambda: sl.normalized_gegenbauer_table(3, np.inf, [0.1]), "alpha"),
        (lambda: sl.gegenbauer_series([], 1.0, [0.1]), "coeffs"),
        (lambda: sl.gegenbauer_series([1.0, np.inf], 1.0, [0.1]), "coeffs"),
        (lambda: sl.gegenbauer_series([1.0, 2.0], 0.0, [0.1]), "normalized=True"),
        (lambda: sl.zonal_table(3, 1, [0.1]), "dim"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("dim", [2, 3, 9])
@pytest.mark.parametrize("L", [0, 1, 6, 30])
def test_zonal_series_vjp_is_the_coefficient_gradient_of_the_series(dim, L, rng):
    """sum_i w_i Z_l(t_i): the table's contraction (without the table), and the gradient of
    <w, zonal_series(c, t)> in c by finite differences."""
    t = rng.uniform(-1, 1, (23, 31))
    w = rng.normal(size=t.shape)
    got = sl.zonal_series_vjp(w, dim, t, L)
    table = np.einsum("ij,ijl->l", w, sl.zonal_table(L, dim, t))
    assert np.allclose(got, table, rtol=1e-12, atol=1e-12 * np.abs(table).max())
    c = rng.normal(size=L + 1)
    check = checkgrad(lambda c: (float(np.sum(w * sl.zonal_series(c, dim, t))), got), c)
    assert check.ok, str(check)
    with pytest.raises(ValueError, match="weights must have the shape of t"):
        sl.zonal_series_vjp(w[:, :3], dim, t, L)


@pytest.mark.parametrize("call, words", [
    (lambda: sl.gegenbauer(5, 1.0, 1e300), "C_n\\^alpha\\(t\\) overflow"),
    (lambda: sl.normalized_gegenbauer_table(4, 1.0, [1e300]), "\\|t\\| up to 1e\\+300"),
    (lambda: sl.gegenbauer_table(400, 500.0, [0.3]), "C_n\\^alpha\\(1\\) for n <= 400, alpha = 500.0"),
])
def test_a_value_beyond_float64_is_an_error_not_an_inf(call, words):
    with pytest.raises(OverflowError, match=words):
        call()
