r"""VISH's lift-stage subsample on the rows floor, kept between the optimiser's evaluations.

Stage (1) of :meth:`~spherelab.VISH.fit` trains every hyper-parameter on a subsample (20 000 rows by
default), one bound and gradient per L-BFGS-B evaluation. The rows are held by
:class:`~spherelab.rows.device.DeviceRows`: on the CPU the host's arrays themselves, in
cache-sized chunks dealt to the cores; on another device copied there once. Then each evaluation
(:meth:`ResidentLift.evaluate`)

1. forms :math:`G = AA^\top`, :math:`c = Ay` and :math:`\sum_n r_n^2` of the harmonics
   :math:`A = K_{uf}` (``(M, n)``, :math:`r_n\psi_m(\hat x_n)`) there, by the rows floor's one pass
   (:meth:`~spherelab.rows.device.DeviceRows.gram`, no whitening: :math:`K_{uu}` is diagonal);
2. runs the collapsed bound's :math:`O(M^3)` algebra there too
   (:func:`~spherelab.bounds.collapsed.collapsed_terms`, the same code as the host's
   :func:`~spherelab.bounds.collapsed_bound`), the spectrum :math:`\lambda` (M numbers) its one copy there;
3. chains :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` through the
   harmonics' VJP and the lift (:meth:`~spherelab.rows.device.DeviceRows.sums`) to :math:`D + 1`
   sums, and sends back one copy of :math:`M + D + 6` numbers: the bound, its derivatives by
   :math:`\lambda` and the noise, the lift's sums, and what the host's checks need (the rows the lift
   rejected, the trace term's two sums).

Nothing of size N crosses between evaluations, and one copy comes back per evaluation (tested with
the simulator's stand-in arrays, which count every transfer); where :math:`B`'s factor fails
there the host's bound decides, from a second copy. The columns :math:`A` are kept on the device
between the bound and its gradient when they fit ``VISH.lift_cache_elements``.

:func:`predict_on_device` is VISH's predictive on the same device (the CPU's included): each
chunk of rows goes there, the harmonics and the two products with :math:`w` and :math:`C` run
there, and the means and variances come back in one copy.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..bounds.collapsed import collapsed_terms
from ..bounds.statistics import Statistics, check_trace_term, row_chunks
from ..bounds.vish import CollapsedBound, collapsed_bound, predict_rows
from ..chunks import chunk_rows
from ..features.harmonic import HarmonicFeatures
from ..sphere.lift import lift_gradient_from_sums, lift_rows
from .device import DeviceRows, copy_back

__all__ = ["ResidentLift", "host_rows", "predict", "predict_on_device"]


def host_rows(model) -> int:
    """Rows per chunk of VISH's host passes (the lift stage, predictions): ``chunk_size``, else
    the CPU's cache-sized chunks for its M features. The pass over every row takes the device's
    own (``ops.pass_rows``)."""
    return model.chunk_size or chunk_rows(model.features.num_features)


class ResidentLift:
    """One fit's lift-stage rows ``(X, y)`` on the device of ``model`` (a :class:`~spherelab.VISH`
    that :meth:`applies` to), with VISH's statistics and their backward pass by the rows floor.

    Parameters
    ----------
    model
        The model.
    X, y
        The host rows ``(n, D)``, ``(n,)`` (validated); copied to the device here, once.
    """

    def __init__(self, model, X: np.ndarray, y: np.ndarray) -> None:
        feats = model.features
        self.ops, self.xp, self.X = model.ops, model.ops.array_namespace(), X
        # on the CPU the host's cache-sized chunks; a device's own elsewhere
        sized = (lambda n: host_rows(model)) if model.ops.device == "cpu" else None
        # the harmonics' temporaries hold every harmonic before those of zero variance are dropped
        self.rows = DeviceRows(model.ops, X, y, feats.all_degrees.size, model.lift_cache_elements,
                               kept_width=feats.num_features, chunk_rows=sized)
        self._last: tuple | None = None  # (the lift's parameters, the pass there) when its columns are kept

    @staticmethod
    def applies(model) -> bool:
        """Whether ``model``'s lift stage and predictions run on the floor: the spherical harmonics
        themselves, on any device (phase-truncated ones train their directions, and additive ones
        sum components, in the features' own host pass)."""
        return type(model.features) is HarmonicFeatures

    @staticmethod
    def _parameters(model) -> tuple:
        scale = np.asarray(model.kernel.input_scale, dtype=np.float64)
        return float(model.kernel.bias), scale.tobytes(), scale.shape

    def _gram(self, model):
        p = self.rows.gram(model.kernel, model.features.device_columns(model.kernel, self.ops))
        self._last = (self._parameters(model), p) if p.kept is not None else None
        return p

    def _pass_at(self, model):
        """The kept pass where the lift has not moved since, else a new one."""
        if self._last is not None and self._last[0] == self._parameters(model):
            return self._last[1]
        return self._gram(model)

    def _rejected(self, model) -> None:
        self._last = None
        self.rows.rejected(model.kernel)

    def statistics(self, model) -> Statistics:
        r""":math:`G = K_{uf}K_{fu}`, :math:`c = K_{uf}y`, :math:`y^\top y` and :math:`\sum_n r_n^2` of
        the rows at the model's current lift, as :func:`~spherelab.bounds.lift_statistics` gives
        them (M-sized results only, one copy back)."""
        p = self._gram(model)
        G, c, r2, bad = copy_back(self.ops, [p.G, p.c, p.r2, p.bad])
        if bad:
            self._rejected(model)
        return Statistics(0.5 * (G + G.T), c, self.rows.yy, float(r2), self.X.shape[0])

    def gradient(self, model, res: CollapsedBound) -> dict[str, Any]:
        r"""``bias`` and ``input_scale`` gradients of the bound ``res`` (at :meth:`statistics`' parameters)
        through :math:`\partial L/\partial K_{fu} = 2A^\top\partial_G + y\,\partial_c^\top` and
        :math:`\partial L/\partial\sum r^2`, as :func:`~spherelab.bounds.lift_gradient` gives them."""
        ops = self.ops
        sums, _ = self.rows.sums(self._pass_at(model), ops.to_device(2.0 * res.dG), ops.to_device(res.dc),
                                 res.dsum_r2)
        return lift_gradient_from_sums(ops.to_host(sums), model.kernel.input_scale)

    def evaluate(self, model, lam: np.ndarray, v: float, noise: float,
                 residual: bool) -> tuple[CollapsedBound, dict[str, Any]]:
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
        xp, ops, M, n = self.xp, self.ops, model.features.num_features, self.X.shape[0]
        on = 1.0 if residual else 0.0
        p = self._gram(model)
        try:
            t = collapsed_terms(xp, _device_cholesky(xp), functools.partial(ops.device_solve, trans=0),
                                ops.factor_inverse, ops.to_device(lam), v,
                                noise, 0.5 * (p.G + p.G.T), p.c, self.rows.yy, p.r2, n, on, gradients=True)
        except (ValueError, np.linalg.LinAlgError):  # B's factor failed where NumPy's arrays are checked
            return self._on_host(model, lam, v, noise, residual)
        dsum_r2 = -0.5 * on * v / noise
        sums, _ = self.rows.sums(p, 2.0 * t.dG, t.dc, dsum_r2)
        head = xp.stack([xp.asarray(p.bad, dtype=xp.float64), t.value, t.trace, p.r2, t.dnoise])
        packed = ops.to_host(xp.concatenate([head, t.dlam, sums]))  # the evaluation's one copy back
        if packed[0]:
            self._rejected(model)
        value, trace, sum_r2, dnoise = (float(x) for x in packed[1:5])
        if not np.all(np.isfinite(packed[1:])):  # cuSOLVER left NaN where B's factor failed: the host decides
            return self._on_host(model, lam, v, noise, residual)
        if residual:
            check_trace_term(value, v * sum_r2, trace, noise, n)
        res = CollapsedBound(value=value, dlam=packed[5:5 + M], dv=-0.5 * on * sum_r2 / noise, dnoise=dnoise,
                             dG=None, dc=None, dsum_r2=dsum_r2)
        return res, lift_gradient_from_sums(packed[5 + M:], model.kernel.input_scale)

    def _on_host(self, model, lam, v, noise, residual) -> tuple[CollapsedBound, dict[str, Any]]:
        """:meth:`evaluate` through the host's bound (its jitter, its errors): two copies back."""
        res = collapsed_bound(lam, v, noise, self.statistics(model), residual=residual)
        return res, self.gradient(model, res)

    def matches(self, X: Any, y: Any) -> bool:
        return self.rows.matches(X, y)


def _device_cholesky(xp):
    def factor(B):
        # NumPy raises LinAlgError (ResidentLift.evaluate then asks the host); cuSOLVER leaves NaN,
        # which the copy back shows
        return xp.linalg.cholesky(B)

    return factor


def predict_on_device(model, X: np.ndarray, weights: np.ndarray, C: np.ndarray, lam: np.ndarray, *,
                      residual: bool) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`~spherelab.bounds.vish.predict_rows` on the device of ``model`` (a :class:`~spherelab.VISH`
    :meth:`ResidentLift.applies` to): mean :math:`\Phi_* w`, variance :math:`r_*^2\kappa(1)`
    (``residual``) or :math:`\Phi_*\Lambda\Phi_*^\top`, minus :math:`\Phi_* C\Phi_*^\top`, clipped at
    0, ``(N,)`` each (the features prior's in one product, :math:`\Phi_*(\Lambda - C)\Phi_*^\top`),
    for finite rows ``X`` ``(N, D)``. The rows travel a chunk at a time (device memory bounded by
    the chunk, not N); the lift's errors are raised first, on the host
    (:meth:`ZonalKernel.check_lift`)."""
    ops, xp, feats, kernel = model.ops, model.ops.array_namespace(), model.features, model.kernel
    kernel.check_lift(X)
    # the features prior's variance Phi (Lambda - C) Phi^T in one product
    w, Cd = ops.to_device(weights), ops.to_device(C if residual else np.diag(lam) - C)
    scale = xp.asarray(np.asarray(kernel.input_scale, dtype=np.float64))
    v = kernel.at_one()
    rows = ops.pass_rows(feats.num_features)
    means, variances = [], []
    for a, b in row_chunks(X.shape[0], rows):
        r, Xh, _ = lift_rows(xp, ops.to_device(X[a:b]), scale, kernel.bias)
        A = feats.device_Kuf(ops, Xh, r)  # (M, n)
        means.append(A.T @ w)
        explained = xp.einsum("mn,mn->n", Cd @ A, A)
        variances.append(r * r * v - explained if residual else explained)
    out = ops.to_host(xp.concatenate(means + variances))
    n = X.shape[0]
    return out[:n], np.maximum(out[n:], 0.0)


def predict(model, X: np.ndarray, weights: np.ndarray, C: np.ndarray, lam: np.ndarray, *,
            residual: bool) -> tuple[np.ndarray, np.ndarray]:
    """VISH's predictive mean and variance of f at finite rows ``X`` ``(N, D)``: on the floor
    (:func:`predict_on_device`) where :meth:`ResidentLift.applies`, else the features' own host
    pass (:func:`~spherelab.bounds.vish.predict_rows`, eight cache-sized chunks at a time)."""
    if ResidentLift.applies(model):
        return predict_on_device(model, X, weights, C, lam, residual=residual)
    return predict_rows(model.features, model.kernel, X, weights, C, lam, residual=residual, rows=8 * host_rows(model),
                        ops=model.ops)
