"""Linear algebra: the reverse mode of the Cholesky factorisation."""

from __future__ import annotations

import numpy as np


def test_cholesky_backward_against_finite_differences(rng):
    from spherelab.linalg import cholesky_backward

    A0 = rng.standard_normal((5, 5))
    S = A0 @ A0.T + 5 * np.eye(5)
    G = np.tril(rng.standard_normal((5, 5)))
    dS = cholesky_backward(np.linalg.cholesky(S), G)
    E = rng.standard_normal((5, 5))
    E = E + E.T
    h = 1e-6
    num = (np.sum(G * np.linalg.cholesky(S + h * E)) - np.sum(G * np.linalg.cholesky(S - h * E))) / (2 * h)
    assert np.isclose(np.sum(dS * E), num, rtol=1e-7)
