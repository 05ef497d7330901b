"""Spectra without round-off posing as data: the squared-exponential (Matérn-inf) spectrum in closed form
(against mpmath), no negative level in any family, exact structural zeros, and the numerical floor
below which a level is noise (kernels and activations; the mismatch explorer draws only above it)."""

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
    check = sl.testing.check_jacobian(lambda ell: sl.kernels.Matern(np.inf, ell, variance=1.7).spectrum(5, 12), 1.3, g,
                                      rtol=1e-7, atol=0.0)
    assert check.ok, str(check)


FAMILIES = [lambda d: sl.kernels.ArcCosine(0), lambda d: sl.kernels.ArcCosine(1), lambda d: sl.kernels.ArcCosine(2),
            lambda d: sl.kernels.NTK(1), lambda d: sl.kernels.NTK(3), lambda d: sl.kernels.DeepArcCosine(3),
            lambda d: sl.kernels.Matern(0.5, 1.0), lambda d: sl.kernels.Matern(1.5, 0.3),
            lambda d: sl.kernels.Matern(2.5, 1.0), lambda d: sl.kernels.Matern(np.inf, 0.5),
            lambda d: sl.kernels.Matern(2.5, 300.0), lambda d: sl.kernels.IntrinsicMatern(d, 1.5, 1.0)]


@pytest.mark.parametrize("make", FAMILIES)
@pytest.mark.parametrize("dim", [3, 6, 9])
def test_no_spectrum_is_negative_and_its_floor_is_a_bound(make, dim):
    kernel = make(dim)
    lam, floor = kernel.spectrum(dim, 40), kernel.spectrum_floor(dim, 40)
    assert lam.shape == floor.shape == (41,)
    assert np.all(lam >= 0), np.flatnonzero(lam < 0)
    assert np.all(floor >= 0) and lam[0] > floor[0]


def test_the_one_layer_ntk_has_exact_zeros_at_odd_levels_from_three():
    lam = sl.kernels.NTK(1).spectrum(5, 21)
    assert np.all(lam[3::2] == 0.0) and np.all(lam[:3] > 0) and np.all(lam[4::2] > 0)
    assert np.all(sl.kernels.NTK(2).spectrum(5, 21) > 0)  # composition breaks the symmetry


def test_the_floor_marks_round_off_not_data():
    matern = sl.kernels.Matern(1.5, 1.0)
    lam, floor = matern.spectrum(3, 30), matern.spectrum_floor(3, 30)
    assert np.all(lam > 100 * floor)  # polynomial decay: every level is data
    assert np.all(sl.kernels.ArcCosine(1).spectrum_floor(4, 10) == 0)  # closed form
    truncated = sl.kernels.Truncated(matern, 3, 5)
    assert np.all(truncated.spectrum_floor(3, 8)[6:] == 0) and np.all(truncated.spectrum_floor(3, 8)[:6] > 0)


def test_activation_floors_mark_the_round_off_of_smooth_units():
    swish = sl.activations.Swish()
    c, floor = swish.coefficients(9, 40), swish.coefficients_floor(9, 40)
    assert np.all(floor >= 0) and np.all(np.abs(c[:10:2]) > floor[:10:2])  # odd levels >= 3: exact zeros
    noise = [l for l in range(41) if c[l] != 0 and abs(c[l]) <= floor[l]]
    assert noise and min(noise) > 10  # geometric decay reaches the rounding floor, late
    assert np.all(sl.activations.ReLU().coefficients_floor(9, 40) == 0)  # closed form


def test_the_mismatch_explorer_draws_no_round_off():
    from spherelab.explore import MismatchExplorer

    explorer = MismatchExplorer({"SE": lambda d: sl.kernels.Matern(np.inf, 1.0), "NTK": lambda d: sl.kernels.NTK(1)},
                                {"swish": sl.activations.Swish()}, kernel="NTK", activation="swish", dim=9, levels=40)
    lam_floor = sl.kernels.NTK(1).spectrum_floor(9, 40)
    sig, sig_floor = sl.activations.Swish().coefficients(9, 40), sl.activations.Swish().coefficients_floor(9, 40)
    drawn = explorer.a_line.get_data()[1]
    assert np.all(np.isnan(drawn[np.abs(sig) <= sig_floor]))
    kdrawn = explorer.k_line.get_data()[1]
    assert np.all(np.isnan(kdrawn[3::2]))  # the one-layer NTK's exact zeros
    assert np.all(kdrawn[np.isfinite(kdrawn)] ** 2 > lam_floor[np.isfinite(kdrawn)])


@pytest.mark.parametrize("lengthscale", [7.276405219999932e-05, 1e-3])
def test_a_very_short_lengthscale_is_integrated_without_warning(lengthscale, recwarn):
    """An optimiser's trial point reached lengthscale 7e-5: the spike at t = 1 is now split out of
    the quadrature's interval. On the circle the low levels tend to the spike's integral,
    lambda -> lengthscale * 8 / (3 pi sqrt 5) for Matérn-5/2."""
    lam = sl.kernels.Matern(2.5, lengthscale).spectrum(2, 4)
    assert not [w for w in recwarn if "funk_hecke" in str(w.message)]
    np.testing.assert_allclose(lam[0], lengthscale * 8 / (3 * np.pi * np.sqrt(5)), rtol=1e-3)


def test_a_lengthscale_below_float_resolution_of_t_still_integrates():
    lam = sl.kernels.Matern(1.5, 1e-12).spectrum(3, 3)
    assert np.all(np.isfinite(lam)) and np.all(lam >= 0)


@pytest.mark.parametrize("lengthscale", [0.01, 1e-4, 1e-7])
def test_short_squared_exponential_lengthscales_against_mpmath(lengthscale):
    """z = 1 / l^2 up to 1e14: the Bessel series would need z terms (it ran out of memory); the
    scaled Bessel function serves there, to the same accuracy."""
    for dim in (3, 9):
        lam = sl.kernels.Matern(np.inf, lengthscale).spectrum(dim, 12)
        ref = np.array([float(v) for v in _reference(lengthscale, dim, 12)])
        np.testing.assert_allclose(lam, ref, rtol=1e-12)


def test_matern_spectra_reuse_their_quadrature_rule_across_lengthscales():
    """Breakpoints only for very short lengthscales, snapped to powers of two: an optimiser's
    lengthscale steps do not build a new rule each (that cost 20x per spectrum)."""
    assert sl.kernels.Matern(1.5, 0.3).breakpoints == ()
    assert sl.kernels.Matern(2.5, 1e-3).breakpoints == sl.kernels.Matern(2.5, 0.9e-3).breakpoints != ()


@pytest.mark.parametrize("dim", [2, 3, 9, 65])
def test_squared_exponential_lengthscale_gradient_against_mpmath(dim):
    """Every level's d lambda / d lengthscale within 1e-12 of mpmath from lengthscale 1e-7 to 1e3: the
    form -1 + I_{nu+1}/I_nu lost log10(z) digits (3.8 % at 1e-7); 1 - I_{nu+1}/I_nu is now summed
    without the subtraction (kernels.bessel)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    a = mp.mpf(dim - 2) / 2
    for ell in np.geomspace(1e-7, 1e3, 9):
        grad = sl.kernels.Matern(np.inf, float(ell)).spectrum_gradients(dim, 12)["lengthscale"]
        z = 1 / mp.mpf(float(ell)) ** 2
        for n in range(13):
            ratio = mp.besseli(n + a + 1, z) / mp.besseli(n + a, z)
            lam = mp.e ** (-z) * mp.gamma(a + 1) * (2 / z) ** a * mp.besseli(n + a, z)
            exact = float(lam * (n / z - 1 + ratio) * (-2 * z / mp.mpf(float(ell))))
            if lam > mp.mpf(10) ** -290:  # levels below the smallest float are 0 in both
                assert abs(grad[n] - exact) <= 1e-12 * abs(exact), (ell, n, grad[n], exact)
