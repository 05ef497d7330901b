"""The float32 option of the statistics pass: products in single precision, accumulated and
finished in double; errors at the level single precision allows, and refused bad values."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.bounds.vish import harmonic_statistics
from spherelab.linalg import NumericalFailure

pytestmark = pytest.mark.equality  # sums in another order: run under several chunk sizes and thread counts


@pytest.mark.parametrize("prior", ["features", "kernel"])
def test_float32_statistics_are_close_and_the_rest_is_double(rng, prior):
    X = rng.uniform(-1, 1, (3_000, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(3_000)
    kernel = K.Matern(1.5, 1.0)
    feats = sl.HarmonicFeatures(4)
    feats.initialise(4, None)
    feats.bind(kernel)
    a = harmonic_statistics(kernel, feats, X, y, chunk_size=700)
    b = harmonic_statistics(kernel, feats, X, y, chunk_size=700, gram_dtype="float32")
    assert b.G.dtype == np.float64 and b.c.dtype == np.float64
    assert 0 < np.abs(b.G - a.G).max() <= 1e-5 * np.abs(a.G).max()  # really single precision, and close
    assert np.abs(b.c - a.c).max() <= 1e-5 * np.abs(a.c).max()
    assert b.yy == a.yy and b.sum_diag == a.sum_diag and b.n == a.n  # double precision outside the products
    m64 = sl.VISH(K.Matern(1.5, 1.0), 4, sl.likelihoods.Gaussian(0.1), prior=prior).fit(X, y, optimize=False)
    m32 = sl.VISH(K.Matern(1.5, 1.0), 4, sl.likelihoods.Gaussian(0.1), gram_dtype="float32", prior=prior)
    m32.fit(X, y, optimize=False)
    # the error sits in the data-fit term, whose scale is y'y / noise (both priors share it)
    assert abs(m32.elbo() - m64.elbo()) <= 7e-7 * float(y @ y) / 0.1  # 1e-5 of the kernel prior's |ELBO| here
    assert np.allclose(m32.predict_f(X[:50])[0], m64.predict_f(X[:50])[0], atol=1e-4)


def test_gram_dtype_is_checked():
    with pytest.raises(ValueError, match="gram_dtype must be 'float64' or 'float32'"):
        sl.VISH(K.Matern(1.5), 2, gram_dtype="float16")
    with pytest.raises(ValueError, match="gram_dtype"):
        harmonic_statistics(K.Matern(1.5), sl.HarmonicFeatures(2), np.zeros((3, 2)), np.zeros(3), gram_dtype="half")


@pytest.fixture(scope="module")
def ill_conditioned():
    """Inputs squeezed near the pole of S^8 (input scale 30): G is ill-conditioned, and at a small
    noise variance float32 statistics lose the bound (RESULTS.md, "float32 bound")."""
    X, y = sl.datasets.synthetic_regression(40_000, seed=0)
    kernel = K.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, 30.0))
    feats = sl.HarmonicFeatures(3)
    feats.initialise(9, None)
    feats.bind(kernel)
    s64 = harmonic_statistics(kernel, feats, X, y)
    s32 = harmonic_statistics(kernel, feats, X, y, gram_dtype="float32")
    return X, y, kernel, feats, s64, s32


def test_float32_statistics_are_refused_where_they_cannot_support_the_bound(ill_conditioned):
    from spherelab.bounds.precision import FLOAT32_TOLERANCE, InsufficientPrecision, check_precision
    from spherelab.bounds.vish import collapsed_bound

    X, y, kernel, feats, s64, s32 = ill_conditioned
    assert s32.rounding == np.finfo(np.float32).eps and s64.rounding == 0.0
    lam, v = feats.Kuu_inverse_diag(kernel), kernel.at_one()
    outcomes = {}
    for noise in (1e-1, 1e-6):
        b64 = collapsed_bound(lam, v, noise, s64)
        check_precision(b64, s64)  # float64 statistics are never refused
        try:
            b32 = collapsed_bound(lam, v, noise, s32)
        except NumericalFailure as why:  # float32's rounding left B indefinite (the order of the sums decides)
            outcomes[noise] = ("refused", None, str(why))
            continue
        actual = abs(b32.value - b64.value) / abs(b64.value)
        try:
            check_precision(b32, s32)
            outcomes[noise] = ("kept", actual)
        except InsufficientPrecision as why:
            outcomes[noise] = ("refused", actual, str(why))
    assert outcomes[1e-1][0] == "kept" and outcomes[1e-1][1] < FLOAT32_TOLERANCE
    assert outcomes[1e-6][0] == "refused" and ("condition number" in outcomes[1e-6][2]
                                               or "Cholesky of B" in outcomes[1e-6][2])


def test_a_float32_fit_replaces_statistics_that_cannot_serve_it(ill_conditioned, tmp_path):
    X, y = ill_conditioned[:2]

    def fit(dtype):
        kernel = K.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, 30.0))
        model = sl.VISH(kernel, 3, sl.likelihoods.Gaussian(1e-6, floor=1e-8), gram_dtype=dtype)
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            return model.fit(X, y, train_lift=False, maxiter=30)

    m64, m32 = fit("float64"), fit("float32")
    assert "float32 statistics replaced by float64" in m32.fit_report_["statistics"]
    assert m32.stats.rounding == 0.0 and m32.passes == m64.passes + 1
    for key, value in m64.get_params().items():  # the same fit, from the same start, on the same statistics
        assert np.array_equal(np.asarray(m32.get_params()[key]), np.asarray(value)), key
    # a model holding float32 statistics in that regime: elbo() recomputes them, or says why it cannot
    kernel = K.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, 30.0))
    raw = sl.VISH(kernel, 3, sl.likelihoods.Gaussian(1e-6, floor=1e-8), gram_dtype="float32").fit(
        X, y, optimize=False)
    assert raw.stats.rounding > 0
    assert np.isclose(raw.elbo(), sl.VISH(K.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(8, 30.0)), 3,
                                          sl.likelihoods.Gaussian(1e-6, floor=1e-8)).fit(X, y, optimize=False).elbo(),
                      rtol=1e-12)
    raw.save(tmp_path / "m.npz")
    loaded = sl.load(tmp_path / "m.npz")
    assert loaded.stats.rounding == raw.stats.rounding
    with pytest.raises(ValueError, match="include_data"):
        loaded.elbo()
