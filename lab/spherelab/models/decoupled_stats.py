r"""The Gaussian whitened statistics path of the decoupled models (:class:`~spherelab.OrthogonalSVGP`):
the bound from :math:`\Phi = AA^\top` and :math:`\beta = Ay`, :math:`A = L_J^{-1}K_{pf}`
(:func:`~spherelab.bounds.gaussian_stats_bound_whitened`), and its backward pass through the rows —
in memory (the rows split over the cores), on Dask (two passes over the blocks), or resident on a
device (:class:`~.decoupled_resident.ResidentRows`)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
from scipy.linalg import solve_triangular

from ..bounds.decoupled import gaussian_stats_bound_whitened, joint_cholesky, whitened_optimum
from ..bounds.statistics import Statistics, row_chunks, run_shares, stopping, streamed_statistics
from ..distributed import block_statistics, block_sum, is_dask, without_data
from ..likelihoods import Gaussian
from ..linalg import forward_solve
from ..threads import pass_workers
from .decoupled_gradients import DecoupledGradients
from .decoupled_resident import ResidentRows

__all__ = ["DecoupledStatistics"]


class DecoupledStatistics:
    """Mixed into :class:`~spherelab.OrthogonalSVGP`: the statistics path of its bound and gradient."""

    def _use_stats(self, n: int) -> bool:
        # below ~3 rows per inducing variable the joint (M + K)^3 algebra of the statistics
        # path costs more than the per-row bound saves on the host (measured: equal at n = 2(M + K));
        # rows kept on a device take it at any size (the per-row bound would bring them back)
        return (self.whiten and self.sufficient_statistics and isinstance(self.likelihood, Gaussian)
                and (n >= 3 * self._num_inducing() or ResidentRows.applies(self)))

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """One fit's training rows on the device (:class:`ResidentRows`), copied there once."""
        held = not is_dask(X) and ResidentRows.applies(self) and self._use_stats(X.shape[0])
        self._device_rows = ResidentRows(self, X, y) if held else None
        try:
            yield
        finally:
            self._device_rows = None

    def _rows_on_device(self, X, y) -> ResidentRows | None:
        """The rows of this evaluation on the device (the fit's, else copied now), or None: the
        host's streamed pass."""
        if is_dask(X) or not ResidentRows.applies(self):
            return None
        held = getattr(self, "_device_rows", None)
        return held if held is not None and held.matches(X, y) else ResidentRows(self, X, y)

    def _chunk_rows(self, n: int | None = None) -> int:
        """Rows per chunk: at most ``chunk_entries`` entries of :math:`K_{pf}`, and for ``n`` rows
        at least one chunk per core of the split pass (a single chunk ran kin8nm's 7 373 rows on
        one BLAS thread: the forward solve at 18 GFLOP/s)."""
        rows = max(1, self.chunk_entries // max(self._num_inducing(), 1))
        if n:
            rows = min(rows, -(-n // pass_workers(n)))
        return max(1, rows)

    def _features_at(self, X):
        """:math:`K_{pf} = [K_{uf}; K_{vf}]`, ``(M + K, n)``."""
        Kuf = self.features.Kuf(self.kernel, X, ops=self.ops)
        return np.vstack([Kuf, self.kernel.K(self.W, X, ops=self.ops)]) if self.num_orthogonal else Kuf

    def _statistics(self, X, y, LJ, keep: bool = False, rows: ResidentRows | None = None,
                    chunk_size: int | None = None) -> Statistics:
        r""":math:`\Phi = AA^\top`, :math:`\beta = Ay` (:math:`A = L_J^{-1}K_{pf}`) and
        :math:`\sum_n k(x_n, x_n)` in one streamed pass (:func:`~spherelab.bounds.streamed_statistics`)
        in chunks of ``chunk_size`` rows (default: :meth:`_chunk_rows`, decided now); with ``keep``,
        the chunks' A are kept for the backward pass, which must use the same chunks. A Dask ``X`` is
        summed block by block on the active scheduler (:func:`~spherelab.distributed.block_statistics`)."""
        if is_dask(X):
            light = without_data(self)  # a task would carry the rows otherwise
            return block_statistics(lambda Xb, yb: light._statistics(Xb, yb, LJ), X, y)
        rows = rows if rows is not None else self._rows_on_device(X, y)
        if rows is not None:
            return rows.statistics(self, LJ)
        return streamed_statistics(lambda Xc: (forward_solve(LJ, self._features_at(Xc)), self.kernel.diag(Xc)),
                                   X, y, chunk_size=chunk_size or self._chunk_rows(X.shape[0]), keep=keep, ops=self.ops)

    def _elbo_and_gradient_stats(self, X, y, num_data: int, collapsed: bool = False):
        dask = is_dask(X)
        keep = not dask and X.shape[0] * self._num_inducing() <= self.keep_entries  # else the backward recomputes A
        M = self.features.num_features
        LJ = joint_cholesky(*self._inducing_matrices())
        rows = self._rows_on_device(X, y)
        # the chunking depends on the machine's load (pass_workers): decided once, for both passes
        size = None if dask or rows is not None else self._chunk_rows(X.shape[0])
        st = self._statistics(X, y, LJ, keep, rows, size)
        q = (self.m_u, self.L_u, self.m_v, self.L_v)
        if collapsed:
            m, L_u, L_v = whitened_optimum(st.G, st.c, self.likelihood.variance, M)
            q = (m[:M], L_u, m[M:], L_v)
        res = gaussian_stats_bound_whitened(LJ, M, st.G, st.c, st.sum_diag, st.yy, X.shape[0],
                                            *q, self.likelihood.variance, num_data)
        grads = DecoupledGradients(self)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        # dK_pf = L_J^-T (2 dPhi A + dbeta y^T): the P x P solve once, then one product per chunk
        Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
        qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
        if rows is not None:  # the rows' sums on the device, P-sized results back
            grads.add_sums(rows.row_sums(self, LJ, Q, qb, res.dkff))
            return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)
        if dask:  # the second pass: each block's sums on the scheduler, added pairwise
            light = without_data(self)  # a task would carry the rows otherwise
            grads.add_sums(block_sum(lambda Xb, yb: light._row_sums(Xb, yb, LJ, Q, qb, res.dkff), X, y))
            return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)
        pieces = list(row_chunks(X.shape[0], size))  # the forward pass's chunks

        def share(k, shares):  # the chunks k, k + shares, ... into gradients of its own
            part = DecoupledGradients(self)
            for i in range(k, len(pieces), shares):
                if stopping():
                    break
                a, b = pieces[i]
                A = st.chunks[i] if keep else forward_solve(LJ, self._features_at(X[a:b]))
                part.chunk(X[a:b], y[a:b], A, Q, qb, res.dkff)
            return part

        for part in run_shares(share, len(pieces), self.ops):  # the cores split the rows, as in the pass
            grads.merge(part)
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    def _row_sums(self, X, y, LJ, Q, qb, dkff) -> tuple:
        """The rows' gradient sums of (X, y) in chunks, on this thread (one Dask block)."""
        part = DecoupledGradients(self)
        for a, b in row_chunks(X.shape[0], self._chunk_rows()):
            part.chunk(X[a:b], y[a:b], forward_solve(LJ, self._features_at(X[a:b])), Q, qb, dkff)
        return part.sums()

    def _check_dask_path(self) -> None:
        if not (isinstance(self.likelihood, Gaussian) and self.whiten and self.sufficient_statistics):
            raise TypeError(
                f"{type(self).__name__} fits a Dask array through its whitened sufficient statistics only: "
                "a Gaussian likelihood, whiten=True and sufficient_statistics=True (pass a NumPy array otherwise)")

    def _collapsed_elbo_and_gradient(self, X, y):
        # the whitened optimum in the bound itself: one streamed pass, and the value (hence, by
        # the envelope theorem, the gradient in every other parameter) does not depend on
        # whether the model stores q whitened
        return self._elbo_and_gradient_stats(X, y, X.shape[0], collapsed=True)
