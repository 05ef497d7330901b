"""The float32 option of the statistics pass: products in single precision, accumulated and
finished in double; errors at the level single precision allows, and refused bad values."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl
from spherelab import kernels as K
from spherelab.bounds.harmonic import harmonic_statistics


def test_float32_statistics_are_close_and_the_rest_is_double(rng):
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
    m64 = sl.VISH(K.Matern(1.5, 1.0), 4, sl.likelihoods.Gaussian(0.1)).fit(X, y, optimize=False)
    m32 = sl.VISH(K.Matern(1.5, 1.0), 4, sl.likelihoods.Gaussian(0.1), gram_dtype="float32").fit(X, y, optimize=False)
    assert np.isclose(m32.elbo(), m64.elbo(), rtol=1e-5)
    assert np.allclose(m32.predict_f(X[:50])[0], m64.predict_f(X[:50])[0], atol=1e-4)


def test_gram_dtype_is_checked():
    with pytest.raises(ValueError, match="gram_dtype must be 'float64' or 'float32'"):
        sl.VISH(K.Matern(1.5), 2, gram_dtype="float16")
    with pytest.raises(ValueError, match="gram_dtype"):
        harmonic_statistics(K.Matern(1.5), sl.HarmonicFeatures(2), np.zeros((3, 2)), np.zeros(3), gram_dtype="half")
