"""Checks of notebook 01's stated results, run in its kernel after the notebook (tests/test_notebooks.py)."""

import numpy as np
import spherelab as sl


def check(g):
    addition, gallery, rows = g["addition"], g["gallery"], g["rows"]
    assert addition.err < 1e-11  # the addition theorem's error the figure shows
    addition.degree.value = g["L_MAX"]  # and after the sliders move
    addition.lat.value = -60.0
    assert addition.err < 1e-11
    gallery.degree.value = 5  # the callbacks, the way a slider calls them
    gallery.order.value = 7
    gallery.view.value = 40.0
    assert gallery.title.get_text() == "degree ℓ = 5, order m = 4 · cos"
    # the counts the text quotes, from the same function
    assert sl.cumulative_num_harmonics(4, 9) == 660
    assert all(sl.cumulative_num_harmonics(L, 3) == (L + 1) ** 2 for L in range(16))
    # the table of the identities' errors
    assert max(r[3] for r in rows) < 1e-11 and max(r[5] for r in rows) < 1e-11
    assert np.isfinite([r[3] for r in rows]).all()
