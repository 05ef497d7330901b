"""The parameter gradients of the orthogonally-decoupled models (:class:`~spherelab.OrthogonalSVGP`),
accumulated from a bound's matrix derivatives (GPy's contract): the inducing block once, the rows
chunk by chunk — on one thread, split across the cores, or block by block on Dask — their sums
added at the end."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..bounds.sums import GradientSums

__all__ = ["DecoupledGradients"]


class DecoupledGradients:
    """Accumulates the parameter gradients of ``model`` (an :class:`~spherelab.OrthogonalSVGP`) from
    the matrix derivatives (GPy's contract): the inducing block once, the row blocks once per chunk."""

    def __init__(self, model) -> None:
        self.model = model
        self.kernel_sums = GradientSums.for_kernel(model.kernel)
        self.fparams = np.zeros_like(model.features.get_params())
        self.dW = np.zeros_like(model.W)

    def _add(self, d: dict[str, Any], features: bool = False) -> None:
        self.kernel_sums.add(d)
        if features:
            self.fparams += self.model.features.param_gradient(d)

    def inducing(self, dKuu, dKvv, dKvu) -> None:
        m, kern, feats = self.model, self.model.kernel, self.model.features
        self._add(feats.Kuu_gradients(kern, m._jitter_backward(dKuu), ops=m.ops), features=True)
        if m.num_orthogonal:
            dKvv = m._jitter_backward(dKvv)
            d, dWvv, _ = kern.gradients_with_inputs(0.5 * (dKvv + dKvv.T), m.W, ops=m.ops)
            self._add(d)
            self.dW += dWvv
            d = feats.Kuf_gradients(kern, dKvu.T, m.W, ops=m.ops)
            self._add(d, features=True)
            self.dW += d["X"]

    def merge(self, other: "DecoupledGradients") -> None:
        """Add another accumulator's sums (a share of the rows)."""
        self.add_sums(other.sums())

    def sums(self) -> tuple:
        """The row sums as plain arrays (what a Dask block returns)."""
        return dict(self.kernel_sums.sums), self.fparams, self.dW

    def add_sums(self, sums: tuple) -> None:
        acc, fparams, dW = sums
        self.kernel_sums.add(acc)
        self.fparams = self.fparams + fparams
        self.dW = self.dW + dW

    def chunk(self, X, y, A, Q, qb, dkff) -> None:
        """A chunk of the statistics path's backward pass: :math:`\\partial/\\partial K_{pf} =
        QA + q_\beta y^\top` (``Q``, ``qb`` from the bound), chained to the parameters."""
        M = self.model.features.num_features
        dKpf = Q @ A + np.outer(qb, y)
        self.rows(X, dKpf[:M], dKpf[M:], np.full(X.shape[0], dkff))

    def rows(self, X, dKuf, dKvf, dkff) -> None:
        m, kern = self.model, self.model.kernel
        self._add(m.features.Kuf_gradients(kern, dKuf, X, ops=m.ops), features=True)
        self._add(kern.diag_gradients(dkff, X))
        if m.num_orthogonal:
            d, dWvf, _ = kern.gradients_with_inputs(dKvf, m.W, X, ops=m.ops)
            self._add(d)
            self.dW += dWvf

    def result(self, dm_u, dL_u, dm_v, dL_v, dnoise) -> dict[str, Any]:
        g: dict[str, Any] = {"q_mu": dm_u, "q_sqrt": dL_u, "q_mu_orth": dm_v, "q_sqrt_orth": dL_v,
                             "features": self.fparams, "W": self.dW}
        g.update(self.kernel_sums.result())
        g["noise"] = dnoise
        return g
