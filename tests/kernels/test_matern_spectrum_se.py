"""The squared-exponential (Matérn-inf) spectrum in closed form: against mpmath's Bessel functions,
positive at every level (the quadrature gave round-off of both signs below 1e-18), gradient."""

import mpmath as mp
import numpy as np
import pytest
import spherelab as sl


def _reference(lengthscale, dim, L):
    mp.mp.dps = 40
    a, z = mp.mpf(dim - 2) / 2, 1 / mp.mpf(lengthscale) ** 2
    if dim == 2:
        return [mp.e ** (-z) * mp.besseli(n, z) for n in range(L + 1)]
    return [mp.e ** (-z) * mp.gamma(a + 1) * (2 / z) ** a * mp.besseli(n + a, z) for n in range(L + 1)]


@pytest.mark.parametrize("dim", [2, 3, 6, 9, 17])
@pytest.mark.parametrize("lengthscale", [0.2, 1.0, 4.0])
def test_every_level_against_mpmath(dim, lengthscale):
    lam = sl.kernels.Matern(np.inf, lengthscale).spectrum(dim, 30)
    ref = np.array([float(v) for v in _reference(lengthscale, dim, 30)])
    assert np.all(lam > 0)
    np.testing.assert_allclose(lam, ref, rtol=1e-12)


def test_no_negative_level_where_quadrature_gave_round_off():
    lam = sl.kernels.Matern(np.inf, 1.0).spectrum(6, 30)
    assert np.all(lam > 0) and np.all(np.diff(lam) < 0)
    high = sl.kernels.Matern(np.inf, 0.5).spectrum(1024, 40)  # no overflow in any dimension
    assert np.all(np.isfinite(high)) and np.all(high >= 0) and high[0] > 0


def test_spectrum_sums_to_the_shape_at_one():
    k = sl.kernels.Matern(np.inf, 0.7, variance=2.0)
    lam = k.spectrum(3, 80)
    counts = np.array([sl.num_harmonics(n, 3) for n in range(81)], dtype=float)
    assert np.sum(lam * counts) == pytest.approx(k.at_one(), rel=1e-12)


def test_lengthscale_gradient_against_finite_differences():
    k = sl.kernels.Matern(np.inf, 1.3, variance=1.7)
    g = k.spectrum_gradients(5, 12)["lengthscale"]
    h = 1e-6
    fd = (sl.kernels.Matern(np.inf, 1.3 + h, variance=1.7).spectrum(5, 12)
          - sl.kernels.Matern(np.inf, 1.3 - h, variance=1.7).spectrum(5, 12)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-7)
