"""HVGP's block-diagonal bound equals the dense bound."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hvgp_data, randomise_block_q
from scipy.linalg import block_diag
from spherelab import HarmonicSVGP
from spherelab import kernels as K
from spherelab.bounds import block_bound_whitened, orthogonal_bound_whitened
from spherelab.groups import Reflection
from spherelab.likelihoods import Gaussian


def test_block_bound_equals_the_dense_bound(rng):
    X, y = hvgp_data(rng, 35)
    model = HarmonicSVGP(K.Matern(1.5, 0.7, bias=0.9), Reflection(2), [3, 4, 2, 5], likelihood=Gaussian(0.25))
    model.fit(X, y, optimize=False)
    randomise_block_q(model, rng)
    Kuus, Kufs, kff = model._matrices(X)
    blk = block_bound_whitened(Kuus, Kufs, kff, model.ms, model.Ls, y, model.likelihood, 100)
    dense = orthogonal_bound_whitened(block_diag(*Kuus), np.concatenate(Kufs), kff, np.concatenate(model.ms),
                                      block_diag(*model.Ls), np.zeros((0, 0)), np.zeros((0, 14)), np.zeros((0, 35)),
                                      np.zeros(0), np.zeros((0, 0)), y, model.likelihood, 100)
    assert blk.value == pytest.approx(dense.value, rel=1e-12)
    assert np.allclose(blk.mean, dense.mean, atol=1e-12) and np.allclose(blk.var, dense.var, atol=1e-12)
    offs = np.cumsum([0, *model.sizes])
    for c in range(model.num_blocks):  # the off-diagonal blocks are fixed at 0 in the block model
        blkc = slice(offs[c], offs[c + 1])
        assert np.allclose(blk.dKuu[c], dense.dKuu[blkc, blkc], atol=1e-10)
        assert np.allclose(blk.dL[c], dense.dL_u[blkc, blkc], atol=1e-10)
        assert np.allclose(blk.dm[c], dense.dm_u[blkc], atol=1e-10)
    assert np.allclose(np.concatenate(blk.dKuf), dense.dKuf, atol=1e-10)
    assert blk.dnoise == pytest.approx(dense.dnoise, rel=1e-10)


def test_the_block_bound_refuses_variances_float64_cannot_resolve():
    """k(x, x) = 1e20 explained by the blocks' inducing variables at noise 1e-2: the variance is
    rounding of ~1e6 nats, so the bound raises NumericalFailure instead of returning it."""
    from spherelab.linalg import NumericalFailure

    n = 20

    def at(r2):  # two blocks, each with one inducing variable explaining half of k(x, x)
        Kuus, Kufs = [np.array([[r2 / 2]])] * 2, [np.full((1, n), r2 / 2)] * 2
        return block_bound_whitened(Kuus, Kufs, np.full(n, r2), [np.zeros(1)] * 2, [1e-6 * np.eye(1)] * 2,
                                    np.zeros(n), Gaussian(1e-2), 3 * n)

    assert np.isfinite(at(1.5).value)
    with pytest.raises(NumericalFailure, match="variances .* not resolved in float64"):
        at(1e20)
