r"""The decoupled models' rows kept on a device between evaluations.

For :class:`~spherelab.OrthogonalSVGP` (and :class:`~spherelab.ActivatedSVGP`'s K = 0) with inducing
points, under a kernel with a compiled shape (:meth:`~spherelab.kernels.ZonalKernel.fused_code`),
:math:`K_{pf} = [k(Z, X); k(W, X)] = k(S, X)` with the stacked inputs :math:`S = [Z; W]` ``(P, D)``:
one cross-covariance. On a device other than the CPU the training rows are copied there once; each
evaluation of the whitened Gaussian bound (:func:`~spherelab.bounds.gaussian_stats_bound_whitened`)
then sends :math:`L_J` and S's lift and gets back :math:`\Phi = AA^\top`, :math:`\beta = Ay` and
:math:`\sum_n k(x_n, x_n)` (:math:`A = L_J^{-1}K_{pf}`); its backward pass sends :math:`Q` and
:math:`q_\beta` (:math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top`) and gets back the
hyper-parameters' sums and :math:`\partial L/\partial S`. Nothing of size N crosses between
evaluations (tested with the simulator's stand-in arrays, which count every transfer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import MAX_MAGNITUDE
from ..bounds.statistics import Statistics, row_chunks
from ..features.points import InducingPoints
from ..sphere.lift import lift_backward_rows, lift_rows, lifted_row_gradients

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
        arrays are the device's), inducing points and a kernel with a compiled shape."""
        return (model.ops.device != "cpu" and isinstance(model.features, InducingPoints)
                and model.kernel.fused_code() is not None)

    def matches(self, X: Any, y: Any) -> bool:
        return X is self.X and y is self.y

    def _sources(self, model):
        """S = [Z; W] on the host, and its lift's radii and unit rows on the device."""
        S = np.vstack([model.features.Z, model.W]) if model.num_orthogonal else model.features.Z
        r, U = model.kernel.lift(S, "Z")
        return S, self.ops.to_device(r), self.ops.to_device(U)

    def _chunk(self, kernel, scale, a: int, b: int, rS, US, LJd):
        """One chunk's lift (radii, unit rows), T = X_hat S_hat^T ``(n, P)``, A ``(P, n)``, and the
        count of rows whose lift overflows or vanishes."""
        xp = self.xp
        with np.errstate(all="ignore"):  # rejected rows are reported after the pass
            r, Xh, big = lift_rows(xp, self.Xd[a:b], scale, kernel.bias)
            ok = (big <= MAX_MAGNITUDE) & (r > 0)
        bad = xp.count_nonzero(~ok)
        # a rejected row contributes nothing (no NaN or overflow reaches the sums); the pass then raises
        r = xp.where(ok, r, 0.0)
        Xh = xp.where(ok[:, None], Xh, 1.0 / np.sqrt(Xh.shape[1]))
        T = Xh @ US.T
        Kfp = self.ops.zonal_columns(T, r, rS, kernel.fused_code(), kernel.lengthscale, kernel.variance)
        return r, Xh, T, self.ops.device_solve(LJd, Kfp.T), bad

    def statistics(self, model: "OrthogonalSVGP", LJ: np.ndarray) -> Statistics:
        r""":math:`\Phi`, :math:`\beta`, :math:`y^\top y` and :math:`\sum_n k(x_n, x_n)` at the model's
        current parameters (what :meth:`OrthogonalSVGP._statistics` returns), P-sized results only."""
        ops, xp, kernel = self.ops, self.xp, model.kernel
        S, rS, US = self._sources(model)
        LJd, scale = ops.to_device(LJ), xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
        P, n = LJ.shape[0], self.X.shape[0]
        G, c, sum_r2, bad, kept = xp.zeros((P, P)), xp.zeros(P), xp.zeros(()), 0, []
        for a, b in row_chunks(n, self.rows):
            r, Xh, T, A, rejected = self._chunk(kernel, scale, a, b, rS, US, LJd)
            G += A @ A.T
            c += A @ self.yd[a:b]
            sum_r2 = sum_r2 + r @ r
            bad = bad + rejected
            if self.keep:
                kept.append((r, Xh, T, A))
        if int(bad):
            kernel.check_lift(self.X)  # raises the lift's own error, naming the row
            raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")
        total = float(ops.to_host(sum_r2))
        self._pass = {"LJ": LJ, "kept": kept, "sum_r2": total, "sources": (S, rS, US), "LJd": LJd}
        G = ops.to_host(G)
        return Statistics(0.5 * (G + G.T), ops.to_host(c), self.yy, total * kernel.at_one(), n)

    def row_sums(self, model: "OrthogonalSVGP", LJ: np.ndarray, Q: np.ndarray, qb: np.ndarray,
                 dkff: float) -> tuple:
        r"""The rows' gradient sums (what :meth:`DecoupledGradients.sums` gives) from
        :math:`\partial L/\partial K_{pf} = QA + q_\beta y^\top` and the constant
        :math:`\partial L/\partial k(x_n, x_n)` ``dkff``, after :meth:`statistics` at the same
        parameters."""
        ops, xp, kernel = self.ops, self.xp, model.kernel
        same = self._pass.get("LJ") is LJ  # this evaluation's statistics: its lift of S and L_J reused
        S, rS, US = self._pass["sources"] if same else self._sources(model)
        LJd = self._pass["LJd"] if same else ops.to_device(LJ)
        scale_h = np.asarray(kernel.input_scale, dtype=np.float64)
        scale = xp.asarray(scale_h)
        Qd, qbd = ops.to_device(Q), ops.to_device(qb)
        kept = self._pass["kept"] if same else None
        code, kappa1 = kernel.fused_code(), kernel.at_one()
        dvar = dlen = 0.0
        dXtS = xp.zeros((S.shape[0], S.shape[1] + 1))
        bias, g_scale, r2 = 0.0, xp.zeros(scale_h.shape), xp.zeros(())
        for i, (a, b) in enumerate(row_chunks(self.X.shape[0], self.rows)):
            r, Xh, T, A = kept[i] if kept else self._chunk(kernel, scale, a, b, rS, US, LJd)[:4]
            dKfp = xp.ascontiguousarray((Qd @ A + qbd[:, None] * self.yd[None, a:b]).T)
            Ab, Bb, dv, dl = ops.zonal_columns_backward(T, dKfp, r, rS, code, kernel.lengthscale, kernel.variance)
            dvar, dlen = dvar + dv, dlen + dl
            r2 = r2 + r @ r if not same else r2
            dXt, dXt_S = lifted_row_gradients(Ab, Bb, r, Xh, rS, US)
            dXt += (2.0 * kappa1 * dkff) * (Xh * r[:, None])  # the prior variances r^2 kappa(1)
            g = lift_backward_rows(self.Xd[a:b], dXt, scale, xp)
            bias += g["bias"]
            g_scale = g_scale + g["input_scale"]
            dXtS += dXt_S
        gS = lift_backward_rows(S, ops.to_host(dXtS), scale_h)
        sum_r2 = self._pass["sum_r2"] if same else float(ops.to_host(r2))
        d = {k: dkff * sum_r2 * v for k, v in kernel.at_one_gradients().items()}
        d["variance"] = d.get("variance", 0.0) + dvar
        d["lengthscale"] = d.get("lengthscale", 0.0) + dlen
        d["bias"] = bias + gS["bias"]
        g_scale = ops.to_host(g_scale)
        d["input_scale"] = (float(g_scale) if scale_h.ndim == 0 else g_scale) + gS["input_scale"]
        M = model.features.num_features
        sums = {k: np.asarray(d[k], dtype=np.float64) for k in kernel.parameter_names}
        return sums, model.features.param_gradient({"Z": gS["X"][:M]}), gS["X"][M:]
