"""Checks of notebook 05's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    explorer, gain, ACTIVATIONS = g["explorer"], g["gain"], g["ACTIVATIONS"]
    mat, arc = g["mat"], g["arc"]
    explorer.select(L=4, K=4)
    assert explorer.current["model"].W.shape[0] == 4  # the figure shows the selection
    _, var = explorer.current["model"].predict_f(explorer.grid)
    assert np.allclose(sum(explorer.current["terms"].values()), var, atol=1e-10)  # the terms add up
    explorer.select(act="softplus")
    assert g["shrink"] > 1.5  # K = 8 tightens the band
    assert max(gain[arc, a] for a in ACTIVATIONS) < min(gain[mat, a] for a in ACTIVATIONS)  # least to repair
