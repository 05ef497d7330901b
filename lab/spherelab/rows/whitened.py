r"""One evaluation of the whitened Gaussian bound on rows held on a device, with one copy back.

The decoupled models (:class:`~spherelab.OrthogonalSVGP`: a full batch, or a minibatch step of
:class:`~spherelab.rows.steps.ResidentSteps`) and HVGP (:class:`~spherelab.HarmonicSVGP`)
share it. On the device: the joint inducing block's factor :math:`L_J` (for inducing points
:math:`K_{pp} = k(S, S)` itself, from the kernel's column block at its sources :math:`S = [Z; W]`),
the statistics :math:`\Phi`, :math:`\beta` (:meth:`~.device.DeviceRows.gram`), q at the whitened
optimum when the bound is collapsed (:math:`\Lambda = I + \Phi/\sigma^2`, the mean
:math:`\Lambda^{-1}\beta/\sigma^2` and per diagonal block of :math:`\Lambda` the factor of its
inverse, as :func:`~spherelab.linalg.inverse_factor` on the host), the bound and its backward pass
(:func:`~spherelab.bounds.whitened_stats.whitened_stats_terms`), the rows' chain
(:meth:`~.device.DeviceRows.sums`) and, for inducing points, :math:`K_{pp}`'s chain into the same
sums. Then one copy back: the value, the checks' numbers, the sums by name,
:math:`\partial L/\partial K_{pp}` where the host built :math:`K_{pp}`, and q's gradient (or the
optimal q). :func:`chain_sums` turns the sums into the kernel's, the features' and the orthogonal
inputs' gradients on the host.

A model evaluated here gives ``kernel``, ``ops``, ``likelihood`` (Gaussian), ``jitter``,
``column_width()``, ``keep_entries``, ``column_blocks()`` (the device's column blocks of
:math:`K_{fp}`, :mod:`spherelab.features.device_columns`) and ``column_parameters(own)`` (its
parameters' gradient from the blocks' ``split`` results).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from ..bounds.statistics import Statistics, check_trace_term
from ..bounds.whitened_stats import whitened_stats_terms
from ..chunks import fixed_chunk_rows
from ..features.device_columns import KernelColumns
from ..sphere.lift import lift_gradient_from_sums
from ..threads import pass_workers
from .device import DeviceRows, RowsPass, Stacked, copy_back, copy_back_named

__all__ = ["ResidentRows", "resident_bound", "chain_sums", "own_inducing_block", "split_flat", "host_chunk_rows"]


class ResidentRows:
    """A model's training rows ``(X, y)`` on its device (:class:`~.device.DeviceRows`, copied once;
    on the CPU the host's arrays themselves, chunked by ``chunk_rows``),
    with the whitened statistics' two passes for the host's bound: :meth:`statistics` and
    :meth:`row_sums`, one copy back each (q's optimum at a fit's start, and an evaluation whose
    factor failed on the device). :func:`resident_bound` evaluates the whole bound on ``rows``."""

    def __init__(self, model, X: np.ndarray, y: np.ndarray) -> None:
        # on the CPU the host's arrays themselves, chunked as the host's cache and cores want
        chunk_rows = model.chunk_rows if model.ops.device == "cpu" else None
        self.rows = DeviceRows(model.ops, X, np.asarray(y, dtype=np.float64), model.column_width(),
                               model.keep_entries, chunk_rows=chunk_rows)
        self.X, self.y = X, y
        self._last: tuple | None = None  # (L_J, its pass): row_sums at the same L_J reuses it

    @staticmethod
    def applies(model) -> bool:
        """Whether ``model`` keeps its rows on its device: a device other than the CPU (where host
        arrays are the device's) whose column blocks the model can give (``has_device_blocks()``)."""
        return model.ops.device != "cpu" and model.has_device_blocks()

    @staticmethod
    def holds(model) -> bool:
        """Whether ``model``'s rows take the rows floor's loop on any device, the CPU's included:
        the model gives column blocks (``has_device_blocks()``)."""
        return model.has_device_blocks()

    def matches(self, X: Any, y: Any) -> bool:
        return self.rows.matches(X, y)

    def _gram(self, model, LJ: np.ndarray) -> RowsPass:
        p = self.rows.gram(model.kernel, Stacked(model.column_blocks()), self.rows.ops.to_device(LJ))
        self._last = (LJ, p)
        return p

    def statistics(self, model, LJ: np.ndarray) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)` at the model's
        current parameters and :math:`L_J` ``LJ`` (host), P-sized results only, in one copy back."""
        p = self._gram(model, LJ)
        G, c, r2, bad = copy_back(self.rows.ops, [p.G, p.c, p.r2, p.bad])
        if bad:
            self._last = None
            self.rows.rejected(model.kernel)
        return Statistics(0.5 * (G + G.T), c, self.rows.yy, float(r2) * model.kernel.at_one(), self.X.shape[0])

    def row_sums(self, model, LJ: np.ndarray, Q: np.ndarray, qb: np.ndarray, dkff: float) -> tuple:
        r"""The rows' gradients (:func:`chain_sums`) from :math:`\partial L/\partial K_{pf} = QA +
        q_\beta y^\top` and the constant :math:`\partial L/\partial k(x_n, x_n)` ``dkff``, after
        :meth:`statistics` at the same ``LJ`` (its pass reused) or not (a pass of its own), in one
        copy back."""
        ops, kernel = self.rows.ops, model.kernel
        p = self._last[1] if self._last is not None and self._last[0] is LJ else self._gram(model, LJ)
        lift_sums, named = self.rows.sums(p, ops.to_device(Q), ops.to_device(qb), kernel.at_one() * dkff)
        (lift_sums, r2), named = copy_back_named(ops, [lift_sums, p.r2], named)
        named["lift"], named["r2"] = lift_sums, float(r2)
        return chain_sums(model, p.source.blocks, named, dkff, self.X.shape[1])


def host_chunk_rows(entries: int, width: int, P: int, n: int | None = None) -> int:
    """Rows per chunk of a pass on the CPU: at most ``entries`` entries of its widest temporary
    (``width`` columns), and for ``n`` rows at least one chunk per core of the split pass (a single
    chunk ran kin8nm's 7 373 rows on one BLAS thread: the forward solve at 18 GFLOP/s), from the
    pass's flops (the columns' solve and their Gram product, 2 n P^2 each, P the Gram's size).
    ``SPHERELAB_CHUNK_ROWS`` fixes it."""
    fixed = fixed_chunk_rows()
    if fixed is not None:
        return fixed
    size = max(1, entries // max(width, 1))
    if n:
        size = min(size, -(-n // pass_workers(n, work=4.0 * n * P * P)))
    return max(1, size)


def own_inducing_block(blocks: list) -> bool:
    """Whether :math:`K_{pp}` is the column block's own kernel at its sources (inducing points, with
    or without orthogonal inputs): one :class:`~spherelab.features.device_columns.KernelColumns`."""
    return len(blocks) == 1 and isinstance(blocks[0], KernelColumns)


def resident_bound(model, rows: DeviceRows, M: int, num_data: int, *, q: tuple | None = None,
                   optimum: Sequence[slice] | None = None, inducing: Callable[[], np.ndarray] | None = None,
                   q_back: bool = True) -> SimpleNamespace | None:
    r"""The bound at ``rows`` and its derivatives, in one copy back (the module's docstring).

    Parameters
    ----------
    model
        A model with the hooks the module's docstring names.
    rows
        The rows on the device (all of them, or a minibatch's: :meth:`~.device.DeviceRows.batch`).
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
        copies of the named sums, for :func:`chain_sums`), ``blocks``, ``dKpp`` (host, or None
        where the device built :math:`K_{pp}`), ``q`` (host, with ``q_back``: the flat gradient
        ``[dm, dL_u, dL_v]`` given ``q``; the flat optimal ``[m, L_u, L_v]`` given ``optimum``) and
        ``gq`` (q's gradient on the device). None where the device's factor failed or a result is
        not finite: the host decides (its jitter, its errors). Rows outside the lift raise its
        error; a trace term float64 cannot resolve raises
        :class:`~spherelab.linalg.NumericalFailure`, as the host's bound does.
    """
    ops, xp, kernel = model.ops, model.ops.array_namespace(), model.kernel
    blocks = model.column_blocks()
    own = own_inducing_block(blocks)
    noise, n, kappa1 = model.likelihood.variance, rows.X.shape[0], kernel.at_one()
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
            p = rows.gram(kernel, Stacked(blocks), LJ)
            if optimum is not None:
                q = _optimum(xp, ops, p.G, p.c, noise, M, optimum)
        except np.linalg.LinAlgError:
            return None
        m_u, m_v, L_u, L_v = q
        t = whitened_stats_terms(xp, _solver(ops), LJ, M, p.G, p.c, p.r2 * kappa1, rows.yy, n,
                                 m_u, L_u, m_v, L_v, noise, num_data)
        lift_sums, named = rows.sums(p, 2.0 * ops.device_solve(LJ, t.dPhi, trans=1),
                                     ops.device_solve(LJ, t.dbeta, trans=1), kappa1 * t.a)
        if own:  # K_pp's chain joins the rows': both are the kernel's columns at the same sources
            dX, pp = blocks[0].backward(ops, T_pp, _jitter_backward(xp, t.dKpp, M, model.jitter),
                                        blocks[0].r, blocks[0].U)
            named["sources.0"] = named["sources.0"] + dX
            for k, v in pp.items():
                key = "sources.0" if k == "sources" else k
                named[key] = named[key] + v
        gq = xp.concatenate([t.dm, t.dL_u.ravel(), t.dL_v.ravel()])
        qout = gq if optimum is None else xp.concatenate([xp.concatenate([m_u, m_v]), L_u.ravel(), L_v.ravel()])
        if not q_back:  # one number: 0, or NaN where q's gradient is not finite
            qout = xp.where(xp.all(xp.isfinite(qout)), 0.0, xp.nan)
        head = xp.stack([xp.asarray(p.bad, dtype=xp.float64), t.value, t.trace, p.r2, t.dnoise])
        arrays = [head, qout, lift_sums, *([] if own else [t.dKpp])]
    (head, qout, lift_sums, *dKpp), named = copy_back_named(ops, arrays, named)  # the evaluation's one copy back
    if head[0]:
        rows.rejected(kernel)
    if not all(np.all(np.isfinite(a)) for a in [head, qout, lift_sums, *dKpp, *named.values()]):
        return None
    value, trace, sum_r2, dnoise = (float(v) for v in head[1:])
    s = num_data / n
    check_trace_term(value, s * sum_r2 * kappa1, s * trace, noise, num_data)
    named["lift"], named["r2"] = lift_sums, sum_r2
    return SimpleNamespace(value=value, dnoise=dnoise, dkff=t.a, sums=named, blocks=blocks,
                           dKpp=dKpp[0] if dKpp else None, q=qout, gq=gq)


def chain_sums(model, blocks: list, sums: dict[str, Any], dkff: float, num_inputs: int) -> tuple:
    r"""The rows' gradients from :func:`resident_bound`'s host ``sums`` (the device's named sums,
    ``"lift"``'s :math:`D + 1` and ``"r2"``): the kernel's hyper-parameters (its own sums by name,
    the prior variances' :math:`\partial\mathcal L/\partial k_{nn}` = ``dkff`` through
    :math:`\kappa(1)`, the lift's ``bias`` and ``input_scale``), the features' flat gradient
    (``model.column_parameters``) and the orthogonal inputs' rows ``(K, D)`` (``(0, D)`` without)."""
    kernel = model.kernel
    scale = np.asarray(kernel.input_scale, dtype=np.float64)
    d = {k: dkff * float(sums["r2"]) * v for k, v in kernel.at_one_gradients().items()}
    g = lift_gradient_from_sums(sums["lift"], kernel.input_scale)
    sources = [block.source_gradients(sums.get(f"sources.{k}"), scale) for k, block in enumerate(blocks)]
    d["bias"] = g["bias"] + sum(gs["bias"] for gs in sources)
    d["input_scale"] = g["input_scale"] + sum(gs["input_scale"] for gs in sources)
    out = {}
    for name in kernel.parameter_names:
        total = d.get(name, 0.0) + (float(sums[name]) if name in sums else 0.0)
        out[name] = np.asarray(total, dtype=np.float64)
    own, dW = {}, np.zeros((0, num_inputs))
    for block, gs in zip(blocks, sources):
        params, rows = block.split(gs)
        own.update(params)
        dW = rows if rows is not None and len(rows) else dW
    return out, model.column_parameters(own), dW


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
