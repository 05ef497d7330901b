"""Constants: counts of harmonics, sphere areas, Funk-Hecke constant, C_n(1) in log space."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import spherelab as sl
from spherelab.sphere.special import alpha_of_dim


def closed_form_count(ell: int, d: int) -> int:
    """(2l + d - 2)/l * binom(l + d - 3, l - 1) from seed 000 eq. (A.4), in exact rationals."""
    if ell == 0:
        return 1
    from fractions import Fraction

    value = Fraction(2 * ell + d - 2, ell) * math.comb(ell + d - 3, ell - 1)
    assert value.denominator == 1
    return int(value)


@pytest.mark.parametrize("d", [2, 3, 4, 5, 9, 17, 64, 1024])
def test_num_harmonics_matches_closed_form(d):
    for ell in range(0, 40):
        assert sl.num_harmonics(ell, d) == closed_form_count(ell, d)


def test_num_harmonics_known_values():
    assert [sl.num_harmonics(ell, 9) for ell in range(5)] == [1, 9, 44, 156, 450]
    assert [sl.cumulative_num_harmonics(ell, 9) for ell in range(5)] == [1, 10, 54, 210, 660]
    assert [sl.num_harmonics(ell, 3) for ell in range(4)] == [1, 3, 5, 7]
    assert [sl.num_harmonics(ell, 2) for ell in range(4)] == [1, 2, 2, 2]
    assert sl.num_harmonics(4, 17) == 4692


def test_cumulative_is_sum_and_array_form():
    for d in [2, 3, 5, 12]:
        for L in range(0, 12):
            assert sl.cumulative_num_harmonics(L, d) == sum(
                sl.num_harmonics(e, d) for e in range(L + 1)
            )
    arr = sl.num_harmonics(np.arange(6), 5)
    assert arr.dtype == np.int64
    assert list(arr) == [sl.num_harmonics(e, 5) for e in range(6)]


def test_log_num_harmonics_no_overflow():
    for d in [2, 3, 9, 128, 1024, 10_000]:
        for ell in [0, 1, 2, 7, 50, 300]:
            logn = sl.log_num_harmonics(ell, d)
            assert np.isfinite(logn)
            exact = sl.num_harmonics(ell, d)
            assert math.isclose(logn, math.log(exact), rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("d", [2, 3, 4, 9, 100, 1024])
def test_omega_and_areas_against_mpmath(d):
    mpmath.mp.dps = 30

    def area(k):  # surface area of S^k
        return 2 * mpmath.pi ** (mpmath.mpf(k + 1) / 2) / mpmath.gamma(mpmath.mpf(k + 1) / 2)

    assert math.isclose(sl.log_sphere_area(d - 1), float(mpmath.log(area(d - 1))), rel_tol=1e-13)
    expected = float(mpmath.log(area(d - 2) / area(d - 1)))
    assert math.isclose(sl.log_omega(d), expected, rel_tol=1e-12, abs_tol=1e-13)


def test_omega_circle_and_sphere():
    assert math.isclose(math.exp(sl.log_omega(2)), 1 / math.pi)
    assert math.isclose(math.exp(sl.log_omega(3)), 0.5)
    assert alpha_of_dim(2) == 0.0 and alpha_of_dim(9) == 3.5


def test_log_gegenbauer_at_one():
    mpmath.mp.dps = 40
    for n in [0, 1, 5, 200]:
        for a in [0.5, 1.0, 3.5, 63.0, 511.0]:
            ref = float(mpmath.log(mpmath.gegenbauer(n, a, 1)))
            assert math.isclose(sl.log_gegenbauer_at_one(n, a), ref, rel_tol=1e-12, abs_tol=1e-12)
    assert sl.log_gegenbauer_at_one(0, 0.0) == 0.0
    assert sl.log_gegenbauer_at_one(3, 0.0) == -np.inf


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sl.num_harmonics(-1, 3), "degree"),
        (lambda: sl.num_harmonics(2, 1), "dim"),
        (lambda: sl.num_harmonics(2.5, 3), "degree"),
        (lambda: sl.cumulative_num_harmonics(3, 0), "dim"),
        (lambda: sl.log_gegenbauer_at_one(2, -0.5), "alpha"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("d", [2, 3, 9, 100, 258, 259, 1024, 10**6, 10**9, 10**12])
def test_log_num_harmonics_at_huge_degrees_against_mpmath(d):
    """Every dimension and degree to a few ulps: the beta function by Stirling's series, no difference of
    two large log-gammas (that difference was 4e-8 off at d = 1e9, l = 1; 1e-9 at l = 1e9, d = 3)."""
    mpmath.mp.dps = 40
    for ell in [1, 2, 7, 300, 10**6, 10**9, 10**12]:
        exact = mpmath.log((2 * ell + d - 2) * mpmath.binomial(ell + d - 3, d - 2) / ell)
        assert math.isclose(sl.log_num_harmonics(ell, d), float(exact), rel_tol=4e-15), (d, ell)
    reals = np.array([1.5, 2.5, 9.99, 10.01, 123.25, 1e7 + 0.5])
    got = sl.log_num_harmonics(reals, d, real=True)
    for ell, value in zip(reals, got):
        ell = mpmath.mpf(ell)
        exact = mpmath.log((2 * ell + d - 2) / ell) + mpmath.loggamma(ell + d - 2) - mpmath.loggamma(ell) \
            - mpmath.loggamma(d - 1)
        assert math.isclose(value, float(exact), rel_tol=4e-15), (d, ell)


def test_log_num_harmonics_continued_to_real_degrees():
    ell = np.array([0.0, 1.0, 2.0, 2.5, 7.0, 1e6 + 0.5])
    got = sl.log_num_harmonics(ell, 5, real=True)
    assert got[0] == 0.0 and np.allclose(got[[1, 2, 4]], np.log([sl.num_harmonics(e, 5) for e in (1, 2, 7)]))
    assert got[2] < got[3] < got[4]  # increasing between the integers
    with pytest.raises(ValueError, match="integer"):
        sl.log_num_harmonics(2.5, 5)
    with pytest.raises(ValueError, match=">= 0"):
        sl.log_num_harmonics(-0.5, 5, real=True)
