r"""The decoupled models' rows kept on a device between evaluations.

For :class:`~spherelab.OrthogonalSVGP` and :class:`~spherelab.ActivatedSVGP`, :math:`K_{pf} = [K_{uf}; K_{vf}]`
is built from column blocks, each an operation of the device table on the rows' lift: the
feature set's own (:meth:`~spherelab.features.Features.device_columns`: inducing points, activated
units, spherical harmonics) and the kernel's at the orthogonal inputs
(:class:`~spherelab.features.device_columns.KernelColumns`, stacked with inducing points' in one
block).

On a device other than the CPU the training rows are copied there once; each
evaluation of the whitened Gaussian bound (:func:`~spherelab.bounds.gaussian_stats_bound_whitened`)
then sends :math:`L_J` and the blocks' sources and gets back :math:`\Phi = AA^\top`, :math:`\beta = Ay`
and :math:`\sum_n k(x_n, x_n)` (:math:`A = L_J^{-1}K_{pf}`); its backward pass sends :math:`Q` and
:math:`q_\beta` (:math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top`) and gets back the
hyper-parameters' sums and the sources' gradients. Nothing of size N crosses between
evaluations (tested with the simulator's stand-in arrays, which count every transfer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..bounds.statistics import Statistics, row_chunks
from ..features.device_columns import KernelColumns
from ..sphere.lift import lift_backward_rows, lift_rows_kept

if TYPE_CHECKING:
    from .decoupled import OrthogonalSVGP

__all__ = ["ResidentRows"]


class ResidentRows:
    """Training rows ``(X, y)`` of one model on its device, with the statistics pass and its
    backward pass written against the device's arrays (``ops.array_namespace()``).

    Parameters
    ----------
    model
        An :class:`~spherelab.OrthogonalSVGP` that :meth:`applies` to.
    X, y
        The host rows ``(N, D)``, ``(N,)`` (validated); copied to the device here, once.
    """

    #: rows per device chunk: about 2^25 entries of each (rows, P) temporary (256 MB)
    chunk_entries = 1 << 25

    def __init__(self, model: "OrthogonalSVGP", X: np.ndarray, y: np.ndarray) -> None:
        ops = model.ops
        self.ops, self.xp = ops, ops.array_namespace()
        self.X, self.y = X, y  # the host arrays these rows copy: a later call with the same ones reuses them
        self.Xd, self.yd = ops.to_device(X), ops.to_device(y)
        self.yy = float(y @ y)
        P = model.features.num_features + model.num_orthogonal
        self.rows = max(1, min(X.shape[0], self.chunk_entries // max(P, 1)))
        self.keep = X.shape[0] * P <= model.keep_entries  # the chunks' A kept for the backward pass
        self._pass: dict[str, Any] = {}

    @staticmethod
    def applies(model: "OrthogonalSVGP") -> bool:
        """Whether ``model`` keeps its rows on its device: a device other than the CPU (where host
        arrays are the device's), features with device columns
        (:meth:`~spherelab.features.Features.has_device_columns`: inducing points with a compiled
        kernel, activated units, spherical harmonics; not phase-truncated ones, whose directions
        train), and a kernel with a compiled shape wherever its own columns are needed."""
        return model.ops.device != "cpu" and model.features.has_device_columns(model.kernel) and (
            model.kernel.fused_code() is not None or not model.num_orthogonal)

    def matches(self, X: Any, y: Any) -> bool:
        return X is self.X and y is self.y

    @staticmethod
    def _blocks(model: "OrthogonalSVGP") -> list:
        """The column blocks of :math:`K_{fp}`, in the order of p = [u; v]."""
        first = model.features.device_columns(model.kernel, model.ops)
        if not model.num_orthogonal:
            return [first]
        both = first.stacked(model.W)
        return [both] if both is not None else [first, KernelColumns(model.kernel, model.ops, model.W, 0)]

    def _chunk(self, kernel, blocks, scale, a: int, b: int, LJd):
        """One chunk's lift (radii, unit rows), each block's T = X_hat S_hat^T, A = L_J^-1 K_pf
        ``(P, n)``, and the count of rows whose lift overflows or vanishes."""
        xp = self.xp
        r, Xh, bad = lift_rows_kept(xp, self.Xd[a:b], scale, kernel.bias)  # rejected rows reported after the pass
        Ts, cols = zip(*(block.columns(self.ops, r, Xh) for block in blocks))
        Kfp = cols[0] if len(cols) == 1 else xp.concatenate(cols, axis=1)
        return r, Xh, Ts, self.ops.device_solve(LJd, Kfp.T), bad

    def statistics(self, model: "OrthogonalSVGP", LJ: np.ndarray) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)` at the model's
        current parameters (what :meth:`OrthogonalSVGP._statistics` returns), P-sized results only."""
        ops, xp, kernel = self.ops, self.xp, model.kernel
        blocks = self._blocks(model)
        LJd, scale = ops.to_device(LJ), xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
        P, n = LJ.shape[0], self.X.shape[0]
        G, c, sum_r2, bad, kept = xp.zeros((P, P)), xp.zeros(P), xp.zeros(()), 0, []
        for a, b in row_chunks(n, self.rows):
            r, Xh, Ts, A, rejected = self._chunk(kernel, blocks, scale, a, b, LJd)
            G += A @ A.T
            c += A @ self.yd[a:b]
            sum_r2 = sum_r2 + r @ r
            bad = bad + rejected
            if self.keep:
                kept.append((r, Xh, Ts, A))
        if int(bad):
            kernel.check_lift(self.X)  # raises the lift's own error, naming the row
            raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")
        total = float(ops.to_host(sum_r2))
        self._pass = {"LJ": LJ, "kept": kept, "sum_r2": total, "blocks": blocks, "LJd": LJd}
        G = ops.to_host(G)
        return Statistics(0.5 * (G + G.T), ops.to_host(c), self.yy, total * kernel.at_one(), n)

    def row_sums(self, model: "OrthogonalSVGP", LJ: np.ndarray, Q: np.ndarray, qb: np.ndarray,
                 dkff: float) -> tuple:
        r"""The rows' gradient sums (what :meth:`DecoupledGradients.sums` gives) from
        :math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top` and the constant
        :math:`\partial L/\partial k(x_n, x_n)` ``dkff``, after :meth:`statistics` at the same
        parameters."""
        ops, xp, kernel = self.ops, self.xp, model.kernel
        same = self._pass.get("LJ") is LJ  # this evaluation's statistics: its blocks and L_J reused
        blocks = self._pass["blocks"] if same else self._blocks(model)
        LJd = self._pass["LJd"] if same else ops.to_device(LJ)
        scale_h = np.asarray(kernel.input_scale, dtype=np.float64)
        scale = xp.asarray(scale_h)
        Qd, qbd = ops.to_device(Q), ops.to_device(qb)
        kept = self._pass["kept"] if same else None
        kappa1 = kernel.at_one()
        spans = np.cumsum([0] + [block.width for block in blocks])
        dvar = dlen = 0.0
        dsources = [None if block.source_shape is None else xp.zeros(block.source_shape) for block in blocks]
        bias, g_scale, r2 = 0.0, xp.zeros(scale_h.shape), xp.zeros(())
        for i, (a, b) in enumerate(row_chunks(self.X.shape[0], self.rows)):
            r, Xh, Ts, A = kept[i] if kept else self._chunk(kernel, blocks, scale, a, b, LJd)[:4]
            dKfp = (Qd @ A + qbd[:, None] * self.yd[None, a:b]).T
            dXt = (2.0 * kappa1 * dkff) * (Xh * r[:, None])  # the prior variances r^2 kappa(1)
            for k, (block, T) in enumerate(zip(blocks, Ts)):
                dK = xp.ascontiguousarray(dKfp[:, spans[k]:spans[k + 1]])
                dX, dS, dv, dl = block.backward(ops, T, dK, r, Xh)
                dXt += dX
                if dS is not None:
                    dsources[k] += dS
                dvar, dlen = dvar + dv, dlen + dl
            r2 = r2 + r @ r if not same else r2
            g = lift_backward_rows(self.Xd[a:b], dXt, scale, xp)
            bias += g["bias"]
            g_scale = g_scale + g["input_scale"]
        sources = [block.source_gradients(None if dS is None else ops.to_host(dS), scale_h)
                   for block, dS in zip(blocks, dsources)]
        sum_r2 = self._pass["sum_r2"] if same else float(ops.to_host(r2))
        d = {k: dkff * sum_r2 * v for k, v in kernel.at_one_gradients().items()}
        d["variance"] = d.get("variance", 0.0) + dvar
        d["lengthscale"] = d.get("lengthscale", 0.0) + dlen
        d["bias"] = bias + sum(g["bias"] for g in sources)
        g_scale = ops.to_host(g_scale)
        d["input_scale"] = (float(g_scale) if scale_h.ndim == 0 else g_scale) + sum(g["input_scale"] for g in sources)
        sums = {k: np.asarray(d.get(k, 0.0), dtype=np.float64) for k in kernel.parameter_names}
        own, dW = {}, np.zeros((0, self.X.shape[1]))
        for block, g in zip(blocks, sources):
            params, rows = block.split(g)
            own.update(params)
            dW = rows if rows is not None and len(rows) else dW
        return sums, model.features.param_gradient(own), dW
