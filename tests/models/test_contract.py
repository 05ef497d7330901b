"""Every model keeps the contract of :class:`spherelab.testing.ModelContract` (GPyTorch's habit of
shipping its test cases): one subclass per model and configuration, each giving ``make``."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from conftest import decoupled_data
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.testing import ModelContract


def _regression(rng, n=40, D=2):
    return decoupled_data(rng, n, D)


class TestVISH(ModelContract):
    fit_kwargs = {"maxiter": 30, "lift_maxiter": 20}

    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.VISH(K.Matern(1.5, 1.0, bias=0.8, input_scale=np.array([1.2, 0.9])), 4,
                       sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestVISHPhases(TestVISH):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.VISH(K.Matern(1.5, 1.0), None, sl.likelihoods.Gaussian(0.1), device=device,
                       features=sl.PhaseTruncatedHarmonics(3, 4, 3, seed=1)), X, y


class TestVISHAdditive(TestVISH):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        kernel = K.Additive([K.Matern(1.5, 1.0), K.Matern(2.5, 0.8, input_scale=1.2),
                             K.Matern(1.5, 0.9, input_scale=np.array([1.1, 0.9]))], [0, 1, (0, 1)])
        return sl.VISH(kernel, None, sl.likelihoods.Gaussian(0.1), device=device,
                       features=sl.features.AdditiveHarmonics([4, 4, 2])), X, y


class TestInducingPoints(ModelContract):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:6] + 0.1), 3,
                                 sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestActivatedSVGP(ModelContract):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(A.ReLU(), 6, 4),
                                sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestPhasesAsOrthogonalU(ModelContract):
    """Phase-truncated harmonics as the u of the decoupled posterior (their directions trained)."""

    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0, bias=0.9), sl.PhaseTruncatedHarmonics(3, 4, 3, seed=2), 3,
                                 sl.likelihoods.Gaussian(0.1), device=device), X, y


class TestHarmonicsWithOrthogonalPoints(ModelContract):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(1.5, 0.8), sl.HarmonicFeatures(4), 3, sl.likelihoods.Gaussian(0.1),
                                 device=device), X, y


class TestBernoulliDecoupled(ModelContract):
    gaussian = False
    fit_kwargs = {"maxiter": 20}

    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.OrthogonalSVGP(K.Matern(2.5, 1.0), sl.InducingPoints(X[:5] + 0.1), 2,
                                 sl.likelihoods.Bernoulli(), device=device), X, (y > 0).astype(float)


class TestHVGP(ModelContract):
    def make(self, rng, device="cpu"):
        X, y = _regression(rng)
        return sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, sl.likelihoods.Gaussian(0.1),
                               device=device), X, y


def test_the_contract_can_fail():
    """A model whose gradient is wrong, or whose fit does not return itself, fails the contract."""

    class Broken(TestInducingPoints):
        def make(self, rng, device="cpu"):
            model, X, y = super().make(rng, device)
            original = model.elbo_and_gradient

            def wrong(*args, **kwargs):
                value, grad = original(*args, **kwargs)
                grad["variance"] = grad["variance"] * 1.01
                return value, grad

            model.elbo_and_gradient = wrong
            original_fit = model.fit_svi
            model.fit_svi = lambda *a, **k: (original_fit(*a, **k), None)[1]
            return model, X, y

    with pytest.raises(AssertionError):
        Broken().test_gradient_in_sampled_directions()
    with pytest.raises(AssertionError):
        Broken().test_fit_svi_returns_self_and_predicts()


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
