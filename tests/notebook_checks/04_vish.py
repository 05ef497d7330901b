"""Checks of notebook 04's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np


def check(g):
    explorer, SIZE = g["degree_explorer"], g["SIZE"]
    elbos = explorer.elbos
    assert np.all(np.diff(elbos) >= -1e-8 * np.abs(elbos[1:])), "the bound must rise with L"
    assert np.all(elbos <= explorer.exact_lml + 1e-8 * abs(explorer.exact_lml))  # and stay below it
    explorer.L.value = g["L_MAX"]  # the slider's callback
    ELBO2 = g["ELBO2"]
    assert ELBO2[1] > ELBO2[0]  # the text's first comparison
    # beyond the lift stage's subsample, a fit reads every row exactly once
    assert all(passes == 1 for n, M, fit_s, pass_s, passes in g["rows"] if n > SIZE.SUBSAMPLE)
    if g.get("da") is not None:  # the Dask cell ran: the two fits agree to the optimiser's tolerance
        assert np.isclose(g["in_memory"].elbo(), g["on_disk"].elbo(), rtol=1e-7) and g["gap"] < 1e-5
