r"""Minibatch steps of the inducing-variable models' ``fit_svi``: on the host (:class:`AdamSteps`, Adam on
the registry's flat vector, each minibatch's gradient by the model's ``objective``), and the decoupled
models' step resident on a device (:class:`ResidentSteps`, :meth:`~spherelab.OrthogonalSVGP.fit_svi`).

On a device other than the CPU, for a Gaussian likelihood with whitened q and the sufficient
statistics (:class:`ResidentSteps.applies`), a fit copies the training rows there once
(:class:`~spherelab.rows.device.DeviceRows`) and keeps q and q's Adam moments there
too. A step then:

1. sends the minibatch's B indices and the column blocks' sources (for inducing points, one block
   at :math:`S = [Z; W]`); other feature sets also send the joint inducing block :math:`K_{pp}`
   ``(P, P)``, computed on the host (O(P²D)). Every copy there precedes the step's first launch,
   when the device is idle, so none of them waits on the device;
2. on the device: for inducing points :math:`K_{pp} = k(S, S)` from the same block's columns
   (with the host's jitter per diagonal block); gathers the batch, factors
   :math:`K_{pp} = L_JL_J^\top`, forms the batch's whitened statistics :math:`\Phi`, :math:`\beta`,
   evaluates the bound and its backward pass
   (:func:`~spherelab.bounds.whitened_stats.whitened_stats_terms`: the :math:`O(P^3)` algebra, the
   Cholesky factor's reverse mode included), the rows' chain rule and, for inducing points,
   :math:`K_{pp}`'s chain into the same sums (rows and inducing block are the kernel's columns at
   the same sources);
3. copies back one array: the value, the checks' numbers, the hyper-parameters', sources' and
   lift's sums (and :math:`\partial L/\partial K_{pp}` where the host built it). This is the
   step's only wait on the device;
4. launches q's Adam step on the device, and on the host chains the sums (and
   :math:`\partial L/\partial K_{pp}`) to the kernel, the features, W and the noise, and takes
   their Adam step.

Adam is elementwise, so Adam on q's entries on the device and on the other entries on the host is
Adam on the whole vector (the same numbers as :class:`AdamSteps`, to
rounding). Where the device's factor fails or a result is not finite, that step is taken on the
host instead (its jitter, its errors), from a second copy of q.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..likelihoods import Gaussian
from ..linalg import NumericalFailure
from ..optim import Adam
from .gradients import DecoupledGradients
from .whitened import ResidentRows, chain_sums, own_inducing_block, resident_bound, split_flat

__all__ = ["ResidentSteps", "AdamSteps", "minibatch_gradient", "Q_NAMES"]

#: q's registry entries, in the order of the device's flat vector [m_u, m_v, L_u, L_v]
Q_NAMES = ("q_mu", "q_mu_orth", "q_sqrt", "q_sqrt_orth")


def minibatch_gradient(model: Any, theta: np.ndarray, X: np.ndarray, y: np.ndarray, num_data: int,
                       names: list[str] | None = None) -> tuple[float, np.ndarray]:
    """The ELBO estimate on the minibatch ``(X, y)`` and its gradient over ``theta`` (of ``names``,
    default all), the model left at ``theta``; a step that leaves the usable range raises."""
    value, grad = model.objective(theta, X, y, names=names, num_data=num_data)
    if value >= 1e300:
        raise NumericalFailure("a minibatch step left the usable range (Cholesky failed); lower lr")
    return -value, -grad  # objective returns the negated ELBO and its gradient


class AdamSteps:
    """:meth:`~spherelab.models.sparse.SparseModel.fit_svi`'s steps on the host: Adam on the registry's flat vector, the
    gradient by :meth:`~spherelab.models.base.Model.objective` on each minibatch."""

    def __init__(self, model: Any, X: np.ndarray, y: np.ndarray, lr: float) -> None:
        self.model, self.X, self.y = model, X, y
        self.opt = Adam(model.parameter_vector(), lr)

    def step(self, idx: np.ndarray) -> float:
        """One Adam step on the rows ``idx``; returns the ELBO estimate before it."""
        value, grad = minibatch_gradient(self.model, self.opt.x, self.X[idx], self.y[idx], self.X.shape[0])
        self.opt.step(grad)
        return value

    def finish(self) -> None:
        """Write the last step's parameters into the model."""
        self.model.set_parameter_vector(self.opt.x)


class ResidentSteps:
    """:meth:`~spherelab.OrthogonalSVGP.fit_svi`'s steps with the rows, q and q's Adam state on the
    model's device, one copy back per step (the module's docstring gives the step).

    Parameters
    ----------
    model
        An :class:`~spherelab.OrthogonalSVGP`, initialised.
    path
        Its statistics path (:class:`~.decoupled.StatisticsPath`), which :meth:`applies` to:
        what the rows floor reads of the model.
    X, y
        The training rows ``(N, D)``, ``(N,)`` (validated); copied to the device once, here.
    lr
        Adam's step size.
    """

    def __init__(self, model, path, X: np.ndarray, y: np.ndarray, lr: float) -> None:
        self.model, self.path, self.ops, self.xp = model, path, model.ops, model.ops.array_namespace()
        self.X, self.y, self.num_data = X, y, X.shape[0]
        self.rows = ResidentRows(path, X, y).rows
        self.M, self.K = model.features.num_features, model.num_orthogonal
        self.names = [name for name in model.param_names if name not in Q_NAMES]
        q = np.concatenate([model.m_u, model.m_v, np.tril(model.L_u).ravel(), np.tril(model.L_v).ravel()])
        self.q = Adam(self.ops.to_device(q), lr, xp=self.xp)
        self.rest = Adam(model.parameter_vector(self.names), lr)
        model.set_trial_point(self.rest.x, self.names)  # the values the vector stands for, as the host's step sets them
        #: K_pp and its chain on the device: one block of the kernel's own columns at [Z; W] (inducing points)
        self.inducing_on_device = own_inducing_block(path.column_blocks())

    @staticmethod
    def applies(path) -> bool:
        """Whether the minibatch steps of ``path``'s model run on its device: its rows can
        (:meth:`ResidentRows.applies`) and the bound is the whitened Gaussian one of the statistics."""
        model = path.model
        return (ResidentRows.applies(path) and model.whiten and model.sufficient_statistics
                and isinstance(model.likelihood, Gaussian))

    def step(self, idx: np.ndarray) -> float:
        """One Adam step on the rows ``idx``; returns the ELBO estimate before it."""
        model, M = self.model, self.M
        rows = self.rows.batch(idx)
        try:
            res = resident_bound(self.path, rows, M, self.num_data, q=split_flat(self.q.x, M, self.K),
                                 inducing=self.path.joint_inducing_block, q_back=False)
        except NumericalFailure as err:  # as the host's step refuses it
            raise NumericalFailure("a minibatch step left the usable range (Cholesky failed); lower lr") from err
        if res is None:  # the device's factor failed or a result is not finite
            return self._on_host(idx)
        self.q.step(res.gq)  # launched after the copy back: it runs while the host chains the rest
        grads = DecoupledGradients(model)
        if res.dKpp is not None:
            grads.inducing(res.dKpp[:M, :M], res.dKpp[M:, M:], 2.0 * res.dKpp[M:, :M])
        grads.add_sums(chain_sums(self.path, res.blocks, res.sums, res.dkff, self.X.shape[1]))
        g = grads.result(None, None, None, None, res.dnoise)
        self._advance(model._chain(g, self.rest.x, model._entries(self.names)))
        return res.value

    def _advance(self, grad: np.ndarray) -> None:
        """Adam on the host's entries, written into the model (a refused value ends the fit as the
        host's step would)."""
        self.rest.step(grad)
        try:
            self.model.set_trial_point(self.rest.x, self.names)
        except NumericalFailure as err:
            raise NumericalFailure("a minibatch step left the usable range (Cholesky failed); lower lr") from err

    def _on_host(self, idx: np.ndarray) -> float:
        """The step through the host's objective (its jitter and its errors), q copied back for it."""
        model = self.model
        m_u, m_v, L_u, L_v = (np.asarray(a) for a in split_flat(self.ops.to_host(self.q.x), self.M, self.K))
        tri_u, tri_v = np.tril_indices(self.M), np.tril_indices(self.K)
        theta = np.concatenate([m_u, m_v, L_u[tri_u], L_v[tri_v], self.rest.x])
        value, grad = minibatch_gradient(model, theta, self.X[idx], self.y[idx], self.num_data,
                                         list(Q_NAMES) + self.names)
        M, K, n_u = self.M, self.K, tri_u[0].size
        dL_u, dL_v = np.zeros((M, M)), np.zeros((K, K))
        dL_u[tri_u] = grad[M + K:M + K + n_u]
        dL_v[tri_v] = grad[M + K + n_u:M + K + n_u + tri_v[0].size]
        q_size = M + K + n_u + tri_v[0].size
        self.q.step(self.ops.to_device(np.concatenate([grad[:M + K], dL_u.ravel(), dL_v.ravel()])))
        self._advance(grad[q_size:])
        return value

    def finish(self) -> None:
        """Write q (one copy back) and the other parameters into the model."""
        m_u, m_v, L_u, L_v = split_flat(self.ops.to_host(self.q.x), self.M, self.K)
        self.model.set_params(q_mu=m_u, q_mu_orth=m_v, q_sqrt=np.tril(L_u), q_sqrt_orth=np.tril(L_v))
        self.model.set_parameter_vector(self.rest.x, self.names)

