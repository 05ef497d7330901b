"""Shared fixtures and independent reference implementations for the tests."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


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
