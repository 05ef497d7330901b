r"""The algebra of the whitened decoupled bound from a batch's sufficient statistics
(:func:`~spherelab.bounds.gaussian_stats_bound_whitened`) on any array namespace: the host's NumPy,
or a device's arrays, so that a device runs a minibatch step's :math:`O(P^3)` algebra and its
backward pass where the statistics already are and sends back one copy of results
(:class:`~spherelab.rows.steps.ResidentSteps`).

With :math:`P = M + K` joint inducing variables :math:`p = [u; v]`, :math:`L_J = \mathrm{chol}(K_{pp})`,
:math:`A = L_J^{-1}K_{pf}`, :math:`\Phi = AA^\top`, :math:`\beta = Ay`, a whitened
:math:`q = N(m, LL^\top)` with :math:`L = \mathrm{diag}(L_u, L_v)` and :math:`s = N/B`:

.. math:: T = y^\top y - 2m^\top\beta + m^\top\Phi m + \textstyle\sum_n k_{nn} - \mathrm{tr}\,\Phi
          + \mathrm{tr}(L^\top\Phi L), \qquad
          \mathcal L = -\tfrac{sB}2\log 2\pi\sigma^2 - \frac{sT}{2\sigma^2} - \mathrm{KL}_u - \mathrm{KL}_v

(Tiao, thesis §3.4; Shi, Titsias & Mnih 2020, eq. 9 in whitened form). Nothing here converts
to a host float: the caller decides when the results cross.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from ..linalg import cholesky_backward, logdet_tri_gradient

__all__ = ["whitened_stats_terms", "kl_whitened_terms"]


def kl_whitened_terms(xp: Any, m, L):
    r""":math:`\mathrm{KL}[N(m, LL^\top)\,\|\,N(0, I)]` as a 0-d array of ``xp`` (lower triangle of ``L``)."""
    return 0.5 * (xp.sum(L * L) + m @ m - m.size - 2.0 * xp.sum(xp.log(xp.abs(xp.diag(L)))))


def whitened_stats_terms(xp: Any, solve: Callable, LJ, M: int, Phi, beta, sum_kff, yy: float, batch: int,
                         m_u, L_u, m_v, L_v, noise: float, num_data: int) -> SimpleNamespace:
    r"""The bound's value and every derivative, as arrays of ``xp``.

    Parameters
    ----------
    xp
        The arrays' module (``numpy``, or ``cupy``).
    solve
        ``solve(L, B, trans)``: :math:`L^{-1}B` (``trans=0``) or :math:`L^{-\top}B` (``trans=1``), L lower.
    LJ
        :math:`L_J` ``(P, P)``.
    Phi, beta, sum_kff
        :math:`\Phi` ``(P, P)``, :math:`\beta` ``(P,)`` and :math:`\sum_n k(x_n, x_n)` (a number or 0-d).
    yy, batch, noise, num_data
        :math:`y^\top y`, B, :math:`\sigma^2` and N (host numbers).
    m_u, L_u, m_v, L_v
        The whitened q: ``(M,)``, ``(M, M)``, ``(K,)``, ``(K, K)``.

    Returns
    -------
    SimpleNamespace
        ``value``, ``trace`` (:math:`\mathrm{tr}\,\Phi`) and ``total`` (T), 0-d; ``dm`` ``(P,)``,
        ``dL_u``, ``dL_v``; ``dPhi`` ``(P, P)`` and ``dbeta`` ``(P,)``; ``dKpp`` ``(P, P)``
        symmetric (through the Cholesky factor's reverse mode, the dependence of
        :math:`\Phi`, :math:`\beta` on :math:`L_J` at fixed :math:`K_{pf}` included); ``dnoise`` (0-d);
        ``a`` = :math:`-s/2\sigma^2` (host), which is also :math:`\partial\mathcal L/\partial k_{nn}`.
    """
    s = num_data / batch
    s2 = float(noise)
    a = -0.5 * s / s2
    L_u, L_v = xp.tril(L_u), xp.tril(L_v)
    Phi = 0.5 * (Phi + Phi.T)
    m = xp.concatenate([m_u, m_v])
    Phim = Phi @ m
    PLu = Phi[:M, :M] @ L_u
    PLv = Phi[M:, M:] @ L_v
    trace = xp.trace(Phi)
    total = yy - 2.0 * (m @ beta) + m @ Phim + sum_kff - trace + xp.sum(L_u * PLu) + xp.sum(L_v * PLv)
    value = (-0.5 * s * batch * np.log(2 * np.pi * s2) + a * total
             - kl_whitened_terms(xp, m_u, L_u) - kl_whitened_terms(xp, m_v, L_v))
    dm = 2.0 * a * (Phim - beta) - m
    dL_u = xp.tril(2.0 * a * PLu - L_u) + logdet_tri_gradient(L_u, xp)
    dL_v = xp.tril(2.0 * a * PLv - L_v) + logdet_tri_gradient(L_v, xp)
    dbeta = -2.0 * a * m
    G = xp.outer(a * m, m)
    G = G - a * xp.eye(G.shape[0])
    G[:M, :M] += a * (L_u @ L_u.T)
    G[M:, M:] += a * (L_v @ L_v.T)
    dLJ = -solve(LJ, 2.0 * G @ Phi + xp.outer(dbeta, beta), 1)
    dKpp = cholesky_backward(LJ, xp.tril(dLJ), xp, solve)
    dnoise = s * (-0.5 * batch / s2 + 0.5 * total / s2**2)
    return SimpleNamespace(value=value, trace=trace, total=total, dm=dm, dL_u=dL_u, dL_v=dL_v, dPhi=G,
                           dbeta=dbeta, dKpp=dKpp, dnoise=dnoise, a=a)

