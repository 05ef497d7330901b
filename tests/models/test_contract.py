"""The contract every model keeps (GPyTorch's ``VariationalTestCase`` habit): one test case,
subclassed once per model and configuration.

A subclass gives ``make(rng) -> (model, X, y)`` (an unfitted model and its training data); the
case checks the parameter registry's round trip and validation, the gradient of the objective
in sampled directions against finite differences, that ``fit`` raises the bound, predict shapes,
the posterior following a changed hyper-parameter, and clear errors before ``fit`` and for bad
input.
"""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import activations as A
from spherelab import kernels as K


def _regression(rng, n=40, D=2):
    X = rng.standard_normal((n, D))
    y = np.sin(1.5 * X[:, 0]) + 0.3 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


class ModelContract:
    """Subclasses define :meth:`make`; ``fit_kwargs`` go to the short ``fit`` of the tests."""

    fit_kwargs: dict = {"maxiter": 30}
    gaussian = True

    def make(self, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    @pytest.fixture
    def setup(self):
        rng = np.random.default_rng(7)
        model, X, y = self.make(rng)
        return model, X, y, rng

    def initialised(self, model, X, y):
        return model.fit(X, y, optimize=False)

    # ---- errors before fit, bad input -----------------------------------------------------
    def test_runtime_error_before_fit(self, setup):
        model, X, y, _ = setup
        with pytest.raises(RuntimeError, match="fit"):
            model.predict_f(X)
        with pytest.raises(RuntimeError, match="fit"):
            model.elbo()
        with pytest.raises(RuntimeError, match="fit"):
            model.get_params()

    def test_bad_input_is_named(self, setup):
        model, X, y, _ = setup
        with pytest.raises(ValueError, match="rows|values"):
            model.fit(X, y[:-1])
        bad = X.copy()
        bad[0, 0] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            model.fit(bad, y)
        self.initialised(model, X, y)
        with pytest.raises(ValueError, match="columns|shape"):
            model.predict_f(np.ones((3, X.shape[1] + 1)))
        with pytest.raises(ValueError, match="NaN"):
            model.predict_f(bad)

    def test_wrong_likelihood_is_a_type_error(self, setup):
        model, *_ = setup
        with pytest.raises(TypeError, match="likelihood"):
            type(model)._set_likelihood(model, "gaussian")

    # ---- registry -------------------------------------------------------------------------
    def test_parameter_round_trip(self, setup):
        model, X, y, rng = setup
        self.initialised(model, X, y)
        theta = model.parameter_vector()
        params = model.get_params()
        assert list(params) == model.param_names
        model.set_parameter_vector(theta + 0.01 * rng.standard_normal(theta.size))
        model.set_params(**params)
        assert np.allclose(model.parameter_vector(), theta, rtol=1e-12, atol=1e-12)
        model.set_parameter_vector(theta)
        assert np.allclose(model.parameter_vector(), theta, rtol=1e-13, atol=1e-13)
        with pytest.raises(ValueError, match="unknown parameter"):
            model.set_params(no_such_parameter=1.0)
        with pytest.raises(ValueError, match="variance must be > 0"):
            model.set_params(variance=-1.0)
        with pytest.raises(ValueError, match="shape"):
            model.set_params(variance=np.ones(3))

    def test_gradient_in_sampled_directions(self, setup):
        model, X, y, _ = setup
        self.initialised(model, X, y)
        check = sl.testing.check_model_gradient(model, X, y, directions=6, rtol=1e-5, atol=1e-6)
        assert check.ok, str(check)

    # ---- fit and predict ------------------------------------------------------------------
    def test_fit_raises_the_bound_and_returns_self(self, setup):
        model, X, y, _ = setup
        before = self.initialised(model, X, y).elbo()
        assert model.fit(X, y, **self.fit_kwargs) is model
        assert model.elbo() > before

    def test_predict_shapes(self, setup):
        model, X, y, rng = setup
        self.initialised(model, X, y)
        Xs = rng.standard_normal((7, X.shape[1]))
        mean, var = model.predict_f(Xs)
        assert mean.shape == var.shape == (7,) and np.all(var >= 0)
        my, vy = model.predict_y(Xs)
        assert my.shape == vy.shape == (7,)
        if self.gaussian:
            assert np.all(vy > var)

    def test_posterior_follows_a_changed_hyper_parameter(self, setup):
        model, X, y, _ = setup
        self.initialised(model, X, y)
        _, v0 = model.predict_f(X[:5])
        model.kernel.variance = 2.0 * model.kernel.variance
        _, v1 = model.predict_f(X[:5])
        assert not np.allclose(v0, v1)


class TestVISH(ModelContract):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.VISH(K.Matern(1.5, 1.0, bias=0.8, input_scale=np.array([1.2, 0.9])), 4,
                       sl.likelihoods.Gaussian(0.1)), X, y

    fit_kwargs = {"maxiter": 30, "lift_maxiter": 20}


class TestVISHPhases(TestVISH):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1),
                       features=sl.PhaseTruncatedHarmonics(3, 4, 3, seed=1)), X, y


class TestInducingPoints(ModelContract):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:6] + 0.1), 3,
                                 sl.likelihoods.Gaussian(0.1)), X, y


class TestActivatedSVGP(ModelContract):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(A.ReLU(), 6, 4),
                                sl.likelihoods.Gaussian(0.1)), X, y


class TestPhasesAsOrthogonalU(ModelContract):
    """Phase-truncated harmonics as the u of the decoupled posterior (their directions trained)."""

    def make(self, rng):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0, bias=0.9), sl.PhaseTruncatedHarmonics(3, 4, 3, seed=2), 3,
                                 sl.likelihoods.Gaussian(0.1)), X, y


class TestHarmonicsWithOrthogonalPoints(ModelContract):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(1.5, 0.8), sl.HarmonicFeatures(4), 3, sl.likelihoods.Gaussian(0.1)), X, y


class TestBernoulliDecoupled(ModelContract):
    gaussian = False
    fit_kwargs = {"maxiter": 20}

    def make(self, rng):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:5] + 0.1), 2,
                                 sl.likelihoods.Bernoulli()), X, (y > 0).astype(float)


class TestHVGP(ModelContract):
    def make(self, rng):
        X, y = _regression(rng)
        return sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, sl.likelihoods.Gaussian(0.1)), X, y


def test_empty_inputs_predict_empty_outputs_and_kernel_columns_are_checked(rng):
    X = rng.standard_normal((20, 2))
    y = np.sin(X[:, 0])
    for model in (sl.VISH(K.Matern(1.5, 1.0), 3), sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:4]), 2),
                  sl.HarmonicSVGP(K.Matern(2.5, 1.0), sl.groups.Reflection(2), 2)):
        model.fit(X, y, optimize=False)
        mean, var = model.predict_f(np.zeros((0, 2)))
        assert mean.shape == var.shape == (0,)
    with pytest.raises(ValueError, match="X has 2 columns but X2 has 3"):
        K.Matern(1.5, 1.0).K(X, np.ones((3, 3)))
    with pytest.raises(ValueError, match="X has 2 columns but X2 has 3"):
        K.Matern(1.5, 1.0).gradients_with_inputs(np.ones((20, 3)), X, np.ones((3, 3)))
