"""The device seam's zonal series on a grid (spherelab.sphere.series_columns, the CPU side of
``series_columns``): the activated features' cross-covariance and its reverse mode, against the
features' own zonal pair (zonal_pair, zonal_pair_gradients) and against a Gegenbauer table."""

from __future__ import annotations

import numpy as np
import pytest
from spherelab.features.zonal import norms_and_directions, zonal_pair, zonal_pair_gradients
from spherelab.sphere import zonal_series, zonal_table
from spherelab.sphere.lift import lifted_row_gradients
from spherelab.sphere.series_columns import normalized_zonal, series_columns_backward_cpu, series_columns_cpu


@pytest.mark.parametrize("dim", [2, 3, 9])
def test_values_and_reverse_mode_equal_the_zonal_pair(dim, rng):
    a = rng.standard_normal(6)
    X, W = rng.standard_normal((11, dim)), rng.standard_normal((4, dim))
    W[0] = 2.5 * X[3]  # t = 1 exactly: the derivative's factor vanishes there
    rx, Xh = norms_and_directions(X, "X")
    rw, Wh = norms_and_directions(W, "W")
    T = Xh @ Wh.T
    c, alpha = normalized_zonal(a, dim)
    F = series_columns_cpu(T, rx, rw, c, alpha)
    expected = zonal_pair(X, W, lambda t: zonal_series(a, dim, t))
    assert np.allclose(F, expected, rtol=1e-13, atol=1e-13 * np.abs(expected).max())
    G = rng.standard_normal(F.shape)
    A, B = series_columns_backward_cpu(T, G, c, alpha)
    dX, dW = lifted_row_gradients(A, B, rx, Xh, rw, Wh)
    eX, eW = zonal_pair_gradients(G, X, W, lambda t: zonal_series(a, dim, t, derivative=True))
    assert np.allclose(dX, eX, rtol=1e-12, atol=1e-12 * np.abs(eX).max())
    assert np.allclose(dW, eW, rtol=1e-12, atol=1e-12 * np.abs(eW).max())


def test_the_normalised_coefficients_are_the_zonal_functions(rng):
    a, t = rng.standard_normal(5), rng.uniform(-1, 1, 9)
    c, alpha = normalized_zonal(a, 5)
    assert alpha == 1.5
    F = series_columns_cpu(t[:, None], np.ones(9), np.ones(1), c, alpha)[:, 0]
    assert np.allclose(F, zonal_table(4, 5, t) @ a, rtol=1e-13, atol=1e-13)


def test_inner_products_past_the_ends_are_clipped():
    c, alpha = normalized_zonal(np.array([0.3, 1.0, -0.5]), 3)
    F = series_columns_cpu(np.array([[1.0 + 1e-12, -1.0 - 1e-12]]), np.ones(1), np.ones(2), c, alpha)
    G = series_columns_cpu(np.array([[1.0, -1.0]]), np.ones(1), np.ones(2), c, alpha)
    assert np.array_equal(F, G)
