r"""The decoupled models' rows kept on a device between evaluations.

For :class:`~spherelab.OrthogonalSVGP` and :class:`~spherelab.ActivatedSVGP`, :math:`K_{pf} = [K_{uf}; K_{vf}]`
is built from column blocks, each an operation of the device table on the rows' lift: the
feature set's own (:meth:`~spherelab.features.Features.device_columns`: inducing points, activated
units, spherical harmonics) and the kernel's at the orthogonal inputs
(:class:`~spherelab.features.device_columns.KernelColumns`, stacked with inducing points' in one
block). :class:`~spherelab.HarmonicSVGP` uses the same rows with its own block
(:class:`~spherelab.features.device_columns.OrbitColumns`: :mod:`.hvgp_resident`).

On a device other than the CPU the training rows are copied there once. An evaluation of the
whitened Gaussian bound (:func:`~spherelab.bounds.gaussian_stats_bound_whitened`) then runs there
whole (:func:`~spherelab.models.resident_bound.resident_bound`: :meth:`ResidentRows.gram` gives
:math:`\Phi = AA^\top`, :math:`\beta = Ay` and :math:`\sum_n r_n^2`, :math:`A = L_J^{-1}K_{pf}`;
:meth:`ResidentRows.device_sums` the rows' chain from
:math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top`) and copies back once. :meth:`statistics`
and :meth:`row_sums` are the same two passes with a copy back each, for the host's bound (q's
optimum at a fit's start, and an evaluation whose factor failed on the device). Nothing of size N
crosses between evaluations (tested with the simulator's stand-in arrays, which count every transfer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..bounds.statistics import Statistics, row_chunks
from ..sphere.lift import lift_backward_sums, lift_gradient_from_sums, lift_rows_kept

if TYPE_CHECKING:
    from .decoupled import OrthogonalSVGP

__all__ = ["ResidentRows"]


class ResidentRows:
    """Training rows ``(X, y)`` of one model on its device, with the statistics pass and its
    backward pass written against the device's arrays (``ops.array_namespace()``).

    Parameters
    ----------
    model
        An :class:`~spherelab.OrthogonalSVGP` that :meth:`applies` to, or any model with the same
        hooks (:class:`~spherelab.HarmonicSVGP`): ``column_blocks()`` (the device's column blocks of
        :math:`K_{fp}` at its current parameters), ``column_width()`` (the widest chunk temporary's
        columns), ``column_parameters(own)`` (the blocks' ``split`` results as its gradient),
        ``keep_entries``, ``kernel`` and ``ops``.
    X, y
        The host rows ``(N, D)``, ``(N,)`` (validated); copied to the device here, once, unless
        ``on_device`` gives them there already (:meth:`batch`).
    """

    #: rows per device chunk: about 2^25 entries of each (rows, P) temporary (256 MB)
    chunk_entries = 1 << 25

    def __init__(self, model: "OrthogonalSVGP", X: np.ndarray, y: np.ndarray, on_device: tuple | None = None) -> None:
        ops = model.ops
        self.ops, self.xp = ops, ops.array_namespace()
        self.X, self.y = X, y  # the host arrays these rows copy: a later call with the same ones reuses them
        self.Xd, self.yd = (ops.to_device(X), ops.to_device(y)) if on_device is None else on_device
        self.yy = float(y @ y)
        P = model.column_width()  # the widest (rows, P) temporary's columns
        self.rows = max(1, min(X.shape[0], self.chunk_entries // max(P, 1)))
        self.keep = X.shape[0] * P <= model.keep_entries  # the chunks' A kept for the backward pass
        self._pass: dict[str, Any] = {}

    def batch(self, model: "OrthogonalSVGP", idx: np.ndarray) -> "ResidentRows":
        """The rows ``idx`` of these, gathered on the device: only the B indices cross."""
        idxd = self.ops.to_device(idx)
        return ResidentRows(model, self.X[idx], self.y[idx], (self.Xd[idxd], self.yd[idxd]))

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

    def _chunk(self, kernel, blocks, scale, a: int, b: int, LJd):
        """One chunk's lift (radii, unit rows), each block's T = X_hat S_hat^T, A = L_J^-1 K_pf
        ``(P, n)``, and the count of rows whose lift overflows or vanishes."""
        xp = self.xp
        r, Xh, bad = lift_rows_kept(xp, self.Xd[a:b], scale, kernel.bias)  # rejected rows reported after the pass
        Ts, cols = zip(*(block.columns(self.ops, r, Xh) for block in blocks))
        Kfp = cols[0] if len(cols) == 1 else xp.concatenate(cols, axis=1)
        return r, Xh, Ts, self.ops.device_solve(LJd, Kfp.T), bad

    def gram(self, model: "OrthogonalSVGP", LJd, blocks: list):
        r""":math:`\Phi`, :math:`\beta`, :math:`\sum_n r_n^2` and the rejected rows' count, device
        arrays, at :math:`L_J` ``LJd`` (a device array) and the column ``blocks``
        (the model's ``column_blocks()``); the chunks are kept for :meth:`device_sums` when they fit."""
        xp, kernel = self.xp, model.kernel
        scale = xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
        P, n = LJd.shape[0], self.X.shape[0]
        G, c, sum_r2, bad, kept = xp.zeros((P, P)), xp.zeros(P), xp.zeros(()), xp.zeros(()), []
        for a, b in row_chunks(n, self.rows):
            r, Xh, Ts, A, rejected = self._chunk(kernel, blocks, scale, a, b, LJd)
            G += A @ A.T
            c += A @ self.yd[a:b]
            sum_r2 = sum_r2 + r @ r
            bad = bad + rejected
            if self.keep:
                kept.append((r, Xh, Ts, A))
        self._pass = {"LJ": LJd, "kept": kept, "blocks": blocks, "LJd": LJd, "r2": sum_r2}
        return G, c, sum_r2, bad

    def rejected(self, model: "OrthogonalSVGP") -> None:
        """Raise the lift's own error for these rows (some lifted outside the usable range)."""
        self._pass = {}
        model.kernel.check_lift(self.X)  # raises the lift's own error, naming the row
        raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")

    def statistics(self, model: "OrthogonalSVGP", LJ: np.ndarray) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)` at the model's
        current parameters (what :meth:`OrthogonalSVGP._statistics` returns), P-sized results only,
        in one copy back."""
        G, c, r2, bad = self.gram(model, self.ops.to_device(LJ), model.column_blocks())
        G, c, r2, bad = copy_back(self.ops, [G, c, r2, bad])
        if bad:
            self.rejected(model)
        self._pass["LJ"] = LJ  # row_sums at the same L_J reuses this pass
        return Statistics(0.5 * (G + G.T), c, self.yy, float(r2) * model.kernel.at_one(), self.X.shape[0])

    def row_sums(self, model: "OrthogonalSVGP", LJ: np.ndarray, Q: np.ndarray, qb: np.ndarray,
                 dkff: float) -> tuple:
        r"""The rows' gradient sums (what :meth:`DecoupledGradients.sums` gives) from
        :math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top` and the constant
        :math:`\partial L/\partial k(x_n, x_n)` ``dkff``, after :meth:`statistics` at the same
        parameters (or not: the chunks are then recomputed), in one copy back."""
        ops = self.ops
        same = self._pass.get("LJ") is LJ  # this evaluation's statistics: its blocks and L_J reused
        if not same:
            self._pass = {"LJd": ops.to_device(LJ), "blocks": model.column_blocks(), "kept": None}
        parts = self.device_sums(model, ops.to_device(Q), ops.to_device(qb), dkff)
        return self.finish_sums(model, copy_back(ops, parts), dkff)

    def device_sums(self, model: "OrthogonalSVGP", Qd, qbd, dkff: float) -> list:
        r"""The device's part of :meth:`row_sums` from device arrays ``Qd`` ``(P, P)`` and ``qbd``
        ``(P,)``, at the :math:`L_J` and blocks of the last :meth:`gram` (its chunks reused when
        kept): device arrays ``[dvariance, dlengthscale, the lift's D + 1 sums,`` :math:`\sum_n r_n^2`
        ``, each block's sources' gradient ...]`` for :meth:`finish_sums`."""
        ops, xp, kernel = self.ops, self.xp, model.kernel
        blocks, LJd, kept = self._pass["blocks"], self._pass["LJd"], self._pass.get("kept") or None
        scale = xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
        kappa1 = kernel.at_one()
        spans = np.cumsum([0] + [block.width for block in blocks])
        dvar, dlen, sums = xp.zeros(()), xp.zeros(()), xp.zeros(self.X.shape[1] + 1)
        dsources = [xp.zeros(block.source_shape if block.source_shape is not None else (0,)) for block in blocks]
        r2 = xp.zeros(())
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
            r2 = r2 + r @ r
            sums += lift_backward_sums(self.Xd[a:b], dXt, xp)
        return [dvar, dlen, sums, r2, *dsources]

    def finish_sums(self, model: "OrthogonalSVGP", parts: list, dkff: float) -> tuple:
        """:meth:`row_sums`' result from the host copies of :meth:`device_sums`' arrays."""
        kernel, blocks = model.kernel, self._pass["blocks"]
        dvar, dlen, sums, r2, *dsources = parts
        scale_h = np.asarray(kernel.input_scale, dtype=np.float64)
        sources = [block.source_gradients(None if block.source_shape is None else dS, scale_h)
                   for block, dS in zip(blocks, dsources)]
        g = lift_gradient_from_sums(sums, kernel.input_scale)
        d = {k: dkff * float(r2) * v for k, v in kernel.at_one_gradients().items()}
        d["variance"] = d.get("variance", 0.0) + float(dvar)
        d["lengthscale"] = d.get("lengthscale", 0.0) + float(dlen)
        d["bias"] = g["bias"] + sum(gs["bias"] for gs in sources)
        d["input_scale"] = g["input_scale"] + sum(gs["input_scale"] for gs in sources)
        out = {k: np.asarray(d.get(k, 0.0), dtype=np.float64) for k in kernel.parameter_names}
        own, dW = {}, np.zeros((0, self.X.shape[1]))
        for block, gs in zip(blocks, sources):
            params, rows = block.split(gs)
            own.update(params)
            dW = rows if rows is not None and len(rows) else dW
        return out, model.column_parameters(own), dW


def copy_back(ops, arrays: list) -> list:
    """The device ``arrays`` (any shapes, 0-d included) on the host in one copy: concatenated on the
    device, copied, and split again; each comes back a float64 array of its own shape."""
    xp = ops.array_namespace()
    flat = ops.to_host(xp.concatenate([xp.ravel(xp.asarray(a, dtype=xp.float64)) for a in arrays]))
    out, i = [], 0
    for a in arrays:
        n = int(np.prod(a.shape))
        out.append(flat[i:i + n].reshape(a.shape))
        i += n
    return out
