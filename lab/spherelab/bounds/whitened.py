r"""Whitened SVGP blocks (:math:`u = L_{uu}\tilde u`, :math:`q(\tilde u) = N(m, LL^\top)`,
prior N(0, I)): the forward pass, the reverse mode into q and into :math:`K_{uu}`, :math:`K_{uf}`,
the KL term and the Gaussian noise gradient: the pieces the decoupled bounds
(:mod:`.decoupled`) and HVGP's block bound (:mod:`.hvgp`) are built from."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from ..linalg import cholesky_backward, cholesky_or_explain, logdet_tri_gradient

__all__ = [
    "kl_whitened",
    "whitened_forward",
    "whitened_q_backward",
    "whitened_kernel_backward",
    "gaussian_noise_gradient",
]

def kl_whitened(m: np.ndarray, L: np.ndarray) -> float:
    r""":math:`\mathrm{KL}[N(m, LL^\top)\,\|\,N(0, I)]` (lower triangle of L used)."""
    d = np.diag(L)
    return 0.5 * (float(np.sum(L * L)) + float(m @ m) - m.size - 2.0 * float(np.sum(np.log(np.abs(d)))))


def whitened_forward(Kuu: np.ndarray, Kuf: np.ndarray, L: np.ndarray, name: str, hint: str):
    r"""One whitened block :math:`u = L_{uu}\tilde u`, :math:`q(\tilde u) = N(m, LL^\top)`:
    returns ``(Lk, At, LtA)`` with :math:`L_k = \mathrm{chol}(K_{uu})`, :math:`A_t = L_k^{-1}K_{uf}`,
    :math:`L^\top A_t`; the block adds :math:`A_t^\top m` to the mean and
    :math:`-\|A_t\|^2 + \|L^\top A_t\|^2` (column norms) to the variance."""
    Lk = cholesky_or_explain(Kuu, name, hint)
    At = solve_triangular(Lk, Kuf, lower=True)
    return Lk, At, L.T @ At


def whitened_q_backward(m, L, At, LtA, gmu, gvar):
    r"""Reverse mode of one whitened block given :math:`\partial/\partial\mu`, :math:`\partial/\partial\nu`
    (``(B,)`` each) and the KL term: ``(dm, dL, dAt)``."""
    dm = At @ gmu - m
    Ag = At * gvar
    dL = np.tril(2.0 * (Ag @ LtA.T) - L)
    dL += logdet_tri_gradient(L)
    dAt = np.outer(m, gmu) - 2.0 * Ag + 2.0 * (L @ (LtA * gvar))
    return dm, dL, dAt


def whitened_kernel_backward(Lk, At, dAt, dLk=None):
    r"""Chain :math:`\partial/\partial A_t` (:math:`A_t = L_k^{-1}K_{uf}`) into ``(dKuf, dKuu)``;
    ``dLk`` adds other uses of :math:`L_k`."""
    dKuf = solve_triangular(Lk, dAt, lower=True, trans=1)
    dLk = -np.tril(dKuf @ At.T) if dLk is None else dLk - np.tril(dKuf @ At.T)
    return dKuf, cholesky_backward(Lk, dLk)


def gaussian_noise_gradient(likelihood, y, mean, var, scale: float) -> float:
    r""":math:`\partial/\partial\sigma^2` of the scaled expected log-likelihood, from the
    likelihood's own ``parameter_gradients`` (0 for a likelihood without a noise variance)."""
    return scale * likelihood.parameter_gradients(y, mean, var).get("noise", 0.0)
