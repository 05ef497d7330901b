r"""The Gaussian whitened statistics path of the decoupled models (:class:`~spherelab.OrthogonalSVGP`):
the bound from :math:`\Phi = AA^\top` and :math:`\beta = Ay`, :math:`A = L_J^{-1}K_{pf}`
(:func:`~spherelab.bounds.gaussian_stats_bound_whitened`), and its backward pass through the rows.

The pass over the rows is an object chosen from the kind of rows the data adapter
(:func:`spherelab.distributed.rows`) finds, in :data:`PASSES`: a :class:`RowPass` over rows in
memory (split over the cores, or resident on a device: :class:`~spherelab.rows.whitened.ResidentRows`),
or a :class:`BlockPass`, the same pass on every Dask block, summed. A fit chooses it once
(:meth:`DecoupledStatistics.holding_rows`); an evaluation outside a fit chooses its own."""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Iterator

import numpy as np
from scipy.linalg import solve_triangular

from ..bounds.decoupled import gaussian_stats_bound_whitened, joint_cholesky, whitened_optimum
from ..bounds.statistics import Statistics, row_chunks, run_shares, stopping, streamed_statistics
from ..distributed import BlockwisePass, InBlocks, InMemory, rows
from ..features.device_columns import KernelColumns
from ..likelihoods import Gaussian
from ..linalg import forward_solve
from ..rows.whitened import ResidentRows, chain_sums, resident_bound, split_flat
from ..threads import fixed_chunk_rows, pass_workers
from .decoupled_gradients import DecoupledGradients
from .decoupled_step import ResidentSteps

if TYPE_CHECKING:  # the host's parts, for the annotations of what the mixin reads
    from ..backend.ops import Operations
    from ..features import Features
    from ..kernels import ZonalKernel
    from ..likelihoods import Likelihood

__all__ = ["DecoupledStatistics", "RowPass", "BlockPass", "PASSES"]


class RowPass:
    r"""The pass over rows in memory, for any number of evaluations at changing parameters: the
    statistics (forward), then the rows' gradient sums (backward) over the same chunks — on the
    device when the model keeps its rows there, else split across the cores; the chunking is
    decided once per evaluation, at its forward pass. ``per_row``: the model's per-row bound
    applies to these rows instead (few rows, or no statistics path: :meth:`~DecoupledStatistics._use_stats`)."""

    def __init__(self, model, X, y) -> None:
        self.model, self.X, self.y = model, model._check_inputs(X), y
        n = self.X.shape[0]
        self.per_row = not model._use_stats(n)
        self.device = None if self.per_row else model._rows_on_device(self.X, y)
        # with keep the forward chunks' A serve the backward pass instead of being recomputed
        self.keep = self.device is None and n * model._num_inducing() <= model.keep_entries
        self.size = self.kept = None

    def statistics(self, LJ) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)`."""
        m = self.model
        if self.device is not None:
            return self.device.statistics(m, LJ)
        # the chunking depends on the machine's load (pass_workers): decided here, for both passes
        self.size = m._chunk_rows(self.X.shape[0])
        st = streamed_statistics(functools.partial(m._whitened_columns, LJ), self.X, self.y, chunk_size=self.size,
                                 keep=self.keep, ops=m.ops)
        self.kept = st.chunks if self.keep else None
        return st

    def row_sums(self, LJ, Q, qb, dkff) -> tuple:
        """The rows' gradient sums (:meth:`DecoupledGradients.sums`) given the bound's ``Q``,
        ``qb``, ``dkff`` (:meth:`DecoupledStatistics._elbo_and_gradient_stats`), after
        :meth:`statistics` at the same parameters (a pass on its own: chunked now)."""
        m, X, y = self.model, self.X, self.y
        if self.device is not None:  # the rows' sums on the device, P-sized results back
            return self.device.row_sums(m, LJ, Q, qb, dkff)
        kept, self.kept = self.kept, None
        pieces = list(row_chunks(X.shape[0], self.size or m._chunk_rows(X.shape[0])))

        def share(k, shares):  # the chunks k, k + shares, ... into gradients of its own
            part = DecoupledGradients(m)
            for i in range(k, len(pieces), shares):
                if stopping():
                    break
                a, b = pieces[i]
                A = kept[i] if kept is not None else m._whitened_columns(LJ, X[a:b])[0]
                part.chunk(X[a:b], y[a:b], A, Q, qb, dkff)
            return part

        total = DecoupledGradients(m)
        for part in run_shares(share, len(pieces), m.ops):  # the cores split the rows, as in the pass
            total.merge(part)
        return total.sums()


class BlockPass(BlockwisePass):
    """The pass over a Dask array's blocks: :class:`RowPass`'s methods run on every block (each
    single-threaded, on the active scheduler) and summed; the statistics path only."""

    per_row = False
    device = None  # the blocks stay with their workers: never rows held on the model's device

    def __init__(self, model, X, y) -> None:
        why = model._blocks_refused()
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


class DecoupledStatistics:
    """Mixed into :class:`~spherelab.OrthogonalSVGP`: the statistics path of its bound and gradient.

    It reads the host's fields annotated below (the host's constructor and fit set them), and
    calls two of its methods: ``_num_inducing()`` (M + K) and ``_inducing_matrices()``
    (:math:`K_{uu}`, :math:`K_{vv}`, :math:`K_{vu}`)."""

    kernel: ZonalKernel
    features: Features
    likelihood: Likelihood
    ops: Operations
    num_orthogonal: int
    W: np.ndarray | None  # the orthogonal inputs, (K, D)
    m_u: np.ndarray | None
    L_u: np.ndarray | None
    m_v: np.ndarray | None
    L_v: np.ndarray | None
    whiten: bool
    sufficient_statistics: bool
    chunk_entries: int  # entries (rows x (M + K)) of one chunk's columns
    keep_entries: int  # the most entries of columns kept from the forward pass for the backward
    _held: tuple | None  # (X, y, pass) while a fit holds its rows

    def _use_stats(self, n: int) -> bool:
        # below ~3 rows per inducing variable the joint (M + K)^3 algebra of the statistics
        # path costs more than the per-row bound saves on the host (measured: equal at n = 2(M + K));
        # rows kept on a device take it at any size (the per-row bound would bring them back)
        return (self.whiten and self.sufficient_statistics and isinstance(self.likelihood, Gaussian)
                and (n >= 3 * self._num_inducing() or ResidentRows.applies(self)))

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """One fit's pass over its rows (:data:`PASSES`), chosen once: rows a model keeps on its
        device (:class:`ResidentRows`) are copied there once, on entry."""
        self._held = (X, y, self._pass(X, y))
        try:
            yield
        finally:
            self._held = None

    def _pass(self, X, y):
        """The pass over (X, y): the fit's when these are its rows, else chosen now."""
        held = getattr(self, "_held", None)
        if held is not None and held[0] is X and held[1] is y:
            return held[2]
        return PASSES[type(rows(X, y))](self, X, y)

    def has_device_blocks(self) -> bool:
        """Whether :meth:`column_blocks` can give the device's blocks: features with device columns
        (:meth:`~spherelab.features.Features.has_device_columns`: inducing points with a compiled
        kernel, activated units, spherical harmonics; not phase-truncated ones, whose directions
        train), and a kernel with a compiled shape wherever its own columns are needed."""
        return self.features.has_device_columns(self.kernel) and (
            self.kernel.fused_code() is not None or not self.num_orthogonal)

    def _rows_on_device(self, X, y) -> ResidentRows | None:
        """These rows in memory on the model's device (:class:`ResidentRows`), or None: the
        host's streamed pass."""
        return ResidentRows(self, X, y) if ResidentRows.applies(self) else None

    def column_width(self) -> int:
        """The columns of :math:`K_{fp}` (a device's chunk holds this many per row)."""
        return self._num_inducing()

    def column_blocks(self) -> list:
        """The device's column blocks of :math:`K_{fp}` at the current parameters, in the order of
        p = [u; v] (:mod:`spherelab.features.device_columns`): the features' own, then the kernel's at
        the orthogonal inputs (one block with inducing points' where they stack)."""
        first = self.features.device_columns(self.kernel, self.ops)
        if not self.num_orthogonal:
            return [first]
        both = first.stacked(self.W)
        return [both] if both is not None else [first, KernelColumns(self.kernel, self.ops, self.W, 0)]

    def joint_inducing_block(self) -> np.ndarray:
        r"""The joint inducing block :math:`K_{pp}` of :math:`p = [u; v]` ``(P, P)``, jitter included."""
        Kuu, Kvv, Kvu = self._inducing_matrices()
        return np.block([[Kuu, Kvu.T], [Kvu, Kvv]])

    def column_parameters(self, own: dict) -> np.ndarray:
        """The features' flat parameter gradient from the blocks' ``split`` results."""
        return self.features.param_gradient(own)

    def _svi_steps(self, X, y, lr: float):
        """:meth:`fit_svi`'s stepper: resident on the model's device where :class:`ResidentSteps`
        applies (one copy back per step), else the host's."""
        return ResidentSteps(self, X, y, lr) if ResidentSteps.applies(self) else super()._svi_steps(X, y, lr)

    def _chunk_rows(self, n: int | None = None) -> int:
        """Rows per chunk: at most ``chunk_entries`` entries of :math:`K_{pf}`, and for ``n`` rows
        at least one chunk per core of the split pass (a single chunk ran kin8nm's 7 373 rows on
        one BLAS thread: the forward solve at 18 GFLOP/s). ``SPHERELAB_CHUNK_ROWS`` fixes it."""
        fixed = fixed_chunk_rows()
        if fixed is not None:
            return fixed
        rows = max(1, self.chunk_entries // max(self._num_inducing(), 1))
        if n:
            rows = min(rows, -(-n // pass_workers(n)))
        return max(1, rows)

    def _whitened_columns(self, LJ, X):
        r""":math:`A = L_J^{-1}K_{pf}`, :math:`K_{pf} = [K_{uf}; K_{vf}]` ``(M + K, n)``, and the prior
        variances :math:`k(x_n, x_n)` ``(n,)``: one chunk's columns of the statistics pass."""
        Kpf = self.features.Kuf(self.kernel, X, ops=self.ops)
        if self.num_orthogonal:
            Kpf = np.vstack([Kpf, self.kernel.K(self.W, X, ops=self.ops)])
        return forward_solve(LJ, Kpf), self.kernel.diag(X)

    def _statistics(self, X, y, LJ) -> Statistics:
        r""":math:`\Phi = AA^\top`, :math:`\beta = Ay` (:math:`A = L_J^{-1}K_{pf}`) and
        :math:`\sum_n k(x_n, x_n)` in one pass (:data:`PASSES`)."""
        return self._pass(X, y).statistics(LJ)

    def _elbo_and_gradient_stats(self, rowpass, n: int, num_data: int, collapsed: bool = False):
        """The bound on the rows of ``rowpass`` (``n`` of them; ``num_data`` the data's size) and
        its gradient: the statistics, the bound, then the rows' sums."""
        M = self.features.num_features
        if rowpass.device is not None:  # the rows on a device: the whole evaluation there, one copy back
            out = self._resident_evaluation(rowpass.device.rows, num_data, collapsed)
            if out is not None:
                return out
        LJ = joint_cholesky(*self._inducing_matrices())
        st = rowpass.statistics(LJ)
        q = (self.m_u, self.L_u, self.m_v, self.L_v)
        if collapsed:
            m, L_u, L_v = whitened_optimum(st.G, st.c, self.likelihood.variance, M)
            q = (m[:M], L_u, m[M:], L_v)
        res = gaussian_stats_bound_whitened(LJ, M, st.G, st.c, st.sum_diag, st.yy, n,
                                            *q, self.likelihood.variance, num_data)
        grads = DecoupledGradients(self)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        # dK_pf = L_J^-T (2 dPhi A + dbeta y^T): the P x P solve once, then one product per chunk
        Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
        qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
        grads.add_sums(rowpass.row_sums(LJ, Q, qb, res.dkff))
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    def _resident_evaluation(self, rows, num_data: int, collapsed: bool):
        """:meth:`_elbo_and_gradient_stats` by :func:`~.resident_bound.resident_bound`; None where the
        device's factor failed (the host's evaluation then decides, with its jitter and errors)."""
        M, K = self.features.num_features, self.num_orthogonal
        if collapsed:
            res = resident_bound(self, rows, M, num_data, optimum=[slice(0, M), slice(M, M + K)],
                                 inducing=self.joint_inducing_block, q_back=False)
        else:
            q = (self.m_u, self.m_v, np.tril(self.L_u), np.tril(self.L_v))
            res = resident_bound(self, rows, M, num_data, q=tuple(self.ops.to_device(a) for a in q),
                                 inducing=self.joint_inducing_block)
        if res is None:
            return None
        grads = DecoupledGradients(self)
        if res.dKpp is not None:
            grads.inducing(res.dKpp[:M, :M], res.dKpp[M:, M:], 2.0 * res.dKpp[M:, :M])
        grads.add_sums(chain_sums(self, res.blocks, res.sums, res.dkff, rows.X.shape[1]))
        dq = (None,) * 4 if collapsed else split_flat(res.q, M, K)
        return res.value, grads.result(dq[0], dq[2], dq[1], dq[3], res.dnoise)

    def _blocks_refused(self) -> str | None:
        """Why this model cannot fit Dask blocks (None: it can)."""
        if isinstance(self.likelihood, Gaussian) and self.whiten and self.sufficient_statistics:
            return None
        return (f"{type(self).__name__} fits a Dask array through its whitened sufficient statistics only: a "
                "Gaussian likelihood, whiten=True and sufficient_statistics=True (pass a NumPy array otherwise)")

    def _collapsed_elbo_and_gradient(self, X, y):
        # the whitened optimum in the bound itself: one streamed pass, and the value (hence, by
        # the envelope theorem, the gradient in every other parameter) does not depend on
        # whether the model stores q whitened
        return self._elbo_and_gradient_stats(self._pass(X, y), X.shape[0], X.shape[0], collapsed=True)
