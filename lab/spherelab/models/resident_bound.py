r"""One evaluation of the whitened Gaussian bound on rows held on a device, with one copy back.

The decoupled models (:class:`~spherelab.OrthogonalSVGP`: a full batch, or a minibatch step of
:class:`~spherelab.models.decoupled_step.ResidentSteps`) and HVGP (:class:`~spherelab.HarmonicSVGP`)
share it. On the device: the joint inducing block's factor :math:`L_J` (for inducing points
:math:`K_{pp} = k(S, S)` itself, from the kernel's column block at its sources :math:`S = [Z; W]`),
the statistics :math:`\Phi`, :math:`\beta` (:meth:`ResidentRows.gram`), q at the whitened optimum
when the bound is collapsed (:math:`\Lambda = I + \Phi/\sigma^2`, the mean
:math:`\Lambda^{-1}\beta/\sigma^2` and per diagonal block of :math:`\Lambda` the factor of its
inverse, as :func:`~spherelab.linalg.inverse_factor` on the host), the bound and its backward pass
(:func:`~spherelab.bounds.whitened_stats.whitened_stats_terms`), the rows' chain
(:meth:`ResidentRows.device_sums`) and, for inducing points, :math:`K_{pp}`'s chain into the same
sums. Then one copy back: the value, the checks' numbers, the sums, :math:`\partial L/\partial K_{pp}`
where the host built :math:`K_{pp}`, and q's gradient (or the optimal q).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from ..bounds.statistics import check_trace_term
from ..bounds.whitened_stats import whitened_stats_terms
from ..features.device_columns import KernelColumns
from .decoupled_resident import ResidentRows, copy_back

__all__ = ["resident_bound", "own_inducing_block", "split_flat"]


def own_inducing_block(blocks: list) -> bool:
    """Whether :math:`K_{pp}` is the column block's own kernel at its sources (inducing points, with
    or without orthogonal inputs): one :class:`~spherelab.features.device_columns.KernelColumns`."""
    return len(blocks) == 1 and isinstance(blocks[0], KernelColumns)


def resident_bound(model, rows: ResidentRows, M: int, num_data: int, *, q: tuple | None = None,
                   optimum: Sequence[slice] | None = None, inducing: Callable[[], np.ndarray] | None = None,
                   q_back: bool = True) -> SimpleNamespace | None:
    r"""The bound at ``rows`` and its derivatives, in one copy back (the module's docstring).

    Parameters
    ----------
    model
        A model with the hooks of :class:`ResidentRows` and ``likelihood`` (Gaussian) and ``jitter``.
    rows
        The rows on the device (all of them, or a minibatch's: :meth:`ResidentRows.batch`).
    M, num_data
        q's split into u (the first M) and v, and N (the data term is scaled by N / len(rows)).
    q
        ``(m_u, m_v, L_u, L_v)`` on the device; or None with ``optimum``: the diagonal blocks of
        :math:`\Lambda` whose inverses are q's covariance blocks (collapsed bound).
    inducing
        Builds the joint inducing block :math:`K_{pp}` ``(P, P)`` on the host, called unless the
        model's column blocks are one kernel block (:func:`own_inducing_block`), whose :math:`K_{pp}`
        the device builds (with the host's jitter on ``[:M, :M]`` and ``[M:, M:]``).
    q_back
        Whether q's gradient (or the optimal q) is copied back (False: only whether it is finite;
        a caller that steps q on the device).

    Returns
    -------
    SimpleNamespace or None
        ``value``, ``dnoise``, ``dkff`` (:math:`\partial\mathcal L/\partial k_{nn}`), ``sums`` (the host
        copies of :meth:`ResidentRows.device_sums` for :meth:`ResidentRows.finish_sums`), ``dKpp``
        (host, or None where the device built :math:`K_{pp}`), ``q`` (host, with ``q_back``: the flat
        gradient ``[dm, dL_u, dL_v]`` given ``q``; the flat optimal ``[m, L_u, L_v]`` given ``optimum``) and
        ``gq`` (q's gradient on the device). None where the device's factor failed or a result is
        not finite: the host decides (its jitter, its errors). Rows outside the lift raise its
        error; a trace term float64 cannot resolve raises
        :class:`~spherelab.linalg.NumericalFailure`, as the host's bound does.
    """
    ops, xp, kernel = model.ops, model.ops.array_namespace(), model.kernel
    blocks = model.column_blocks()
    own = own_inducing_block(blocks)
    noise, n = model.likelihood.variance, rows.X.shape[0]
    # the results are judged on the host from the copy back (a rejected row's r = 0 makes NaN of its
    # gradients, where NumPy's stand-in would also warn)
    with np.errstate(all="ignore"):
        if own:
            T_pp, K_pp = blocks[0].columns(ops, blocks[0].r, blocks[0].U)
            Kd = _with_jitter(xp, K_pp, M, model.jitter)
        else:
            Kd = ops.to_device(inducing())
        try:
            LJ = xp.linalg.cholesky(Kd)  # NumPy raises; cuSOLVER leaves NaN, which the copy back shows
            G, c, r2, bad = rows.gram(model, LJ, blocks)
            if optimum is not None:
                q = _optimum(xp, ops, G, c, noise, M, optimum)
        except np.linalg.LinAlgError:
            return None
        m_u, m_v, L_u, L_v = q
        t = whitened_stats_terms(xp, _solver(ops), LJ, M, G, c, r2 * kernel.at_one(), rows.yy, n,
                                 m_u, L_u, m_v, L_v, noise, num_data)
        parts = rows.device_sums(model, 2.0 * ops.device_solve(LJ, t.dPhi, trans=1),
                                 ops.device_solve(LJ, t.dbeta, trans=1), t.a)
        if own:  # K_pp's chain joins the rows': both are the kernel's columns at the same sources
            dX, dS, dvar, dlen = blocks[0].backward(ops, T_pp, _jitter_backward(xp, t.dKpp, M, model.jitter),
                                                    blocks[0].r, blocks[0].U)
            parts = [parts[0] + dvar, parts[1] + dlen, *parts[2:4], parts[4] + dX + dS]
        gq = xp.concatenate([t.dm, t.dL_u.ravel(), t.dL_v.ravel()])
        qout = gq if optimum is None else xp.concatenate([xp.concatenate([m_u, m_v]), L_u.ravel(), L_v.ravel()])
        if not q_back:  # one number: 0, or NaN where q's gradient is not finite
            qout = xp.where(xp.all(xp.isfinite(qout)), 0.0, xp.nan)
        head = xp.stack([xp.asarray(bad, dtype=xp.float64), t.value, t.trace, r2, t.dnoise])
    host = copy_back(ops, [head, qout, *parts, *([] if own else [t.dKpp])])  # the evaluation's one copy back
    head, qout, sums = host[0], host[1], host[2:2 + len(parts)]
    if head[0]:
        rows.rejected(model)
    if not all(np.all(np.isfinite(a)) for a in host[1:]) or not np.all(np.isfinite(head)):
        return None
    value, trace, sum_r2, dnoise = (float(v) for v in head[1:])
    s = num_data / n
    check_trace_term(value, s * sum_r2 * kernel.at_one(), s * trace, noise, num_data)
    return SimpleNamespace(value=value, dnoise=dnoise, dkff=t.a, sums=sums, dKpp=None if own else host[-1],
                           q=qout, gq=gq)


def _solver(ops):
    def solve(L, B, trans):
        return ops.device_solve(L, B, trans=trans)

    return solve


def _optimum(xp, ops, G, c, noise: float, M: int, blocks: Sequence[slice]) -> tuple:
    r"""q at the whitened optimum on the device: :math:`\Lambda = I + \Phi/\sigma^2`, the mean
    :math:`\Lambda^{-1}\beta/\sigma^2` and, per diagonal block, :math:`L` with
    :math:`LL^\top = \Lambda_{bb}^{-1}` (:math:`\Lambda_{bb} = CC^\top`, :math:`C^{-1} = QR`,
    :math:`L = R^\top`, as :func:`~spherelab.linalg.inverse_factor`)."""
    P = G.shape[0]
    Lam = xp.eye(P) + 0.5 * (G + G.T) / noise
    m = xp.linalg.solve(Lam, c / noise)
    L = xp.zeros((P, P))
    for b in blocks:
        size = b.stop - b.start
        if size:
            C = xp.linalg.cholesky(Lam[b, b])
            L[b, b] = xp.linalg.qr(ops.device_solve(C, xp.eye(size), trans=0), mode="r").T
    return m[:M], m[M:], L[:M, :M], L[M:, M:]


def _with_jitter(xp, K, M: int, jitter: float):
    """The host's jitter (:func:`~spherelab.linalg.add_jitter`) on each diagonal block of
    :math:`K_{pp}`: ``[:M, :M]`` and ``[M:, M:]``."""
    if jitter == 0.0:
        return K
    d = xp.diag(K)
    add = [xp.full(M, jitter) * xp.mean(d[:M])]
    if K.shape[0] > M:
        add.append(xp.full(K.shape[0] - M, jitter) * xp.mean(d[M:]))
    return K + xp.diag(xp.concatenate(add))


def _jitter_backward(xp, G, M: int, jitter: float):
    """Reverse mode of :func:`_with_jitter` (:func:`~spherelab.linalg.jitter_backward` per block)."""
    if jitter == 0.0:
        return G
    d, n = xp.diag(G), G.shape[0]
    add = [xp.ones(M) * (jitter * xp.sum(d[:M]) / M)]
    if n > M:
        add.append(xp.ones(n - M) * (jitter * xp.sum(d[M:]) / (n - M)))
    return G + xp.diag(xp.concatenate(add))


def split_flat(x: Any, M: int, K: int) -> tuple:
    """``[m_u, m_v, L_u, L_v]`` from a flat ``(P + M^2 + K^2,)`` array (any array module)."""
    P = M + K
    return x[:M], x[M:P], x[P:P + M * M].reshape(M, M), x[P + M * M:].reshape(K, K)
