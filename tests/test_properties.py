"""Property-based checks over the public API (hypothesis, bounded example counts): every call
either returns a correct, finite answer or raises a clear error — one of ValueError, TypeError,
MemoryError, RuntimeError whose message names the offending argument — never NaN, never a raw
NumPy message."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import spherelab as sl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from spherelab import kernels as K

CLEAR = (ValueError, TypeError, MemoryError, RuntimeError)
# CI: 40 examples per property; SPHERELAB_EXAMPLES=500 for a longer hunt
SETTINGS = settings(max_examples=int(os.environ.get("SPHERELAB_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

ODD_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-300, max_value=1e300),
    st.integers(-5, 5),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
    st.none(), st.text(max_size=3), st.booleans(),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3),
)


def _clear(exc: Exception, *names: str) -> bool:
    return isinstance(exc, CLEAR) and any(n in str(exc) for n in names)


def _kernel(kind: int):
    return [K.Matern(1.5, 0.7), K.ArcCosine(1), K.IntrinsicMatern(3, 1.5), K.Parity(K.Matern(2.5))][kind]


@SETTINGS
@given(kind=st.integers(0, 3), name=st.sampled_from(["variance", "bias", "input_scale", "lengthscale"]),
       value=ODD_VALUES)
def test_any_assignment_is_valid_or_refused_by_name(kind, name, value):
    kernel = _kernel(kind)
    if name not in kernel.hyperparameters:
        return
    X = np.array([[0.2, -0.1], [0.4, 0.3], [-0.5, 0.1]])
    try:
        setattr(kernel, name, value)
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        assert _clear(exc, name), repr(exc)
        return
    try:
        with warnings.catch_warnings():
            # a spectral kernel's series cut before its tail is negligible warns (and says by how
            # much): an announced approximation, not a silent one
            warnings.filterwarnings("ignore", ".*shape truncated", RuntimeWarning)
            Kxx = kernel.K(X)
    except Exception as exc:  # noqa: BLE001
        assert _clear(exc, "X", "input_scale", name), repr(exc)
        return
    assert np.all(np.isfinite(Kxx)) and np.allclose(Kxx, Kxx.T)


@SETTINGS
@given(scale=st.floats(-300, 300), kind=st.integers(0, 3))
def test_input_scales_give_finite_gram_matrices_or_say_why(scale, kind):
    X = np.array([[0.2, -0.1], [0.4, 0.3], [-0.5, 0.1]]) * 10.0**scale
    try:
        Kxx = _kernel(kind).K(X)
    except Exception as exc:  # noqa: BLE001
        assert _clear(exc, "X"), repr(exc)
        return
    assert np.all(np.isfinite(Kxx))
    assert np.all(np.linalg.eigvalsh(Kxx) > -1e-9 * np.abs(Kxx).max())


ARRAYS = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.complex128, np.bool_, np.float16]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),

)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (30, 2))
    y = np.sin(2 * X[:, 0])
    return {
        "vish": sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False),
        "orthogonal": sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:4]), 3,
                                        sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False),
    }


@SETTINGS
@given(X=ARRAYS, which=st.sampled_from(["vish", "orthogonal"]), container=st.sampled_from(["array", "list", "F"]))
def test_predict_on_any_array_is_right_or_refused(fitted, X, which, container):
    model = fitted[which]
    arg = X.tolist() if container == "list" else (np.asfortranarray(X) if container == "F" else X)
    try:
        mean, var = model.predict_f(arg)
    except Exception as exc:  # noqa: BLE001
        assert _clear(exc, "X"), repr(exc)
        return
    X64 = np.asarray(X, dtype=np.float64)
    assert X.dtype.kind in "iuf" and X64.ndim == 2 and X64.shape[1] == 2
    assert np.all(np.isfinite(mean)) and np.all(var >= 0)
    ref_mean, ref_var = model.predict_f(np.ascontiguousarray(X64))
    assert np.allclose(mean, ref_mean, rtol=1e-12, atol=1e-12) and np.allclose(var, ref_var, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(n=st.integers(1, 12), y_scale=st.floats(-320, 307), noise=st.floats(1e-6, 1e3))
def test_fit_on_any_target_scale_is_finite_or_refused(n, y_scale, noise):
    rng = np.random.default_rng(n)
    X = rng.uniform(-1, 1, (n, 2))
    y = np.sin(3 * X[:, 0]) * 10.0**y_scale
    model = sl.VISH(K.Matern(1.5), 2, sl.likelihoods.Gaussian(noise))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sl.ScaleWarning)  # meant: the property covers every target scale
            model.fit(X, y, optimize=False)
    except Exception as exc:  # noqa: BLE001
        assert _clear(exc, "y"), repr(exc)
        return
    assert np.isfinite(model.elbo())
    mean, var = model.predict_f(X)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var)) and np.all(var >= 0)


@SETTINGS
@given(name=st.sampled_from(["variance", "lengthscale", "noise", "bias", "input_scale"]), value=ODD_VALUES)
def test_set_params_is_all_or_nothing(fitted, name, value):
    model = fitted["vish"]
    before = model.get_params()
    try:
        model.set_params(**{name: value})
    except Exception as exc:  # noqa: BLE001
        assert _clear(exc, name), repr(exc)
        after = model.get_params()
        assert all(np.array_equal(np.asarray(after[k]), np.asarray(v)) for k, v in before.items())
        return
    try:
        with warnings.catch_warnings():
            # the library's own announced approximations (a hard quadrature at a tiny lengthscale)
            warnings.filterwarnings("ignore", "funk_hecke:", RuntimeWarning)
            warnings.filterwarnings("ignore", ".*shape truncated", RuntimeWarning)
            assert np.all(np.isfinite(model.predict_f(np.zeros((2, 2)))[0]))
    except CLEAR as exc:
        assert _clear(exc, name), repr(exc)  # e.g. a bias so large the lift overflows
    finally:
        model.set_params(**before)
