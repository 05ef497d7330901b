r"""The Gaussian whitened statistics path of the decoupled models (:class:`~spherelab.OrthogonalSVGP`):
the bound from :math:`\Phi = AA^\top` and :math:`\beta = Ay`, :math:`A = L_J^{-1}K_{pf}`
(:func:`~spherelab.bounds.gaussian_stats_bound_whitened`), and its backward pass through the rows.

The pass over the rows is an object chosen from the kind of rows the data adapter
(:func:`spherelab.distributed.rows`) finds, in :data:`PASSES`: a :class:`RowPass` over rows in
memory, or a :class:`BlockPass`, the same pass on every Dask block, summed. Where the features and
the kernel give column blocks (:meth:`StatisticsPath.has_device_blocks`) the rows are held for the
rows floor's one loop (:class:`~spherelab.rows.whitened.ResidentRows`: copied to a device, or on the
CPU the host's arrays, their chunks dealt to the cores), and the whole evaluation runs there
(:func:`~spherelab.rows.whitened.resident_bound`); otherwise the host streams its chunks through
the features' and the kernel's own methods (``Kuf``, ``K``, their gradients). A fit chooses it once
(:meth:`StatisticsPath.hold`); an evaluation outside a fit chooses its own.

:class:`StatisticsPath` is the strategy the model composes for all of it (made per call from the
model; what a fit holds stays in the model's ``_held`` field): the passes, the bound on their
statistics and its backward pass, and the hooks the rows floor (:mod:`spherelab.rows.whitened`)
reads of a model kept on a device."""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import solve_triangular

from ..bounds.decoupled import gaussian_stats_bound_whitened, joint_cholesky, whitened_optimum
from ..bounds.statistics import Statistics, pass_sums, row_chunks, streamed_statistics
from ..chunks import host_slices
from ..distributed import BlockwisePass, InBlocks, InMemory, rows
from ..features.device_columns import KernelColumns
from ..likelihoods import Gaussian
from ..linalg import forward_solve
from .gradients import DecoupledGradients
from .steps import ResidentSteps
from .whitened import ResidentRows, chain_sums, host_chunk_rows, resident_bound, split_flat

__all__ = ["StatisticsPath", "RowPass", "BlockPass", "PASSES"]


class RowPass:
    r"""The pass over rows in memory, for any number of evaluations at changing parameters: the
    statistics (forward), then the rows' gradient sums (backward) over the same chunks — by the rows
    floor's loop where the model gives column blocks (``device``: held on its device, or the host's
    arrays), else through the features' own methods, split across the cores; the chunking is
    decided once per evaluation, at its forward pass. ``per_row``: the model's per-row bound
    applies to these rows instead (few rows, or no statistics path: :meth:`~DecoupledStatistics._use_stats`)."""

    def __init__(self, model, X, y) -> None:
        path = StatisticsPath(model)
        self.model, self.path, self.X, self.y = model, path, model._check_inputs(X), y
        n = self.X.shape[0]
        self.per_row = not path.use_stats(n)
        self.device = None if self.per_row else path.rows_on_device(self.X, y)
        # with keep the forward chunks' A serve the backward pass instead of being recomputed
        self.keep = self.device is None and n * model.num_inducing <= path.keep_entries
        self.size = self.kept = None

    def statistics(self, LJ) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)`."""
        m, path = self.model, self.path
        if self.device is not None:
            return self.device.statistics(path, LJ)
        # the chunking depends on the machine's load (pass_workers): decided here, for both passes
        self.size = path.chunk_rows(self.X.shape[0])
        st = streamed_statistics(functools.partial(path.whitened_columns, LJ), self.X, self.y, chunk_size=self.size,
                                 keep=self.keep, ops=m.ops)
        self.kept = st.chunks if self.keep else None
        return st

    def row_sums(self, LJ, Q, qb, dkff) -> tuple:
        """The rows' gradient sums (:meth:`DecoupledGradients.sums`) given the bound's ``Q``,
        ``qb``, ``dkff`` (:meth:`DecoupledStatistics._elbo_and_gradient_stats`), after
        :meth:`statistics` at the same parameters (a pass on its own: chunked now)."""
        m, path, X, y = self.model, self.path, self.X, self.y
        if self.device is not None:  # the rows' sums on the device, P-sized results back
            return self.device.row_sums(path, LJ, Q, qb, dkff)
        kept, self.kept = self.kept, None
        pieces = list(row_chunks(X.shape[0], self.size or path.chunk_rows(X.shape[0])))

        def chunk(i, rows, shares, acc):
            Xc, yc = rows
            A = kept[i] if kept is not None else path.whitened_columns(LJ, Xc)[0]
            part = DecoupledGradients(m)
            part.chunk(Xc, yc, A, Q, qb, dkff)
            named, fparams, dW = part.sums()
            return {**named, " features": fparams, " W": dW}  # (no hyper-parameter's names)

        t = pass_sums(m.ops, pieces, host_slices(X, y), chunk)  # the cores split the rows, as in the pass
        fparams, dW = t.pop(" features"), t.pop(" W")
        return t, fparams, dW


class BlockPass(BlockwisePass):
    """The pass over a Dask array's blocks: :class:`RowPass`'s methods run on every block (each
    single-threaded, on the active scheduler) and summed; the statistics path only."""

    per_row = False
    device = None  # the blocks stay with their workers: never rows held on the model's device

    def __init__(self, model, X, y) -> None:
        why = StatisticsPath(model).blocks_refused()
        if why is not None:
            raise TypeError(why)
        super().__init__(model, RowPass, X, y)

    def statistics(self, LJ) -> Statistics:
        """:meth:`RowPass.statistics` on every block, summed."""
        return self.summed("statistics", LJ)

    def row_sums(self, LJ, Q, qb, dkff) -> tuple:
        """:meth:`RowPass.row_sums` on every block, summed."""
        return self.summed("row_sums", LJ, Q, qb, dkff)


#: the pass for each kind of rows (:func:`spherelab.distributed.rows`): ``PASSES[kind](model, X, y)``
PASSES = {InMemory: RowPass, InBlocks: BlockPass}


class StatisticsPath:
    """The statistics path of an :class:`~spherelab.OrthogonalSVGP` ``model``, a strategy it composes:
    which pass its rows take, the bound on their statistics and its gradient, and the hooks the
    rows floor reads of a model whose rows stay on its device (``kernel``, ``ops``, ``likelihood``,
    ``jitter``, ``keep_entries`` and the ``column_*`` methods). It reads the model's parameters
    and uses its ``num_inducing`` (M + K) and ``inducing_matrices()``
    (:math:`K_{uu}`, :math:`K_{vv}`, :math:`K_{vu}`)."""

    def __init__(self, model) -> None:
        self.model = model
        self.kernel, self.ops, self.likelihood, self.jitter = model.kernel, model.ops, model.likelihood, model.jitter
        #: the most entries (rows x (M + K)) of a pass's columns kept for its backward pass
        self.keep_entries = model.keep_entries

    def use_stats(self, n: int) -> bool:
        """Whether ``n`` rows take the statistics path (else the per-row bound)."""
        m = self.model
        # below ~3 rows per inducing variable the joint (M + K)^3 algebra of the statistics
        # path costs more than the per-row bound saves on the host (measured: equal at n = 2(M + K));
        # rows kept on a device take it at any size (the per-row bound would bring them back)
        return (m.whiten and m.sufficient_statistics and isinstance(m.likelihood, Gaussian)
                and (n >= 3 * m.num_inducing or ResidentRows.applies(self)))

    def hold(self, X, y) -> tuple:
        """What a fit holds of its rows: ``(X, y, their pass)``, the pass chosen once (:data:`PASSES`):
        rows a model keeps on its device (:class:`ResidentRows`) are copied there here, once."""
        return (X, y, self.rows_pass(X, y))

    def rows_pass(self, X, y):
        """The pass over (X, y): the fit's when these are its rows, else chosen now."""
        held = getattr(self.model, "_held", None)
        if held is not None and held[0] is X and held[1] is y:
            return held[2]
        return PASSES[type(rows(X, y))](self.model, X, y)

    def rows_on_device(self, X, y) -> ResidentRows | None:
        """These rows held for the rows floor's one loop (:class:`ResidentRows`): copied to the
        model's device, or on the CPU the host's own arrays, chunked by :meth:`chunk_rows` and dealt
        to the cores; None where the model has no column blocks (:meth:`has_device_blocks`): the
        host's streamed pass through the features' and the kernel's own methods."""
        return ResidentRows(self, X, y) if ResidentRows.holds(self) else None

    def has_device_blocks(self) -> bool:
        """Whether :meth:`column_blocks` can give the device's blocks: features with device columns
        (:meth:`~spherelab.features.Features.has_device_columns`: inducing points with a compiled
        kernel, activated units, spherical harmonics; not phase-truncated ones, whose directions
        train), and a kernel with a compiled shape wherever its own columns are needed."""
        m = self.model
        return m.features.has_device_columns(self.kernel) and (
            self.kernel.fused_code() is not None or not m.num_orthogonal)

    def column_width(self) -> int:
        """The columns of :math:`K_{fp}` (a device's chunk holds this many per row)."""
        return self.model.num_inducing

    def column_blocks(self) -> list:
        """The device's column blocks of :math:`K_{fp}` at the current parameters, in the order of
        p = [u; v] (:mod:`spherelab.features.device_columns`): the features' own, then the kernel's at
        the orthogonal inputs (one block with inducing points' where they stack)."""
        m = self.model
        first = m.features.device_columns(self.kernel, self.ops)
        if not m.num_orthogonal:
            return [first]
        both = first.stacked(m.W)
        return [both] if both is not None else [first, KernelColumns(self.kernel, self.ops, m.W, 0)]

    def joint_inducing_block(self) -> np.ndarray:
        r"""The joint inducing block :math:`K_{pp}` of :math:`p = [u; v]` ``(P, P)``, jitter included."""
        Kuu, Kvv, Kvu = self.model.inducing_matrices()
        return np.block([[Kuu, Kvu.T], [Kvu, Kvv]])

    def column_parameters(self, own: dict) -> np.ndarray:
        """The features' flat parameter gradient from the blocks' ``split`` results."""
        return self.model.features.param_gradient(own)

    def svi_steps(self, X, y, lr: float):
        """:meth:`fit_svi`'s stepper where it is resident on the model's device
        (:class:`ResidentSteps`: one copy back per step), else None (the host's)."""
        return ResidentSteps(self.model, self, X, y, lr) if ResidentSteps.applies(self) else None

    def chunk_rows(self, n: int | None = None) -> int:
        """Rows per chunk on the CPU (:func:`~spherelab.rows.whitened.host_chunk_rows`): at most
        ``chunk_entries`` entries of :math:`K_{pf}`, at least one chunk per core for ``n`` rows."""
        P = self.model.num_inducing
        return host_chunk_rows(self.model.chunk_entries, P, P, n)

    def whitened_columns(self, LJ, X):
        r""":math:`A = L_J^{-1}K_{pf}`, :math:`K_{pf} = [K_{uf}; K_{vf}]` ``(M + K, n)``, and the prior
        variances :math:`k(x_n, x_n)` ``(n,)``: one chunk's columns of the statistics pass."""
        m = self.model
        Kpf = m.features.Kuf(self.kernel, X, ops=self.ops)
        if m.num_orthogonal:
            Kpf = np.vstack([Kpf, self.kernel.K(m.W, X, ops=self.ops)])
        return forward_solve(LJ, Kpf), self.kernel.diag(X)

    def statistics(self, X, y, LJ) -> Statistics:
        r""":math:`\Phi = AA^\top`, :math:`\beta = Ay` (:math:`A = L_J^{-1}K_{pf}`) and
        :math:`\sum_n k(x_n, x_n)` in one pass (:data:`PASSES`)."""
        return self.rows_pass(X, y).statistics(LJ)

    def elbo_and_gradient(self, rowpass, n: int, num_data: int, collapsed: bool = False):
        """The bound on the rows of ``rowpass`` (``n`` of them; ``num_data`` the data's size) and
        its gradient: the statistics, the bound, then the rows' sums."""
        m = self.model
        M = m.features.num_features
        if rowpass.device is not None:  # the rows on a device: the whole evaluation there, one copy back
            out = self._resident(rowpass.device.rows, num_data, collapsed)
            if out is not None:
                return out
        LJ = joint_cholesky(*m.inducing_matrices())
        st = rowpass.statistics(LJ)
        q = (m.m_u, m.L_u, m.m_v, m.L_v)
        if collapsed:
            mean, L_u, L_v = whitened_optimum(st.G, st.c, self.likelihood.variance, M)
            q = (mean[:M], L_u, mean[M:], L_v)
        res = gaussian_stats_bound_whitened(LJ, M, st.G, st.c, st.sum_diag, st.yy, n,
                                            *q, self.likelihood.variance, num_data)
        grads = DecoupledGradients(m)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        # dK_pf = L_J^-T (2 dPhi A + dbeta y^T): the P x P solve once, then one product per chunk
        Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
        qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
        grads.add_sums(rowpass.row_sums(LJ, Q, qb, res.dkff))
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    def _resident(self, rows, num_data: int, collapsed: bool):
        """:meth:`elbo_and_gradient` by :func:`~spherelab.rows.whitened.resident_bound`; None where the
        device's factor failed (the host's evaluation then decides, with its jitter and errors)."""
        m = self.model
        M, K = m.features.num_features, m.num_orthogonal
        if collapsed:
            res = resident_bound(self, rows, M, num_data, optimum=[slice(0, M), slice(M, M + K)],
                                 inducing=self.joint_inducing_block, q_back=False)
        else:
            q = (m.m_u, m.m_v, np.tril(m.L_u), np.tril(m.L_v))
            res = resident_bound(self, rows, M, num_data, q=tuple(self.ops.to_device(a) for a in q),
                                 inducing=self.joint_inducing_block)
        if res is None:
            return None
        grads = DecoupledGradients(m)
        if res.dKpp is not None:
            grads.inducing(res.dKpp[:M, :M], res.dKpp[M:, M:], 2.0 * res.dKpp[M:, :M])
        grads.add_sums(chain_sums(self, res.blocks, res.sums, res.dkff, rows.X.shape[1]))
        dq = (None,) * 4 if collapsed else split_flat(res.q, M, K)
        return res.value, grads.result(dq[0], dq[2], dq[1], dq[3], res.dnoise)

    def blocks_refused(self) -> str | None:
        """Why this model cannot fit Dask blocks (None: it can)."""
        m = self.model
        if isinstance(m.likelihood, Gaussian) and m.whiten and m.sufficient_statistics:
            return None
        return (f"{type(m).__name__} fits a Dask array through its whitened sufficient statistics only: a "
                "Gaussian likelihood, whiten=True and sufficient_statistics=True (pass a NumPy array otherwise)")

    def collapsed_elbo_and_gradient(self, X, y):
        # the whitened optimum in the bound itself: one streamed pass, and the value (hence, by
        # the envelope theorem, the gradient in every other parameter) does not depend on
        # whether the model stores q whitened
        return self.elbo_and_gradient(self.rows_pass(X, y), X.shape[0], X.shape[0], collapsed=True)
