"""Checks of notebook 02's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    explorer, SHARE, matched, chordal = g["explorer"], g["SHARE"], g["matched"], g["chordal"]
    explorer.kernel.value = "arc-cosine, order 1"
    assert explorer.rep["activation_only_zero"].size == 0  # ReLU matches arc-cos exactly
    explorer.act.value = "erf"
    explorer.dim.value = 7
    assert explorer.rep["kernel_only_zero"][:3].tolist() == [3, 5, 7]
    assert matched == ["arc-cosine, order 1"]  # zero only for ReLU's own kernel
    assert all(np.all(np.diff([SHARE[n][i] for n in chordal]) > 0) for i in range(3))  # grows with roughness
    assert SHARE["intrinsic Matérn-3/2"][0] > 10 * SHARE["intrinsic Matérn-3/2"][2]  # falls with the dimension
