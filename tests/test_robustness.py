"""Nothing silent: hyper-parameters validated at every assignment, the dtype and range policy,
the noise floor, fit outcomes reported, allocations estimated before they are made."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import spherelab as sl
from spherelab import activations as A
from spherelab import kernels as K
from spherelab.likelihoods import NOISE_FLOOR, Gaussian


def _kernels():
    return [K.Matern(1.5, 0.8), K.ArcCosine(1), K.DeepArcCosine(2), K.NTK(1), K.IntrinsicMatern(3, 1.5),
            K.PolynomialDecay(3, 6.0), K.Truncated(K.Matern(2.5), 3, 4), K.Parity(K.Matern(0.5))]


BAD_ASSIGNMENTS = [("variance", -1.0), ("variance", np.nan), ("variance", 0.0), ("variance", 1j),
                   ("bias", -1.0), ("bias", np.inf), ("input_scale", 0.0), ("input_scale", []),
                   ("input_scale", [[1.0]]), ("input_scale", [1.0, -2.0]), ("variance", "big")]


@pytest.mark.parametrize("kernel", _kernels(), ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("name,value", BAD_ASSIGNMENTS, ids=lambda v: repr(v))
def test_assignment_after_construction_is_validated(kernel, name, value):
    before = kernel.hyperparameters[name]
    with pytest.raises((ValueError, TypeError), match=name):
        setattr(kernel, name, value)
    assert np.array_equal(kernel.hyperparameters[name], before)  # unchanged
    assert np.all(np.isfinite(kernel.K(np.ones((2, 2)) * [[0.3], [0.5]])))


@pytest.mark.parametrize("kernel,name,value", [
    (K.Matern(1.5), "lengthscale", np.nan), (K.Matern(1.5), "lengthscale", -1), (K.Matern(1.5), "nu", 2.0),
    (K.ArcCosine(1), "order", 3), (K.DeepArcCosine(2), "depth", 0), (K.NTK(1), "depth", 1.5),
    (K.IntrinsicMatern(3), "nu", -1), (K.IntrinsicMatern(3), "lengthscale", 0),
    (K.PolynomialDecay(3, 4.0), "beta", 1.5), (K.PolynomialDecay(3, 4.0), "beta", -1),
    (K.Truncated(K.Matern(2.5), 3, 4), "lengthscale", -2.0), (A.Softplus(), "beta", 0), (A.Erf(), "scale", np.inf),
])
def test_shape_parameters_are_validated_on_assignment(kernel, name, value):
    with pytest.raises((ValueError, TypeError), match=name):
        setattr(kernel, name, value)


def test_valid_assignments_still_work_and_move_the_kernel():
    k = K.Matern(1.5, 1.0)
    X = np.array([[0.1, 0.2], [0.3, -0.4]])
    K0 = k.K(X)
    k.lengthscale, k.input_scale, k.bias = 0.5, [1.0, 2.0], 0.0
    assert k.lengthscale == 0.5 and k.bias == 0.0 and not np.allclose(k.K(X), K0)
    with pytest.raises(ValueError, match="read-only"):
        k.input_scale[0] = -1.0  # an in-place change cannot bypass the check
    wrapped = K.Parity(k)
    wrapped.variance = 2.0  # forwarded to the base kernel, validated there
    assert k.variance == 2.0


def test_noise_floor_is_enforced_and_documented():
    assert Gaussian().floor == NOISE_FLOOR == 1e-6
    with pytest.raises(ValueError, match="floor"):
        Gaussian(1e-8)
    lik = Gaussian(0.1)
    with pytest.raises(ValueError, match="floor"):
        lik.variance = 1e-9
    assert lik.variance == 0.1
    assert Gaussian(1e-12, floor=0.0).variance == 1e-12
    with pytest.raises(ValueError, match="noise variance"):
        Gaussian(0.0, floor=0.0)


@pytest.mark.parametrize("make", [
    lambda: sl.VISH(K.Matern(1.5, 1.0), 3, Gaussian(0.1)),
    lambda: sl.VISH(K.Matern(1.5, 1.0), 3, Gaussian(0.1), prior="features"),
    lambda: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(np.linspace(-1, 1, 4)[:, None] * [1, 1]), 3,
                              Gaussian(0.1)),
])
@pytest.mark.parametrize("scale", [0.0, 1e-300])
def test_noise_free_targets_end_on_the_floor_with_a_warning(make, scale, rng):
    X = rng.uniform(-1, 1, (60, 2))
    y = scale * np.ones(60) if scale == 0.0 else scale * np.sin(X[:, 0])
    model = make()
    with pytest.warns(RuntimeWarning) as caught:  # (a degenerate variance may be reported too: meant)
        model.fit(X, y, maxiter=50)
    assert any("floor" in str(w.message) for w in caught)
    assert model.likelihood.variance >= NOISE_FLOOR
    assert np.isfinite(model.elbo())
    assert any("floor" in w for w in model.fit_report_["warnings"])
    mean, var = model.predict_f(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(var >= 0)


def test_registry_maps_the_noise_above_its_floor():
    model = sl.VISH(K.Matern(1.5), 2, Gaussian(2e-6))
    model.fit(np.random.default_rng(0).uniform(-1, 1, (20, 2)), np.zeros(20), optimize=False)
    names = ["noise"]
    theta = model.parameter_vector(names)
    model.set_parameter_vector(theta - 800.0, names)  # softplus underflows: the floor, not 0
    assert model.likelihood.variance == NOISE_FLOOR
    with pytest.raises(ValueError, match="noise must be >= 1e-06"):
        model.set_params(noise=1e-7)


def test_fit_report_records_and_warns_on_abnormal_stops():
    from scipy.optimize import OptimizeResult

    model = sl.VISH(K.Matern(1.5), 2, Gaussian(0.1))
    model.fit(np.random.default_rng(0).uniform(-1, 1, (20, 2)), np.sin(np.arange(20.0)), optimize=False)
    with pytest.warns(RuntimeWarning, match=r"stopped after 2 iteration\(s\) \(the line search found no decrease\) "
                                            "far from a stationary point") as caught:
        model._report_fit({"fit": OptimizeResult(nit=2, nfev=9, status=2, fun=-3.0, message="ABNORMAL: ",
                                                 jac=np.array([0.5, 0.0]), x=np.zeros(2))})
    assert caught[0].filename == __file__  # the user's line, not a file of the package
    assert "inducing inputs" not in str(caught[0].message)  # VISH has none
    # at a point stationary to round-off (a stage starting at the previous stage's optimum): no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model._report_fit({"fit": OptimizeResult(nit=1, nfev=21, status=2, fun=-1790.0, message="ABNORMAL: ",
                                                 jac=np.array([7e-6, -4e-3]), x=np.array([7091.0, 80.0]))})
    with pytest.warns(RuntimeWarning, match="rejected point"):
        model._report_fit({"fit": OptimizeResult(nit=0, nfev=1, status=2, fun=1e300, message="x")})
    model.kernel.lengthscale = 1e9
    with pytest.warns(RuntimeWarning, match="lengthscale ended degenerate"):
        problems = model._report_fit({"fit": OptimizeResult(nit=30, nfev=40, status=0, fun=-3.0, message="ok")})
    assert model.fit_report_["fit"]["iterations"] == 30 and len(problems) == 1


def test_normal_fits_report_without_warnings(rng):
    X = rng.uniform(-1, 1, (80, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(80)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = sl.VISH(K.Matern(1.5, 1.0), 3, Gaussian(0.1)).fit(X, y)
    assert set(model.fit_report_) >= {"lift", "spectrum", "warnings"} and model.fit_report_["warnings"] == []


@pytest.mark.parametrize("bad,kind", [
    (np.ones((5, 2), dtype=complex), "complex"), (np.ones((5, 2), dtype=bool), "boolean"),
    (np.array([[1, None]] * 5, dtype=object), "object"), (np.array([["a", "b"]] * 5), "string"),
])
def test_dtype_policy_rejects_by_name(bad, kind):
    y = np.zeros(5)
    with pytest.raises(TypeError, match=f"X must be a real numeric array.*{kind}"):
        sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(bad, y)
    with pytest.raises(TypeError, match=kind):
        K.Matern(1.5).K(bad)
    with pytest.raises(TypeError, match="y must be a real"):
        sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(np.ones((5, 2)), bad[:, 0])


def test_integer_and_float32_inputs_are_accepted(rng):
    X = rng.integers(-3, 3, (30, 2))
    y = rng.standard_normal(30).astype(np.float32)
    a = sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(X, y, optimize=False)
    b = sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(X.astype(float), y.astype(float), optimize=False)
    assert np.allclose(a.predict_f(X[:3])[0], b.predict_f(X[:3].astype(float))[0], rtol=1e-12)


def test_overflowing_scales_are_rejected_with_the_reason(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(ValueError, match="overflow.*standardise the inputs"):
        K.Matern(1.5).K(X * 1e200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused with the reason, and nothing else said (no NumPy overflow)
        with pytest.raises(ValueError, match="overflow.*standardise the inputs"):
            sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(X * 1e200, np.zeros(10))
    y = np.zeros(10)
    y[3] = 1e300
    with pytest.raises(ValueError, match="y has values up to 1e\\+300.*standardise the targets"):
        sl.VISH(K.Matern(1.5), 2, Gaussian(0.1)).fit(X, y)


def test_allocations_are_estimated_before_they_are_made(monkeypatch):
    with pytest.raises(ValueError, match="would produce 167,"):
        sl.SphericalHarmonics(1000, 3)
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", "1M")
    with pytest.raises(MemoryError, match="GiB.*SPHERELAB_MAX_MEMORY"):
        sl.SphericalHarmonics(60, 3)  # 37,820 features: a plan of ~5 MB
    Y = sl.SphericalHarmonics(3, 4)
    with pytest.raises(MemoryError, match="output.*chunks of rows"):
        Y(sl.sample_sphere(10_000, 3, rng=np.random.default_rng(0)))
    with pytest.raises(MemoryError, match="10,000 x 10,000 Gram matrix.*sparse model"):
        K.Matern(1.5).K(np.zeros((10_000, 2)))
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", "lots")
    with pytest.warns(RuntimeWarning, match="SPHERELAB_MAX_MEMORY"):
        Y(sl.sample_sphere(10, 3, rng=np.random.default_rng(0)))
