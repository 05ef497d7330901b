r"""HVGP's bound (Sun, Shi, Wilson & Grosse 2021, §4.2): block-independent whitened posteriors, one
block per component of the harmonic kernel decomposition, built from the whitened SVGP blocks of
:mod:`.whitened`; its predictive is the one ``predict_f`` and ``predict_components`` use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .statistics import check_variance_rounding
from .whitened import (
    gaussian_noise_gradient,
    kl_whitened,
    whitened_forward,
    whitened_kernel_backward,
    whitened_q_backward,
)

__all__ = ["BlockPredictive", "block_predictive", "BlockBound", "block_bound_whitened", "HINT_BLOCK"]

HINT_BLOCK = ("k_c(Z_c, Z_c) of block {c} is singular: inducing inputs coincide or lie where this "
         "component vanishes (e.g. on the mirror of a reflection for an odd component). Move "
         "them apart, use fewer per block, or raise jitter.")


@dataclass
class BlockBound:
    """Value and derivatives of :func:`block_bound_whitened` (lists hold one entry per block)."""

    value: float
    mean: np.ndarray
    var: np.ndarray
    dKuu: list
    dKuf: list
    dkff: np.ndarray
    dm: list
    dL: list
    dnoise: float


@dataclass
class BlockPredictive:
    """HVGP's predictive at a batch, block by block: ``means`` and ``reductions`` ``(C, B)``
    (block c adds :math:`a_c^\top m_c` to the mean and :math:`\\|L_c^\top a_c\\|^2 - \\|a_c\\|^2`
    to the prior variance), and per block ``(Lk, At, LtA, L)`` for the bound's backward pass."""

    means: np.ndarray
    reductions: np.ndarray
    cache: list

    def total(self, kff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Mean and variance of :math:`f = \sum_c f_c` given the total prior variances ``kff``."""
        mean, var = np.zeros(kff.shape[0]), np.array(kff, dtype=np.float64, copy=True)
        for m, r in zip(self.means, self.reductions):
            mean += m
            var += r
        return mean, var


def block_predictive(Kuus: Sequence[np.ndarray], Kufs: Sequence[np.ndarray], ms: Sequence[np.ndarray],
                     Ls: Sequence[np.ndarray]) -> BlockPredictive:
    r"""The one predictive of HVGP's block-independent whitened posterior, used by
    :func:`block_bound_whitened` and by ``predict_f`` / ``predict_components``: per block,
    :math:`a_c = L_{k,c}^{-1}k_c(Z_c, x)`, mean :math:`a_c^\top m_c`, variance
    :math:`k_c(x, x) - \|a_c\|^2 + \|L_c^\top a_c\|^2` (Sun et al. 2021, §4.2)."""
    C, B = len(Kufs), Kufs[0].shape[1] if len(Kufs) else 0
    means, reductions, cache = np.zeros((C, B)), np.zeros((C, B)), []
    for c, (Kuu, Kuf, L) in enumerate(zip(Kuus, Kufs, Ls)):
        L = np.tril(L)
        Lk, At, LtA = whitened_forward(Kuu, Kuf, L, f"k_c(Z_c, Z_c) of block {c}", HINT_BLOCK.format(c=c))
        means[c] = At.T @ ms[c]
        reductions[c] = np.einsum("mn,mn->n", LtA, LtA) - np.einsum("mn,mn->n", At, At)
        cache.append((Lk, At, LtA, L))
    return BlockPredictive(means, reductions, cache)


def block_bound_whitened(Kuus: Sequence[np.ndarray], Kufs: Sequence[np.ndarray], kff: np.ndarray,
                         ms: Sequence[np.ndarray], Ls: Sequence[np.ndarray], y: np.ndarray, likelihood,
                         num_data: int) -> BlockBound:
    r"""The HVGP ELBO on a batch with block-independent whitened posteriors, and its derivatives.

    Parameters
    ----------
    Kuus, Kufs
        Per block :math:`k_c(Z_c, Z_c)` ``(m_c, m_c)`` and :math:`k_c(Z_c, X_B)` ``(m_c, B)``.
    kff : ``(B,)``
        Prior variances :math:`k(x, x) = \sum_c k_c(x, x)` at the batch.
    ms, Ls
        Per block :math:`q(\tilde u_c) = N(m_c, L_cL_c^\top)` (lower triangles used).
    y, likelihood, num_data : ``(B,)``, a likelihood, int
        Targets, a likelihood with ``variational_expectations``, and N (the data term is scaled
        by N / B).

    Returns
    -------
    BlockBound
        Equal to :func:`~spherelab.decoupled.orthogonal_bound_whitened` with K = 0 on the
        block-diagonal :math:`K_{uu}`, stacked :math:`K_{uf}` and block-diagonal L (tested).
    """
    B = kff.shape[0]
    scale = num_data / B
    pred = block_predictive(Kuus, Kufs, ms, Ls)
    mean, var = pred.total(kff)
    fwd = pred.cache
    e, gmu, gvar = likelihood.variational_expectations(y, mean, np.maximum(var, 1e-300))
    value = scale * float(e.sum()) - sum(kl_whitened(m, f[3]) for m, f in zip(ms, fwd))
    gmu = scale * gmu
    gvar = scale * gvar
    dKuu, dKuf, dm, dL = [], [], [], []
    for m, (Lk, At, LtA, L) in zip(ms, fwd):
        dmc, dLc, dAt = whitened_q_backward(m, L, At, LtA, gmu, gvar)
        dKufc, dKuuc = whitened_kernel_backward(Lk, At, dAt)
        dKuu.append(dKuuc)
        dKuf.append(dKufc)
        dm.append(dmc)
        dL.append(dLc)
    dnoise = gaussian_noise_gradient(likelihood, y, mean, var, scale)
    # each block's explained variance ||a_c||^2 is at most k_c(x, x), so they sum to at most kff
    check_variance_rounding(value, gvar, (kff, kff, *pred.reductions), num_data)
    return BlockBound(float(value), mean, var, dKuu, dKuf, gvar.copy(), dm, dL, dnoise)
