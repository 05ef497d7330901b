"""Likelihoods: the probit's expectations against quadrature and mpmath."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl


def test_bernoulli_expectations_against_quadrature():
    from scipy.integrate import quad
    from scipy.stats import norm

    lik = sl.likelihoods.Bernoulli()
    mu, var = np.array([0.3, -1.2, 2.0]), np.array([0.5, 2.0, 0.1])
    y = np.array([1.0, 0.0, 1.0])
    e, _, _ = lik.variational_expectations(y, mu, var)
    for i in range(3):
        s = 2 * y[i] - 1
        ref = quad(lambda f: norm.logcdf(s * f) * norm.pdf(f, mu[i], np.sqrt(var[i])), -30, 30)[0]
        assert abs(e[i] - ref) < 1e-6 * abs(ref)
    p, _ = lik.predict_y(mu, var)
    assert np.allclose(p, norm.cdf(mu / np.sqrt(1 + var)))
    with pytest.raises(ValueError, match="y in"):
        lik.check_targets(np.array([0.0, 2.0]))


def test_bernoulli_expectations_and_derivatives_to_full_precision_against_mpmath():
    """E[log Phi(s f)] and its mu- and v-derivatives within 1e-10 (relative) of mpmath over
    the means and variances fits meet and beyond: Gauss-Hermite with 20 nodes was 6e-11 off at the
    prior and 7e-4 at v = 30, the trapezoid in xi is at the rounding floor."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 20
    mus, variances = np.array([-8.0, -2.0, 0.7, 5.0]), np.array([1e-6, 1.0, 3.0, 100.0])
    M, V = (a.ravel() for a in np.meshgrid(mus, variances))
    Y = np.arange(M.size) % 2.0  # both labels at every variance
    got = np.array(sl.likelihoods.Bernoulli().variational_expectations(Y, M, V))
    for i, (y, m, v) in enumerate(zip(Y, M, V)):
        s = 2 * y - 1
        m, sd = mp.mpf(s * m), mp.sqrt(mp.mpf(v))  # in z = s f: z ~ N(s mu, v)
        cuts = sorted({m - 8 * sd, m - 2 * sd, m, m + 2 * sd, m + 8 * sd} | ({mp.mpf(0)} if abs(m) < 8 * sd else set()))
        w = lambda z, m=m, sd=sd: mp.npdf((z - m) / sd) / sd  # noqa: E731
        mills = lambda z: mp.npdf(z) / mp.ncdf(z)  # noqa: E731
        exact = [mp.quad(lambda z: mp.log(mp.ncdf(z)) * w(z), [-mp.inf, *cuts, mp.inf]),
                 s * mp.quad(lambda z: mills(z) * w(z), [-mp.inf, *cuts, mp.inf]),
                 mp.quad(lambda z: mills(z) * (z - m) / sd * w(z), [-mp.inf, *cuts, mp.inf]) / (2 * sd)]
        for part, ref in enumerate(exact):
            assert abs(got[part, i] - float(ref)) <= 1e-10 * abs(float(ref)), (y, m, v, part)


def test_gauss_hermite_on_request_and_its_largest_rule_is_finite():
    lik = sl.likelihoods.Bernoulli(20)
    assert repr(lik) == "Bernoulli(num_points=20)" and repr(sl.likelihoods.Bernoulli()) == "Bernoulli()"
    largest = sl.likelihoods.Bernoulli(sl.likelihoods.Bernoulli.max_points)
    mu, var = np.array([0.3, -1.0]), np.array([0.5, 1.0])
    e, gm, gv = largest.variational_expectations(np.array([1.0, 0.0]), mu, var)
    assert np.all(np.isfinite(e)) and np.all(np.isfinite(gm)) and np.all(np.isfinite(gv))
    assert np.allclose(e, sl.likelihoods.Bernoulli().variational_expectations(np.array([1.0, 0.0]), mu, var)[0],
                       rtol=1e-12)
    with pytest.raises(ValueError, match="at most 300"):  # NumPy's rule is NaN from 375 nodes on
        sl.likelihoods.Bernoulli(400)


def test_the_floor_is_validated_when_set_after_construction():
    import spherelab as sl

    lik = sl.likelihoods.Gaussian(0.1)
    for bad, match in ((-1.0, ">= 0"), (float("nan"), ">= 0"), ("1e-3", "number"), (0.5, "<= the noise variance")):
        with pytest.raises((ValueError, TypeError), match=match):
            lik.floor = bad
    assert lik.floor == 1e-6
    lik.floor = 0.05
    with pytest.raises(ValueError, match="floor"):
        lik.variance = 0.01


def test_bernoulli_models_take_boolean_labels():
    import spherelab as sl

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (40, 2))
    labels = X[:, 0] + 0.3 * rng.standard_normal(40) > 0
    for build, fit in ((lambda: sl.VISH(sl.kernels.Matern(1.5), 3, sl.likelihoods.Bernoulli()),
                        lambda m, y: m.fit_svi(X, y, iterations=5, batch_size=16)),
                       (lambda: sl.ActivatedSVGP(sl.kernels.ArcCosine(1),
                                                 sl.ActivatedFeatures(sl.activations.ReLU(), 3, 3),
                                                 sl.likelihoods.Bernoulli()),
                        sl.models.capped()(lambda m, y: m.fit(X, y, maxiter=5)))):
        a, b = fit(build(), labels), fit(build(), labels.astype(float))
        for u, v in zip(a.predict_y(X[:5]), b.predict_y(X[:5])):
            assert np.array_equal(u, v)
        with pytest.raises(ValueError, match=r"y in \{0, 1\}"):
            fit(build(), labels.astype(float) * 2)


class FixedNoise(sl.likelihoods.Likelihood):
    """A user's likelihood: Gaussian noise of a known variance, no parameter of its own."""

    def __init__(self, variance):
        self.variance = variance

    def variational_expectations(self, y, mu, var):
        r = y - mu
        e = -0.5 * np.log(2 * np.pi * self.variance) - 0.5 * (r * r + var) / self.variance
        return e, r / self.variance, np.full_like(mu, -0.5 / self.variance)

    def predict_y(self, mean, var):
        return mean, var + self.variance

    def log_predictive_density(self, y, mean, var):
        s2 = var + self.variance
        return -0.5 * (np.log(2 * np.pi * s2) + (y - mean) ** 2 / s2)


def test_a_users_likelihood_subclass_plugs_into_the_models():
    """The models accept any Likelihood (no list of known classes): its parameters (none here) are
    all the registry holds of it, and the bound it gives equals Gaussian's at the same variance."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (30, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(30)

    def model(lik):
        feats = sl.InducingPoints(X[:5].copy())
        return sl.OrthogonalSVGP(sl.kernels.Matern(1.5), feats, 2, lik, orthogonal_inputs=X[5:7].copy(),
                                 sufficient_statistics=False).initialise(X)

    ours, ref = model(FixedNoise(0.3)), model(sl.likelihoods.Gaussian(0.3))
    assert "noise" not in ours.get_params() and "noise" in ref.get_params()
    assert ours.elbo_and_gradient(X, y)[0] == pytest.approx(ref.elbo_and_gradient(X, y)[0], rel=1e-12)
    assert sl.testing.check_model_gradient(ours, X, y).ok
    ours.fit_svi(X, y, iterations=3, batch_size=10)
    assert np.all(np.isfinite(ours.predict_y(X[:4])[1]))
    with pytest.raises(TypeError, match="likelihood must be a spherelab Likelihood"):
        sl.OrthogonalSVGP(sl.kernels.Matern(1.5), sl.InducingPoints(X[:5]), 0, object())
