"""Arguments checked where they enter, with errors that name them."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl


def test_inputs_without_columns_are_named_as_such():
    with pytest.raises(ValueError, match="X must have at least one input column"):
        sl.VISH(sl.kernels.Matern(1.5), 2).fit(np.zeros((10, 0)), np.zeros(10))
    with pytest.raises(ValueError, match="X must have at least one input column"):
        sl.models.ExactGP(sl.kernels.Matern(1.5), 0.1).fit(np.zeros((10, 0)), np.zeros(10))
