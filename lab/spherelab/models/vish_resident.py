r"""VISH's lift-stage subsample kept on a device between the optimiser's evaluations.

Stage (1) of :meth:`~spherelab.VISH.fit` trains every hyper-parameter on a subsample (20 000 rows by
default), one bound and gradient per L-BFGS-B evaluation. On a device other than the CPU the rows
are copied there once; then each evaluation

1. lifts the rows, evaluates the harmonics :math:`A = K_{uf}` (``(M, n)``, :math:`r_n\psi_m(\hat x_n)`)
   and forms :math:`G = AA^\top`, :math:`c = Ay` and :math:`\sum_n r_n^2` there, which come back
   in one copy of :math:`M^2 + M + 2` numbers (the count of rows the lift rejected among them);
2. the collapsed bound's :math:`O(M^3)` algebra runs on the host
   (:func:`~spherelab.bounds.collapsed_bound`, the same code as every other path);
3. its :math:`\partial L/\partial G` and :math:`\partial L/\partial c` go back in one copy, and the
   device chains :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` through
   the harmonics' VJP and the lift (:func:`~spherelab.sphere.lift.lift_backward_sums`) to
   :math:`D + 1` sums, which come back in one copy.

Nothing of size N crosses between evaluations; each direction crosses once per stage (tested with
the simulator's stand-in arrays, which count every transfer). The columns :math:`A` are kept on the
device between the bound and its gradient when they fit ``VISH.lift_cache_elements``.

:func:`predict_on_device` is VISH's predictive on the same device: each chunk of rows goes there,
the harmonics and the two products with :math:`w` and :math:`C` run there, and the means and
variances come back in one copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..bounds.statistics import Statistics, row_chunks
from ..features.harmonic import HarmonicFeatures
from ..sphere.lift import lift_backward_sums, lift_gradient_from_sums, lift_rows, lift_rows_kept

if TYPE_CHECKING:
    from ..bounds.vish import CollapsedBound
    from .vish import VISH

__all__ = ["ResidentLift", "predict_on_device"]


class ResidentLift:
    """One fit's lift-stage rows ``(X, y)`` on the model's device, with VISH's statistics and their
    backward pass written against the device's arrays (``ops.array_namespace()``).

    Parameters
    ----------
    model
        A :class:`~spherelab.VISH` that :meth:`applies` to.
    X, y
        The host rows ``(n, D)``, ``(n,)`` (validated); copied to the device here, once.
    """

    #: rows per device chunk: about 2^25 entries of each (rows, M) temporary (256 MB)
    chunk_entries = 1 << 25

    def __init__(self, model: "VISH", X: np.ndarray, y: np.ndarray) -> None:
        ops = model.ops
        self.ops, self.xp = ops, ops.array_namespace()
        self.X, self.y = X, y
        self.Xd, self.yd = ops.to_device(X), ops.to_device(y)
        self.yy = float(y @ y)
        M, n = model.features.num_features, X.shape[0]
        self.rows = max(1, min(n, self.chunk_entries // max(model.features.all_degrees.size, 1)))
        self.keep = n * M <= model.lift_cache_elements
        self._kept: list = []
        self._at: tuple | None = None  # the parameters of the kept columns

    @staticmethod
    def applies(model: "VISH") -> bool:
        """Whether ``model``'s lift stage runs on its device: a device other than the CPU and the
        spherical harmonics themselves (phase-truncated ones train their directions on the host)."""
        return model.ops.device != "cpu" and type(model.features) is HarmonicFeatures

    @staticmethod
    def _parameters(model: "VISH") -> tuple:
        scale = np.asarray(model.kernel.input_scale, dtype=np.float64)
        return float(model.kernel.bias), scale.tobytes(), scale.shape

    def _lift(self, model: "VISH", a: int, b: int):
        """One chunk's radii and unit rows on the device, and the count of rows whose lift overflows
        or vanishes (a rejected row contributes nothing; :meth:`statistics` then raises)."""
        scale = self.xp.asarray(np.asarray(model.kernel.input_scale, dtype=np.float64))
        return lift_rows_kept(self.xp, self.Xd[a:b], scale, model.kernel.bias)

    def statistics(self, model: "VISH") -> Statistics:
        r""":math:`G = K_{uf}K_{fu}`, :math:`c = K_{uf}y`, :math:`y^\top y` and :math:`\sum_n r_n^2` of
        the rows at the model's current lift, as :func:`~spherelab.bounds.lift_statistics` gives
        them (M-sized results only)."""
        xp, feats = self.xp, model.features
        M, n = feats.num_features, self.X.shape[0]
        G, c, r2, bad = xp.zeros((M, M)), xp.zeros(M), xp.zeros(()), xp.zeros((), dtype=xp.int64)
        self._kept, self._at = [], None
        for a, b in row_chunks(n, self.rows):
            r, Xh, rejected = self._lift(model, a, b)
            A = feats.device_Kuf(self.ops, Xh, r)
            G += A @ A.T
            c += A @ self.yd[a:b]
            r2, bad = r2 + r @ r, bad + rejected
            if self.keep:
                self._kept.append((r, Xh, A))
        # one copy back: G, c, sum r^2 and the rejected rows' count
        packed = self.ops.to_host(xp.concatenate([G.ravel(), c, xp.stack([r2, bad.astype(xp.float64)])]))
        if packed[-1]:
            self._kept = []
            model.kernel.check_lift(self.X)  # raises the lift's own error, naming the row
            raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")
        if self.keep:
            self._at = self._parameters(model)
        G = packed[:M * M].reshape(M, M)
        return Statistics(0.5 * (G + G.T), packed[M * M:M * M + M], self.yy, float(packed[-2]), n)

    def gradient(self, model: "VISH", res: "CollapsedBound") -> dict[str, Any]:
        r"""``bias`` and ``input_scale`` gradients of the bound ``res`` (at :meth:`statistics`' parameters)
        through :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` and
        :math:`\partial L/\partial\sum r^2`, as :func:`~spherelab.bounds.lift_gradient` gives them."""
        xp, feats = self.xp, model.features
        M = feats.num_features
        # [2 dG^T; dc^T] in one copy: (M + 1, M)
        B = self.ops.to_device(np.vstack([2.0 * res.dG.T, res.dc[None, :]]))
        kept = self._kept if self._at is not None and self._at == self._parameters(model) else None
        sums = xp.zeros(self.X.shape[1] + 1)
        for i, (a, b) in enumerate(row_chunks(self.X.shape[0], self.rows)):
            if kept:
                r, Xh, A = kept[i]
            else:
                r, Xh, _ = self._lift(model, a, b)
                A = feats.device_Kuf(self.ops, Xh, r)
            dKfu = A.T @ B[:M] + self.yd[a:b, None] * B[M][None, :]
            dXt = feats.device_Kuf_vjp(self.ops, Xh, xp.ascontiguousarray(dKfu))
            dXt += (2.0 * res.dsum_r2) * (Xh * r[:, None])  # sum r^2: its gradient is 2 x_tilde
            sums += lift_backward_sums(self.Xd[a:b], dXt, xp)
        return lift_gradient_from_sums(self.ops.to_host(sums), model.kernel.input_scale)

    def matches(self, X: Any, y: Any) -> bool:
        return X is self.X and y is self.y


def predict_on_device(model: "VISH", X: np.ndarray, weights: np.ndarray, C: np.ndarray, lam: np.ndarray, *,
                      residual: bool) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`~spherelab.bounds.vish.predict_rows` on the model's device (a model :meth:`ResidentLift.applies`
    to): mean :math:`\Phi_* w`, variance :math:`r_*^2\kappa(1)` (``residual``) or
    :math:`\Phi_*\Lambda\Phi_*^\top`, minus :math:`\Phi_* C\Phi_*^\top`, clipped at 0, ``(N,)`` each,
    for finite rows ``X`` ``(N, D)``. The rows travel a chunk at a time (device memory bounded by the
    chunk, not N); the lift's errors are raised first, on the host (:meth:`ZonalKernel.check_lift`)."""
    ops, xp, feats, kernel = model.ops, model.ops.array_namespace(), model.features, model.kernel
    kernel.check_lift(X)
    w, Cd, lamd = (ops.to_device(a) for a in (weights, C, lam))
    scale = xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
    v = kernel.at_one()
    rows = ops.pass_rows(feats.num_features)
    means, variances = [], []
    for a, b in row_chunks(X.shape[0], rows):
        r, Xh, _ = lift_rows(xp, ops.to_device(X[a:b]), scale, kernel.bias)
        A = feats.device_Kuf(ops, Xh, r)  # (M, n)
        means.append(A.T @ w)
        prior = r * r * v if residual else xp.einsum("mn,m,mn->n", A, lamd, A)
        variances.append(prior - xp.einsum("mn,mn->n", Cd @ A, A))
    out = ops.to_host(xp.concatenate(means + variances))
    n = X.shape[0]
    return out[:n], np.maximum(out[n:], 0.0)
