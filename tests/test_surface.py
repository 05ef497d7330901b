"""The public functions outside the models at NaN, infinities, complex and out-of-domain arguments:
a clear error naming the argument, or the documented value (the Gegenbauer polynomials and the
activations are defined on every finite real; a zonal kernel only on cosines in [-1, 1])."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import spherelab as sl
from spherelab import activations as A
from spherelab import kernels as K

T_FUNCTIONS = {
    "gegenbauer": lambda t: sl.gegenbauer(3, 1.5, t),
    "gegenbauer_series": lambda t: sl.gegenbauer_series(np.ones(3), 1.5, t),
    "gegenbauer_table": lambda t: sl.gegenbauer_table(4, 1.5, t),
    "normalized_gegenbauer_table": lambda t: sl.normalized_gegenbauer_table(4, 1.5, t),
    "normalized_gegenbauer_derivative_table": lambda t: sl.normalized_gegenbauer_derivative_table(4, 1.5, t),
    "zonal_table": lambda t: sl.zonal_table(4, 3, t),
    "zonal_series": lambda t: sl.zonal_series(np.ones(3), 3, t),
    **{f"{a.__class__.__name__}.shape": (lambda t, a=a: a.shape(t)) for a in
       (A.ReLU(), A.Step(), A.SquaredReLU(), A.Softplus(2.0), A.Swish(1.0), A.Erf())},
    "Softplus.shape_gradients": lambda t: A.Softplus(2.0).shape_gradients(t),
    **{f"{k.__class__.__name__}.{m}": (lambda t, k=k, m=m: getattr(k, m)(t)) for k in
       (K.Matern(1.5), K.ArcCosine(1), K.IntrinsicMatern(3)) for m in ("shape", "shape_dt", "shape_gradients")},
}


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 0.5j], ids=["nan", "inf", "-inf", "complex"])
@pytest.mark.parametrize("name", list(T_FUNCTIONS))
def test_non_finite_and_complex_arguments_are_refused_by_name(name, bad):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy warning on the way
        with pytest.raises((ValueError, TypeError), match=r"\bt\b"):
            T_FUNCTIONS[name](np.array([0.2, bad]))


@pytest.mark.parametrize("name", [n for n in T_FUNCTIONS if n.split(".")[0] in ("Matern", "ArcCosine",
                                                                                  "IntrinsicMatern")])
def test_a_zonal_kernel_takes_cosines_only(name):
    with pytest.raises(ValueError, match=r"t must lie in \[-1, 1\]"):
        T_FUNCTIONS[name](np.array([0.5, 1.5]))
    T_FUNCTIONS[name](np.array([-1.0, 1.0 + 1e-12]))  # rounding at the poles is accepted


def test_polynomials_are_their_values_outside_the_interval():
    from scipy.special import eval_gegenbauer

    t = np.array([-3.0, -1.01, 1.5, 7.0])
    assert np.allclose(sl.gegenbauer(3, 1.5, t), eval_gegenbauer(3, 1.5, t), rtol=1e-13)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a FutureWarning from a broadcast view before)
        assert np.allclose(sl.gegenbauer(np.arange(4), 1.5, 1.5), eval_gegenbauer(np.arange(4), 1.5, 1.5))


@pytest.mark.parametrize("call", [
    lambda: sl.log_num_harmonics(np.inf, 3), lambda: sl.log_num_harmonics(np.nan, 3),
    lambda: sl.log_num_harmonics(2.5, 3), lambda: sl.log_num_harmonics(-1, 3),
    lambda: sl.log_gegenbauer_at_one(np.nan, 1.0), lambda: sl.log_gegenbauer_at_one(3, np.nan),
    lambda: sl.log_gegenbauer_at_one(2.5, 1.0), lambda: sl.log_gegenbauer_at_one(3, -1.0),
    lambda: sl.num_harmonics(np.nan, 3), lambda: sl.num_harmonics(2, 1),
])
def test_log_space_helpers_refuse_bad_degrees(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises((ValueError, TypeError)):
            call()


@pytest.mark.parametrize("call, name", [
    (lambda: sl.metrics.roc_auc(np.array([0, 1]), np.array([0.1, np.nan])), "score"),
    (lambda: sl.datasets.synthetic_regression(10, noise=np.nan), "noise"),
    (lambda: sl.datasets.snelson_like(10, noise=-1.0), "noise"),
    (lambda: sl.orthographic_grid(10, np.nan), "lon0"),
    (lambda: sl.log_sphere_area(np.nan), "k"),
    (lambda: sl.features.greedy_directions(-1, 3, 2, np.random.default_rng(0)), "ell"),
])
def test_helpers_name_their_bad_argument(call, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises((ValueError, TypeError), match=name):
            call()
