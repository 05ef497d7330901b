"""Spectra of kernels and activations: paper tables, mpmath, sum rules, gradients."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import spherelab as sl
from spherelab import activations as acts
from spherelab import kernels as K
from spherelab.sphere.funk_hecke import funk_hecke
from spherelab.testing import check_jacobian

# seed 000, Table B.1 (arc-cosine order 1) and Table B.2 (ReLU), "analytical" columns, d = 3, 5, 7
TABLE_B1 = {
    3: ["0.375", "0.167", "0.0234", "0", "0.000651", "0", "9.16e-05", "0", "2.29e-05", "0"],
    5: ["0.352", "0.1", "0.00977", "0", "0.000153", "0", "1.37e-05", "0", "2.38e-06", "0"],
    7: ["0.342", "0.0714", "0.00534", "0", "5.34e-05", "0", "3.34e-06", "0", "4.26e-07", "0"],
}


TABLE_B2 = {
    3: ["0.25", "0.167", "0.0625", "0", "-0.0104", "0", "0.00391", "0", "-0.00195", "0"],
    5: ["0.188", "0.1", "0.0312", "0", "-0.00391", "0", "0.00117", "0", "-0.000488", "0"],
    7: ["0.156", "0.0714", "0.0195", "0", "-0.00195", "0", "0.000488", "0", "-0.000174", "0"],
}


def printed_half_unit(text: str) -> float:
    """Half a unit in the last printed digit of a number like '0.00977' or '9.16e-05'."""
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def mp_funk_hecke(shape_mp, d: int, ell: int, split: bool) -> float:
    """omega_d * int_0^pi s(cos th) P_l(cos th) sin^(d-2) th dth at 30 digits (mpmath)."""
    with mpmath.workdps(30):
        a = mpmath.mpf(d - 2) / 2
        omega = mpmath.gamma(mpmath.mpf(d) / 2) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(mpmath.mpf(d - 1) / 2))

        def P(t):
            if d == 2:
                return mpmath.chebyt(ell, t)
            return mpmath.gegenbauer(ell, a, t) / mpmath.gegenbauer(ell, a, 1)

        f = lambda th: shape_mp(mpmath.cos(th)) * P(mpmath.cos(th)) * mpmath.sin(th) ** (d - 2)  # noqa: E731
        pts = [0, mpmath.pi / 2, mpmath.pi] if split else [0, mpmath.pi]
        return float(omega * mpmath.quad(f, pts))


MP_SHAPES = {
    "relu": (lambda t: max(t, 0), acts.ReLU(), True),
    "softplus3": (lambda t: mpmath.log(1 + mpmath.exp(3 * t)) / 3, acts.Softplus(3.0), False),
    "erf": (lambda t: mpmath.erf(2 * t), acts.Erf(2.0), False),
    "arccos1": (
        lambda t: (mpmath.sqrt(1 - t * t) + t * (mpmath.pi - mpmath.acos(t))) / mpmath.pi,
        K.ArcCosine(1),
        False,
    ),
    "arccos2": (
        lambda t: (3 * mpmath.sqrt(1 - t * t) * t + (mpmath.pi - mpmath.acos(t)) * (1 + 2 * t * t)) / (3 * mpmath.pi),
        K.ArcCosine(2),
        False,
    ),
    "matern32": (
        lambda t: (1 + mpmath.sqrt(3) * mpmath.sqrt(2 - 2 * t) / mpmath.mpf("0.7"))
        * mpmath.exp(-mpmath.sqrt(3) * mpmath.sqrt(2 - 2 * t) / mpmath.mpf("0.7")),
        K.Matern(1.5, 0.7),
        False,
    ),
    "ntk2": (None, K.NTK(2), False),
}


ALL_KERNELS = [
    K.ArcCosine(0),
    K.ArcCosine(1),
    K.ArcCosine(2),
    K.DeepArcCosine(3),
    K.NTK(1),
    K.NTK(3),
    K.Matern(0.5, 0.7),
    K.Matern(1.5, 1.3),
    K.Matern(2.5, 0.4),
    K.Matern(np.inf, 0.8),
]


def _with(kernel, name, value):
    import copy

    k = copy.copy(kernel)
    setattr(k, name, value)
    return k


PARAM_KERNELS = [
    (K.Matern(0.5, 0.8, variance=1.3), ["lengthscale", "variance"]),
    (K.Matern(1.5, 0.8, variance=1.3), ["lengthscale", "variance"]),
    (K.Matern(2.5, 1.1), ["lengthscale", "variance"]),
    (K.Matern(np.inf, 0.6), ["lengthscale", "variance"]),
    (K.IntrinsicMatern(4, 2.5, 0.7), ["lengthscale", "variance"]),
    (K.IntrinsicMatern(3, np.inf, 0.5), ["lengthscale"]),
    (K.PolynomialDecay(3, 4.5, variance=0.7), ["beta", "variance"]),
    (K.ArcCosine(1, variance=2.0), ["variance"]),
]


@pytest.mark.parametrize("d", [3, 5, 7])
def test_seed000_tables_every_printed_digit(d):
    lam = K.ArcCosine(1).spectrum(d, 9)
    sig = acts.ReLU().coefficients(d, 9)
    for ell in range(10):
        for ours, printed in [(lam[ell], TABLE_B1[d][ell]), (sig[ell], TABLE_B2[d][ell])]:
            if printed == "0":
                assert ours == 0.0  # structural zero, exactly
            else:
                # the paper rounds half-way cases either way (0.03125 -> "0.0312")
                assert abs(ours - float(printed)) <= printed_half_unit(printed) * (1 + 1e-9)


@pytest.mark.parametrize("name", [n for n in MP_SHAPES if MP_SHAPES[n][0] is not None])
@pytest.mark.parametrize("d", [2, 3, 4, 6, 9])
def test_against_mpmath_funk_hecke(name, d):
    shape_mp, obj, split = MP_SHAPES[name]
    L = 8
    ours = obj.coefficients(d, L) if isinstance(obj, acts.Activation) else obj.spectrum(d, L)
    for ell in range(L + 1):
        ref = mp_funk_hecke(shape_mp, d, ell, split)
        if ours[ell] == 0.0:
            assert abs(ref) < 1e-14  # a structural zero is a true zero
        else:
            assert abs(ours[ell] - ref) <= 1e-10 * abs(ref), (ell, ours[ell], ref)


@pytest.mark.parametrize("kernel", ALL_KERNELS, ids=repr)
@pytest.mark.parametrize("d", [2, 3, 4, 5, 9, 17])
def test_spectra_non_negative(kernel, d):
    lam = kernel.spectrum(d, 40)
    assert np.all(lam >= -1e-15 * lam[0]), lam.min()


@pytest.mark.parametrize("d", [2, 3, 5, 9])
def test_spectral_kernels_non_negative_and_normalised(d):
    for kernel in [K.IntrinsicMatern(d, 1.5, 0.6), K.IntrinsicMatern(d, np.inf, 0.5),
                   K.PolynomialDecay(d, d + 1.5)]:
        lam = kernel.spectrum(d, 30)
        assert np.all(lam > 0)
        deg, tail = kernel.shape_truncation()
        assert abs(float(kernel.shape(np.ones(1))[0]) - 1.0) <= max(tail, 0) + 1e-12


@pytest.mark.parametrize(
    "shape, d, L, parity",
    [
        (K.Matern(np.inf, 0.8).shape, 3, 80, None),
        (K.Matern(np.inf, 0.5).shape, 6, 80, None),
        (acts.Softplus(3.0).shape, 3, 120, "even_plus_linear"),
        (acts.Erf(1.5).shape, 5, 60, "odd"),
        (lambda t: np.exp(2 * t), 9, 20, None),  # beyond ~20, N(l, 9) amplifies 1e-19 noise
        (lambda t: np.cos(3 * t), 2, 60, "even"),
    ],
)
def test_sum_rule(shape, d, L, parity):
    """sum_l c_l N(l, d) = s(1) for shapes whose series converges fast."""
    c = funk_hecke(shape, d, L, parity=parity)
    counts = np.array([float(sl.num_harmonics(e, d)) for e in range(L + 1)])
    assert abs((c * counts).sum() - float(shape(np.ones(1))[0])) < 1e-12


@pytest.mark.parametrize("kernel", [K.ArcCosine(0), K.ArcCosine(1), K.ArcCosine(2), K.NTK(2),
                                    K.Matern(1.5, 1.0), K.DeepArcCosine(2)], ids=repr)
@pytest.mark.parametrize("d", [3, 5])
def test_mercer_reconstruction_improves_with_level(kernel, d):
    t = np.linspace(-1, 1, 201)
    errors = []
    for L in [2, 4, 8, 16, 32, 64]:
        errors.append(np.abs(sl.zonal_series(kernel.spectrum(d, L), d, t) - kernel.shape(t)).max())
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.05 * errors[0]


def test_structural_zeros_are_exact():
    for d in [2, 3, 4, 7]:
        lam = K.ArcCosine(1).spectrum(d, 21)
        assert np.all(lam[3::2] == 0.0)
        for a in [acts.ReLU(), acts.Softplus(3.0), acts.Swish()]:
            assert np.all(a.coefficients(d, 21)[3::2] == 0.0)
        assert np.all(acts.Erf().coefficients(d, 21)[0::2] == 0.0)
        assert np.all(acts.Step().coefficients(d, 21)[2::2] == 0.0)


def test_relu_closed_form_matches_quadrature():
    for d in [2, 3, 4, 8, 33, 128]:
        closed = acts.ReLU().coefficients(d, 30)
        quad = funk_hecke(acts.ReLU().shape, d, 30, kinks=[0.0], parity="even_plus_linear")
        assert np.allclose(closed, quad, rtol=1e-12, atol=1e-15)


def test_error_estimate_and_methods():
    c, err = funk_hecke(lambda t: np.exp(t), 5, 10, return_error=True)
    assert err.shape == (11,) and np.all(err < 1e-14)
    g = funk_hecke(lambda t: t**3 - t, 5, 6, method="gegenbauer", num_nodes=8)
    a = funk_hecke(lambda t: t**3 - t, 5, 6)
    assert np.allclose(g, a, atol=1e-15)
    assert np.all(np.abs(g[4:]) < 1e-15)  # a cubic has no levels above 3


@pytest.mark.parametrize("method", ["angle", "gegenbauer"])
def test_a_shape_of_the_gap_is_the_same_integral(method):
    """``of_gap=True``: the shape as a function of u = 1 - t gives the coefficients of s(t) = f(1 - t),
    and the rule's gaps are 1 - nodes to the rounding of the nodes (which is all they add)."""
    from spherelab.sphere.funk_hecke import funk_hecke_rule

    kw = dict(kinks=[0.5], method=method)
    by_t = funk_hecke(lambda t: np.exp(2.0 * t) * np.sqrt(2.0 - 2.0 * t), 5, 8, **kw)
    by_u = funk_hecke(lambda u: np.exp(2.0 - 2.0 * u) * np.sqrt(2.0 * u), 5, 8, of_gap=True, **kw)
    np.testing.assert_allclose(by_u, by_t, rtol=1e-13, atol=1e-15)
    rule = funk_hecke_rule(5, 8, 64, **kw)
    np.testing.assert_allclose(rule.gaps, 1.0 - rule.nodes, rtol=0, atol=4e-16)
    with pytest.raises(TypeError, match="of_gap"):
        funk_hecke(np.exp, 3, 4, of_gap="yes")


@pytest.mark.parametrize("kernel, names", PARAM_KERNELS, ids=lambda x: repr(x)[:40])
def test_shape_and_spectrum_gradients(kernel, names):
    d = getattr(kernel, "dim", 4)
    t = np.linspace(-0.95, 0.9, 9)
    sg = kernel.shape_gradients(t)
    lg = kernel.spectrum_gradients(d, 12)
    for name in names:
        v = getattr(kernel, name)
        shape = check_jacobian(lambda p: _with(kernel, name, p).shape(t), v, sg[name], rtol=1e-6, atol=1e-9)
        assert shape.ok, (name, str(shape))
        spec = check_jacobian(lambda p: _with(kernel, name, p).spectrum(d, 12), v, lg[name], rtol=1e-5,
                              atol=1e-12 * np.abs(lg[name]).max())
        assert spec.ok, (name, str(spec))


@pytest.mark.parametrize("kernel", ALL_KERNELS + [K.IntrinsicMatern(3, 1.5, 0.9), K.PolynomialDecay(3, 5.0)], ids=repr)
def test_shape_dt(kernel):
    t = np.array([-0.9, -0.4, 0.0, 0.35, 0.8])
    check = check_jacobian(kernel.shape, t, np.diag(kernel.shape_dt(t)), rtol=1e-6, atol=1e-8)
    assert check.ok, str(check)


@pytest.mark.parametrize("act", [acts.Softplus(2.0), acts.Swish(1.5), acts.Erf(0.8)], ids=repr)
def test_activation_coefficient_gradients(act):
    (name,) = act.params
    v = getattr(act, name)
    t = np.linspace(-1, 1, 5)
    for d in [2, 3, 6]:
        coefficients = check_jacobian(lambda p: type(act)(p).coefficients(d, 10), v,
                                      act.coefficient_gradients(d, 10)[name], rtol=1e-6, atol=1e-10)
        assert coefficients.ok, (d, str(coefficients))
        shape = check_jacobian(lambda p: type(act)(p).shape(t), v, act.shape_gradients(t)[name], rtol=1e-6, atol=1e-10)
        assert shape.ok, (d, str(shape))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: K.Matern(nu=2.0), "nu"),
        (lambda: K.Matern(nu="3/2"), "nu"),
        (lambda: K.Matern(1.5, lengthscale=0.0), "lengthscale"),
        (lambda: K.Matern(1.5, lengthscale=-1.0), "lengthscale"),
        (lambda: K.IntrinsicMatern(3, 1.5, lengthscale=np.nan), "lengthscale"),
        (lambda: K.ArcCosine(3), "order"),
        (lambda: K.ArcCosine(1, variance=0), "variance"),
        (lambda: K.ArcCosine(1).spectrum(1, 3), "dim"),
        (lambda: K.ArcCosine(1).spectrum(3, -1), "max_degree"),
        (lambda: K.PolynomialDecay(5, beta=3.0), "beta must exceed"),
        (lambda: K.IntrinsicMatern(3).spectrum(4, 3), "built for dim=3"),
        (lambda: funk_hecke(lambda t: np.log(np.where(t > 0, t, np.nan)), 3, 4), "NaN"),
        (lambda: funk_hecke(lambda t: 1.0, 3, 4), "vectorised"),
        (lambda: funk_hecke(np.exp, 3, 4, kinks=[1.0]), "kinks"),
        (lambda: funk_hecke(np.exp, 3, 4, parity="weird"), "parity"),
        (lambda: funk_hecke(np.exp, 1, 4), "dim"),
        (lambda: acts.Softplus(beta=0), "beta"),
        (lambda: K.ArcCosine(1, bias=0.0).K(np.zeros((2, 2))), "vanishes"),
        (lambda: K.ArcCosine(1, input_scale=[1.0, 2.0]).K(np.zeros((2, 3))), "input_scale"),
        (lambda: K.ArcCosine(1).K(np.array([[np.nan, 1.0]])), "NaN"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_rkhs_norm_relu_grows_softplus_converges():
    d, L = 3, 60
    lam = K.ArcCosine(1).spectrum(d, L)
    relu = sl.rkhs_norm_truncated(acts.ReLU().coefficients(d, L), lam, d)
    soft = sl.rkhs_norm_truncated(acts.Softplus(3.0).coefficients(d, L), lam, d)
    # ReLU under arc-cos 1: sigma_l^2 / lambda_l = 1 / (2d) on every non-zero level
    steps = np.diff(relu)[1::2]  # even levels >= 2
    assert np.allclose(steps[steps > 0] / np.array([sl.num_harmonics(e, d) for e in range(2, L + 1, 2)]), 1 / (2 * d))
    assert relu[-1] > 10 * relu[4]
    assert soft[-1] - soft[30] < 1e-6 * soft[-1]


def test_mismatch_report_and_truncated_shape():
    d, L = 5, 12
    lam = K.Matern(2.5, 0.5).spectrum(d, L)
    rep = sl.mismatch_report(lam, acts.ReLU().coefficients(d, L))
    assert rep["activation_only_zero"].tolist() == [3, 5, 7, 9, 11]
    assert rep["kernel_only_zero"].size == 0
    rep2 = sl.mismatch_report(K.ArcCosine(1).spectrum(d, L), acts.Erf().coefficients(d, L))
    assert rep2["kernel_only_zero"].tolist() == [3, 5, 7, 9, 11]
    t = np.linspace(-1, 1, 11)
    c = acts.Softplus(3.0).coefficients(d, 40)
    assert np.allclose(sl.truncated_shape(c, d, t), acts.Softplus(3.0).shape(t), atol=1e-10)
    assert np.abs(sl.truncated_shape(c, d, t, 2) - acts.Softplus(3.0).shape(t)).max() > 1e-3


@pytest.mark.parametrize("d, beta", [(3, 2.5), (3, 4.0), (5, 4.3), (5, 7.0)])
def test_polynomial_decay_normalisation_against_zeta(d, beta):
    """kappa(1) = 1: sum_l max(l,1)^-beta N(l, d) in closed form with Riemann zeta values
    (N(l, 3) = 2l + 1, N(l, 5) = (2l^3 + 9l^2 + 13l + 6)/6); slow tails (p = 1.3) included."""
    with mpmath.workdps(30):
        poly = {3: [(2, 1), (1, 0)], 5: [(mpmath.mpf(2) / 6, 3), (mpmath.mpf(9) / 6, 2),
                                         (mpmath.mpf(13) / 6, 1), (1, 0)]}[d]
        total = 1 + sum(c * mpmath.zeta(beta - e) for c, e in poly)
    lam = K.PolynomialDecay(d, beta).spectrum(d, 4)
    assert abs(lam[1] * float(total) - 1) < 1e-11
    assert lam[0] == lam[1]


def test_intrinsic_matern_normalisation_direct_sum():
    """Against a brute-force sum to l = 2e6 (+ its power-law tail)."""
    d, nu, rho = 3, 1.5, 0.6
    a, pw = 2 * nu / rho**2, nu + (d - 1) / 2
    ell = np.arange(2_000_001, dtype=np.float64)
    terms = (2 * ell + 1) * (a + ell * (ell + 1)) ** (-pw)
    total = terms.sum() + terms[-1] * ell[-1] / 3.0  # tail ~ 2 l^-4
    lam = K.IntrinsicMatern(d, nu, rho).spectrum(d, 3)
    assert abs(lam[0] * total / a ** (-pw) - 1) < 1e-13


@pytest.mark.parametrize("nu, rho", [(1.5, 0.7), (2.5, 1.3), (0.5, 2.0)])
@pytest.mark.parametrize("dim", [3, 9])
def test_dutordoir2020_matern_is_the_papers_spectrum(nu, rho, dim):
    """Dutordoir et al. 2020 eqs. 33-34: a_l = S(sqrt(l (l + d - 2))) with the Euclidean Matérn
    density S(w) ~ (2 nu / rho^2 + 4 pi^2 w^2)^-(nu + d/2), d the ambient dimension; normalised
    to kappa(1) = variance, the library's kernel must equal it level by level."""
    from spherelab.sphere.special import num_harmonics

    L = 30
    ell = np.arange(L + 1)
    raw = (2 * nu / rho**2 + 4 * np.pi**2 * ell * (ell + dim - 2)) ** (-(nu + dim / 2))
    kern = K.IntrinsicMatern.dutordoir2020(dim, nu, rho, variance=1.7)
    lam = kern.spectrum(dim, L)
    ratio = lam / raw
    assert np.allclose(ratio, ratio[0], rtol=1e-12)
    counts = np.array([float(num_harmonics(e, dim)) for e in ell])
    assert lam @ counts <= 1.7 * (1 + 1e-12)  # the tail beyond L carries the rest of the variance


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, np.inf])
@pytest.mark.parametrize("lengthscale", [1.0, 100.0, 1e4])
def test_matern_spectrum_keeps_its_digits_at_long_lengthscales(nu, lengthscale):
    """Against mpmath (60 digits), to 1e-12: with a long lengthscale the kernel is near 1 everywhere and
    the levels >= 1 are tiny fractions of the constant; computed from kappa - 1 and its Taylor
    remainders they keep their digits (from kappa itself they were off by up to 14 % at level 3 and
    lengthscale 3.4e4; with float Taylor coefficients the Matern-5/2 a^3 term, exactly 0, came out 5.6e-17,
    and level 3 was 6e-9 off at 1e4)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    d, alpha = 9, 3.5
    cd = mp.gamma(mp.mpf(d) / 2) / (mp.sqrt(mp.pi) * mp.gamma(mp.mpf(d - 1) / 2))
    L = mp.mpf(lengthscale)

    def kappa(t):
        r = mp.sqrt(2 - 2 * t) / L
        if nu == 0.5:
            return mp.exp(-r)
        if nu == 1.5:
            return (1 + mp.sqrt(3) * r) * mp.exp(-mp.sqrt(3) * r)
        if nu == 2.5:
            return (1 + mp.sqrt(5) * r + mp.mpf(5) / 3 * r * r) * mp.exp(-mp.sqrt(5) * r)
        return mp.exp(-r * r / 2)

    def reference(ell):
        P = lambda t: mp.gegenbauer(ell, alpha, t) / mp.gegenbauer(ell, alpha, 1)
        return float(cd * mp.quad(lambda t: kappa(t) * P(t) * (1 - t * t) ** (alpha - mp.mpf(1) / 2), [-1, 0, 1]))

    ours = K.Matern(nu, lengthscale).spectrum(d, 3)
    for ell in range(4):
        ref = reference(ell)
        assert abs(ours[ell] - ref) <= 1e-12 * abs(ref), (ell, ours[ell], ref)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
@pytest.mark.parametrize("dim", [3, 9])
def test_matern_spectrum_keeps_its_digits_at_middle_lengthscales(nu, dim):
    """Against mpmath, to 1e-12, at lengthscales between the short (the whole spectrum sizeable) and
    the long (the series of kappa - 1): quadrature of kappa rounded every level to about eps, so a
    level far below the constant lost its digits (Matern-5/2 on S^8 at lengthscale 6: level 8 was
    6e-8 off); the power series in 1 / lengthscale keeps them (kernels/matern_series.py)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    alpha = mp.mpf(dim - 2) / 2
    cd = mp.gamma(mp.mpf(dim) / 2) / (mp.sqrt(mp.pi) * mp.gamma(mp.mpf(dim - 1) / 2))
    for lengthscale in (1.0, 3.0, 6.0):
        s = mp.sqrt(2 * mp.mpf(nu)) / lengthscale
        poly = {0.5: (1,), 1.5: (1, 1), 2.5: (1, 1, mp.mpf(1) / 3)}[nu]

        def kappa(t):
            a = s * mp.sqrt(2 - 2 * t)
            return sum(c * a**i for i, c in enumerate(poly)) * mp.exp(-a)

        lam = K.Matern(nu, lengthscale).spectrum(dim, 8)
        for ell in range(9):
            P = lambda t: mp.gegenbauer(ell, alpha, t) / mp.gegenbauer(ell, alpha, 1)  # noqa: E731
            ref = float(cd * mp.quad(lambda t: kappa(t) * P(t) * (1 - t * t) ** (alpha - mp.mpf(1) / 2), [-1, 0, 1]))
            assert lam[ell] == pytest.approx(ref, rel=1e-12, abs=0.0), (lengthscale, ell)


def test_matern_series_levels_have_the_quadratures_gradient():
    """Where a level comes from the power series, its lengthscale gradient does too: against central
    differences of the spectrum itself."""
    kern, h = K.Matern(2.5, 3.0), 1e-5
    g = kern.spectrum_gradients(9, 8)["lengthscale"]
    fd = (K.Matern(2.5, 3.0 + h).spectrum(9, 8) - K.Matern(2.5, 3.0 - h).spectrum(9, 8)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-7)


@pytest.mark.parametrize("nu, lengthscale, dim", [(2.5, 2.49e-4, 2), (1.5, 3.75e-4, 2), (0.5, 2.2e-6, 2),
                                                  (2.5, 1.34e-4, 2), (0.5, 1e-5, 3), (1.5, 1e-3, 9)])
def test_matern_spectrum_keeps_its_digits_at_short_lengthscales(nu, lengthscale, dim):
    """Against mpmath, to 1e-12 (the lengthscale gradient to 1e-10): a short lengthscale puts the kernel
    in a spike within ~lengthscale rad of t = 1. Evaluated at t = cos(theta), which rounds near 1, the
    circle's spectrum was 1e-6 off at 2.5e-4 (1.7e-5 for nu = 1/2 at 2.2e-6), and with the last split
    at 32 scales the tail piece began where the Matern-5/2 shape was still 1e-5; an optimiser's
    trial point reached such lengthscales on Snelson's data (notebook 05) and warned."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    s = mp.sqrt(2 * mp.mpf(nu)) / mp.mpf(lengthscale)
    poly = {0.5: (1,), 1.5: (1, 1), 2.5: (1, 1, mp.mpf(1) / 3)}[nu]
    slope = {0.5: lambda a: -1, 1.5: lambda a: -a, 2.5: lambda a: -a * (1 + a) / 3}[nu]  # e^a dm / da
    alpha = mp.mpf(dim - 2) / 2
    cd = mp.gamma(mp.mpf(dim) / 2) / (mp.sqrt(mp.pi) * mp.gamma(mp.mpf(dim - 1) / 2))
    splits = [0] + [k / s for k in (0.5, 1, 2, 4, 8, 16, 32, 64, 128) if k / s < mp.pi] + [mp.pi]

    def level(ell, grad):
        P = (lambda t: mp.chebyt(ell, t)) if dim == 2 else (
            lambda t: mp.gegenbauer(ell, alpha, t) / mp.gegenbauer(ell, alpha, 1))

        def f(th):
            a = s * 2 * mp.sin(th / 2)
            value = slope(a) * (-a / mp.mpf(lengthscale)) if grad else sum(c * a**i for i, c in enumerate(poly))
            return value * mp.exp(-a) * P(mp.cos(th)) * mp.sin(th) ** (dim - 2)
        return float(cd * mp.quad(f, splits))

    kern = K.Matern(nu, lengthscale)
    lam, g = kern.spectrum(dim, 8), kern.spectrum_gradients(dim, 8)["lengthscale"]
    for ell in (0, 1, 4, 8):
        assert lam[ell] == pytest.approx(level(ell, False), rel=1e-12, abs=0.0), ell
        assert g[ell] == pytest.approx(level(ell, True), rel=1e-10, abs=0.0), ell
