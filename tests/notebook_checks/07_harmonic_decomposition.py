"""Checks of notebook 07's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    comps, P = g["comps"], g["P"]
    assert g["total_error"] < 1e-12
    # the text's shift properties, on the grid: k_0 invariant under a quarter turn, k_2 flipping sign
    # under it and invariant under a half turn, the pair k_1 + k_3 flipping sign under a half turn
    R90 = np.array([[0.0, -1.0], [1.0, 0.0]])
    turned = {c.index: (c(P[:200], P[:200] @ R90.T), c(P[:200], P[:200] @ (R90 @ R90).T), c(P[:200], P[:200]))
              for c in comps}
    k0, k13, k2 = turned[(0,)], turned[(1,)], turned[(2,)]
    assert np.allclose(k0[0], k0[2], atol=1e-12) and np.allclose(k2[0], -k2[2], atol=1e-12)
    assert np.allclose(k2[1], k2[2], atol=1e-12) and np.allclose(k13[1], -k13[2], atol=1e-12)
    lam, lam_e, lam_o = g["lam"], g["lam_e"], g["lam_o"]
    assert np.allclose(lam_e + lam_o, lam, rtol=1e-12) and not lam_e[1::2].any() and not lam_o[::2].any()
    explorer = g["explorer"]  # the selections' callbacks
    explorer.select(T=3)
    explorer.select(group="reflect x₁ and x₂ (2 × 2)")
    explorer.select(group="half turn × mirror x₁ = −x₂")
