"""Linear algebra: the reverse mode of the Cholesky factorisation."""

from __future__ import annotations

import numpy as np
import spherelab as sl


def test_cholesky_backward_against_finite_differences(rng):
    from spherelab.linalg import cholesky_backward

    A0 = rng.standard_normal((5, 5))
    S = A0 @ A0.T + 5 * np.eye(5)
    G = np.tril(rng.standard_normal((5, 5)))
    dS = cholesky_backward(np.linalg.cholesky(S), G)
    check = sl.testing.check_named_gradients(lambda S: float(np.sum(G * np.linalg.cholesky(S))), {"S": S}, {"S": dS},
                                             symmetric=["S"], rtol=1e-7, atol=1e-9)
    assert check.ok, str(check)
