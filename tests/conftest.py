"""Shared fixtures and independent reference implementations for the tests."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# one BLAS and one Numba thread for the whole suite (and the notebook kernels it starts): the
# tests are small, and on a shared 2-core machine busy thread pools made the suite 10x slower
# (spherelab.threads reads it at import)
os.environ.setdefault("SPHERELAB_THREADS", "1")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_zonal(ell: int, dim: int, t: np.ndarray) -> np.ndarray:
    """Z_l(t) from scipy (independent of spherelab's recurrence)."""
    from scipy.special import eval_gegenbauer

    t = np.clip(t, -1.0, 1.0)
    if ell == 0:
        return np.ones_like(t)
    if dim == 2:
        return 2.0 * np.cos(ell * np.arccos(t))
    alpha = (dim - 2) / 2.0
    return (ell + alpha) / alpha * eval_gegenbauer(ell, alpha, t)


def check_collapsed_gradient(model, X, y, h=1e-6) -> float:
    """Every entry of the collapsed bound's gradient (q re-solved in closed form at each point)
    against central differences; returns the collapsed ELBO at the current parameters."""
    rest = model.parameter_vector(model.collapsed_names)
    value, g = model.collapsed_objective(rest, X, y)
    assert value < 1e300
    for i in range(rest.size):
        r = rest.copy()
        r[i] += h
        fp = model.collapsed_objective(r, X, y)[0]
        r[i] -= 2 * h
        fm = model.collapsed_objective(r, X, y)[0]
        num = (fp - fm) / (2 * h)
        assert np.isclose(g[i], num, rtol=1e-4, atol=1e-6), (i, g[i], num)
    model.collapsed_objective(rest, X, y)  # leave the model at the point checked
    return -value
