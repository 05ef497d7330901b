"""Metrics."""

from __future__ import annotations

import numpy as np
import pytest
import spherelab as sl


# ---- SUSY-like classification data and the AUC -------------------------------------------------
def test_roc_auc_against_pairwise_definition(rng):
    y = (rng.uniform(size=60) < 0.4).astype(float)
    score = np.round(rng.standard_normal(60) + y, 1)  # rounding makes ties
    pos, neg = score[y == 1], score[y == 0]
    pairwise = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert np.isclose(sl.metrics.roc_auc(y, score), pairwise, rtol=0, atol=1e-14)
    assert sl.metrics.roc_auc(y, y) == 1.0
    with pytest.raises(ValueError, match="both classes"):
        sl.metrics.roc_auc(np.ones(3), np.arange(3.0))
    with pytest.raises(ValueError, match="only 0 and 1"):
        sl.metrics.roc_auc(np.array([0, 2.0]), np.arange(2.0))
