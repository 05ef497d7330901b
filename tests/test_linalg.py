"""Linear algebra: the reverse mode of the Cholesky factorisation."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_logdet_tri_gradient_is_the_lower_triangle_of_the_inverse_transpose(rng):
    from spherelab.linalg import inv_tri_T, logdet_tri_gradient

    L = np.tril(rng.standard_normal((6, 6))) + np.diag(rng.choice([-3.0, 3.0], 6))  # either sign
    G = logdet_tri_gradient(L)
    assert np.allclose(G, np.tril(inv_tri_T(L)), rtol=1e-13, atol=1e-15)
    E = np.zeros_like(L)
    E[4, 4] = E[5, 2] = 1e-6
    fd = (np.log(abs(np.linalg.det(L + E))) - np.log(abs(np.linalg.det(L - E)))) / 2e-6
    assert fd == pytest.approx(np.sum(G * E) / 1e-6, rel=1e-7)
    assert logdet_tri_gradient(np.zeros((0, 0))).shape == (0, 0)


def test_forward_solve_matches_substitution_in_every_layout(rng):
    from scipy.linalg import LinAlgError, solve_triangular
    from spherelab.linalg import forward_solve

    L = np.tril(rng.standard_normal((7, 7))) + 4.0 * np.eye(7)
    B = rng.standard_normal((7, 11))
    for b in (B, np.asfortranarray(B), B[:, ::2], B[:, 0], B[:, :0]):  # row-major: dtrsm from the right
        x = forward_solve(L, b)
        assert x.shape == b.shape and np.allclose(x, solve_triangular(L, b, lower=True), rtol=1e-14, atol=1e-15)
    L[3, 3] = 0.0
    with pytest.raises(LinAlgError):
        forward_solve(L, B)
