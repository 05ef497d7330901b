r"""VISH's lift-stage subsample kept on a device between the optimiser's evaluations.

Stage (1) of :meth:`~spherelab.VISH.fit` trains every hyper-parameter on a subsample (20 000 rows by
default), one bound and gradient per L-BFGS-B evaluation. On a device other than the CPU the rows
are copied there once; then each evaluation (:meth:`ResidentLift.evaluate`)

1. lifts the rows, evaluates the harmonics :math:`A = K_{uf}` (``(M, n)``, :math:`r_n\psi_m(\hat x_n)`)
   and forms :math:`G = AA^\top`, :math:`c = Ay` and :math:`\sum_n r_n^2` there;
2. runs the collapsed bound's :math:`O(M^3)` algebra there too
   (:func:`~spherelab.bounds.collapsed.collapsed_terms`, the same code as the host's
   :func:`~spherelab.bounds.collapsed_bound`), the spectrum :math:`\lambda` (M numbers) its one copy there;
3. chains :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` through the
   harmonics' VJP and the lift (:func:`~spherelab.sphere.lift.lift_backward_sums`) to :math:`D + 1`
   sums, and sends back one copy of :math:`M + D + 6` numbers: the bound, its derivatives by
   :math:`\lambda` and the noise, the lift's sums, and what the host's checks need (the rows the lift
   rejected, the trace term's two sums).

Nothing of size N crosses between evaluations, and one copy comes back per evaluation (tested with
the simulator's stand-in arrays, which count every transfer); where :math:`B`'s factor fails on the
device the host's bound decides, from a second copy. The columns :math:`A` are kept on the device
between the bound and its gradient when they fit ``VISH.lift_cache_elements``.

:func:`predict_on_device` is VISH's predictive on the same device: each chunk of rows goes there,
the harmonics and the two products with :math:`w` and :math:`C` run there, and the means and
variances come back in one copy.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..bounds.collapsed import collapsed_terms
from ..bounds.statistics import Statistics, check_trace_term, row_chunks
from ..bounds.vish import CollapsedBound, collapsed_bound
from ..features.harmonic import HarmonicFeatures
from ..sphere.lift import lift_backward_sums, lift_gradient_from_sums, lift_rows, lift_rows_kept

if TYPE_CHECKING:
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

    def _gram(self, model: "VISH") -> tuple:
        """:math:`G`, :math:`c`, :math:`\\sum_n r_n^2` and the count of rejected rows, as device arrays
        (the columns kept for the backward pass when they fit)."""
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
        if self.keep:
            self._at = self._parameters(model)
        return G, c, r2, bad

    def _rejected(self, model: "VISH") -> None:
        self._kept, self._at = [], None
        model.kernel.check_lift(self.X)  # raises the lift's own error, naming the row
        raise ValueError("rows of X lift outside the usable range (check_lift found none: report this)")

    def statistics(self, model: "VISH") -> Statistics:
        r""":math:`G = K_{uf}K_{fu}`, :math:`c = K_{uf}y`, :math:`y^\top y` and :math:`\sum_n r_n^2` of
        the rows at the model's current lift, as :func:`~spherelab.bounds.lift_statistics` gives
        them (M-sized results only)."""
        xp, M = self.xp, model.features.num_features
        G, c, r2, bad = self._gram(model)
        # one copy back: G, c, sum r^2 and the rejected rows' count
        packed = self.ops.to_host(xp.concatenate([G.ravel(), c, xp.stack([r2, bad.astype(xp.float64)])]))
        if packed[-1]:
            self._rejected(model)
        G = packed[:M * M].reshape(M, M)
        return Statistics(0.5 * (G + G.T), packed[M * M:M * M + M], self.yy, float(packed[-2]), self.X.shape[0])

    def _sums(self, model: "VISH", B, dsum_r2: float):
        r"""The lift's :math:`D + 1` sums (:func:`~spherelab.sphere.lift.lift_backward_sums`), a device
        array, from ``B`` = :math:`[2\,\partial_G^\top; \partial_c^\top]` ``(M + 1, M)`` on the device."""
        xp, feats = self.xp, model.features
        M = feats.num_features
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
            dXt += (2.0 * dsum_r2) * (Xh * r[:, None])  # sum r^2: its gradient is 2 x_tilde
            sums += lift_backward_sums(self.Xd[a:b], dXt, xp)
        return sums

    def gradient(self, model: "VISH", res: "CollapsedBound") -> dict[str, Any]:
        r"""``bias`` and ``input_scale`` gradients of the bound ``res`` (at :meth:`statistics`' parameters)
        through :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` and
        :math:`\partial L/\partial\sum r^2`, as :func:`~spherelab.bounds.lift_gradient` gives them."""
        # [2 dG^T; dc^T] in one copy: (M + 1, M)
        B = self.ops.to_device(np.vstack([2.0 * res.dG.T, res.dc[None, :]]))
        return lift_gradient_from_sums(self.ops.to_host(self._sums(model, B, res.dsum_r2)), model.kernel.input_scale)

    def evaluate(self, model: "VISH", lam: np.ndarray, v: float, noise: float,
                 residual: bool) -> tuple["CollapsedBound", dict[str, Any]]:
        r"""The collapsed bound (:func:`~spherelab.bounds.vish.collapsed_bound`) at the model's current
        parameters and its gradient, with the lift's, in one copy back: the statistics, the bound's
        algebra (:func:`~spherelab.bounds.collapsed.collapsed_terms`, its :math:`O(M^3)` on the
        device) and the lift's chain rule stay on the device; the value, :math:`\partial/\partial\lambda`,
        :math:`\partial/\partial\sigma^2`, the :math:`D + 1` lift sums and the checks' numbers cross.
        Where :math:`B`'s factor fails on the device (non-finite results), the host's bound decides,
        with its jitter and its error, from a second copy.

        Returns
        -------
        (CollapsedBound without ``dG``, ``dc``; the lift's gradient dict)
        """
        xp, M, n = self.xp, model.features.num_features, self.X.shape[0]
        on = 1.0 if residual else 0.0
        G, c, r2, bad = self._gram(model)
        try:
            t = collapsed_terms(xp, _device_cholesky(xp), functools.partial(self.ops.device_solve, trans=0),
                                functools.partial(_factor_inverse, xp, self.ops), self.ops.to_device(lam), v,
                                noise, 0.5 * (G + G.T), c, self.yy, r2, n, on, gradients=True)
        except (ValueError, np.linalg.LinAlgError):  # B's factor failed where the arrays are checked
            return self._on_host(model, lam, v, noise, residual)
        dsum_r2 = -0.5 * on * v / noise
        sums = self._sums(model, xp.concatenate([2.0 * t.dG.T, t.dc[None, :]]), dsum_r2)
        head = xp.stack([bad.astype(xp.float64), t.value, t.trace, r2, t.dnoise])
        packed = self.ops.to_host(xp.concatenate([head, t.dlam, sums]))  # the evaluation's one copy back
        if packed[0]:
            self._rejected(model)
        value, trace, sum_r2, dnoise = (float(x) for x in packed[1:5])
        if not np.all(np.isfinite(packed[1:])):  # B's factor failed on the device: the host's bound decides
            return self._on_host(model, lam, v, noise, residual)
        if residual:
            check_trace_term(value, v * sum_r2, trace, noise, n)
        res = CollapsedBound(value=value, dlam=packed[5:5 + M], dv=-0.5 * on * sum_r2 / noise, dnoise=dnoise,
                             dG=None, dc=None, dsum_r2=dsum_r2)
        return res, lift_gradient_from_sums(packed[5 + M:], model.kernel.input_scale)

    def _on_host(self, model: "VISH", lam, v, noise, residual) -> tuple["CollapsedBound", dict[str, Any]]:
        """:meth:`evaluate` through the host's bound (its jitter, its errors): two copies back."""
        res = collapsed_bound(lam, v, noise, self.statistics(model), residual=residual)
        return res, self.gradient(model, res)

    def matches(self, X: Any, y: Any) -> bool:
        return X is self.X and y is self.y


def _device_cholesky(xp):
    def factor(B):
        # NumPy raises LinAlgError (ResidentLift.evaluate then asks the host); cuSOLVER leaves NaN,
        # which the copy back shows
        return xp.linalg.cholesky(B)

    return factor


def _factor_inverse(xp, ops, L):
    """:math:`(LL^\top)^{-1}` from two triangular solves on the device."""
    Linv = ops.device_solve(L, xp.eye(L.shape[0]), trans=0)
    return Linv.T @ Linv


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
