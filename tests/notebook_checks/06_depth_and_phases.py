"""Checks of notebook 06's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    drop, REL, depth, smooth = g["drop"], g["REL"], g["depth"], g["smooth"]
    assert all(drop[d, 1] > drop[d, 8] for d in (3, 10)) and drop[10, 1] > drop[3, 1]
    assert np.all(REL[3, 1][2::2] == 0)  # the one-layer NTK's odd levels >= 3
    assert smooth.beta_star > 1.0
    assert not g["flat"] or int(np.argmax(depth.elbos)) == 0  # then the curve is highest at the smallest beta
    elbo_trace = g["elbo_trace"]
    assert elbo_trace[-1] > elbo_trace[0] and g["vish2"].elbo() < g["full"].elbo()
    if not g["SIZE"].smoke:  # three short rounds (the test suite's size) barely move degree 1
        assert g["low"] > g["high"]
    depth.beta.value = 1.0  # the sliders' callbacks
    depth.beta.value = round(depth.beta_star, 2)
    g["viewer"].round.value = 0
    g["viewer"].round.value = g["ROUNDS"]
    # the text's counts: 2 phases per degree to 8 on S^2 are 17 of the 81 harmonics
    assert g["phases"].num_features == 17 and g["sl"].cumulative_num_harmonics(8, 3) == 81
