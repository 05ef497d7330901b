r"""The decoupled models' minibatch step resident on a device (:meth:`~spherelab.OrthogonalSVGP.fit_svi`).

On a device other than the CPU, for a Gaussian likelihood with whitened q and the sufficient
statistics (:class:`ResidentSteps.applies`), a fit copies the training rows there once
(:class:`~spherelab.models.decoupled_resident.ResidentRows`) and keeps q and q's Adam moments there
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
Adam on the whole vector (the same numbers as :class:`~spherelab.models.sparse.AdamSteps`, to
rounding). Where the device's factor fails or a result is not finite, that step is taken on the
host instead (its jitter, its errors), from a second copy of q.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from ..bounds.statistics import check_trace_term
from ..bounds.whitened_stats import whitened_stats_terms
from ..features.device_columns import KernelColumns
from ..likelihoods import Gaussian
from ..linalg import NumericalFailure
from ..optim import Adam
from .decoupled_gradients import DecoupledGradients
from .decoupled_resident import ResidentRows, copy_back
from .sparse import minibatch_gradient

if TYPE_CHECKING:
    from .decoupled import OrthogonalSVGP

__all__ = ["ResidentSteps", "Q_NAMES"]

#: q's registry entries, in the order of the device's flat vector [m_u, m_v, L_u, L_v]
Q_NAMES = ("q_mu", "q_mu_orth", "q_sqrt", "q_sqrt_orth")


class ResidentSteps:
    """:meth:`~spherelab.OrthogonalSVGP.fit_svi`'s steps with the rows, q and q's Adam state on the
    model's device, one copy back per step (the module's docstring gives the step).

    Parameters
    ----------
    model
        An :class:`~spherelab.OrthogonalSVGP` that :meth:`applies` to, initialised.
    X, y
        The training rows ``(N, D)``, ``(N,)`` (validated); copied to the device once, here.
    lr
        Adam's step size.
    """

    def __init__(self, model: "OrthogonalSVGP", X: np.ndarray, y: np.ndarray, lr: float) -> None:
        self.model, self.ops, self.xp = model, model.ops, model.ops.array_namespace()
        self.X, self.y, self.num_data = X, y, X.shape[0]
        self.rows = ResidentRows(model, X, y)
        self.M, self.K = model.features.num_features, model.num_orthogonal
        self.names = [name for name in model.param_names if name not in Q_NAMES]
        q = np.concatenate([model.m_u, model.m_v, np.tril(model.L_u).ravel(), np.tril(model.L_v).ravel()])
        self.q = Adam(self.ops.to_device(q), lr, xp=self.xp)
        self.rest = Adam(model.parameter_vector(self.names), lr)
        model.set_trial_point(self.rest.x, self.names)  # the values the vector stands for, as the host's step sets them
        self.solve = functools.partial(_solve, self.ops)
        blocks = model.column_blocks()
        #: K_pp and its chain on the device: one block of the kernel's own columns at [Z; W] (inducing points)
        self.inducing_on_device = len(blocks) == 1 and isinstance(blocks[0], KernelColumns)

    @staticmethod
    def applies(model: "OrthogonalSVGP") -> bool:
        """Whether ``model``'s minibatch steps run on its device: its rows can
        (:meth:`ResidentRows.applies`) and the bound is the whitened Gaussian one of the statistics."""
        return (ResidentRows.applies(model) and model.whiten and model.sufficient_statistics
                and isinstance(model.likelihood, Gaussian))

    def _q(self):
        """Views of the device's q: m_u ``(M,)``, m_v ``(K,)``, L_u ``(M, M)``, L_v ``(K, K)``."""
        return _split_q(self.q.x, self.M, self.K)

    def step(self, idx: np.ndarray) -> float:
        """One Adam step on the rows ``idx``; returns the ELBO estimate before it."""
        model, ops, xp, M = self.model, self.ops, self.xp, self.M
        rows = self.rows.batch(model, idx)
        blocks = model.column_blocks()
        own = self.inducing_on_device
        if own:  # K_pp = k(S, S) at the block's own sources S = [Z; W], on the device
            T_pp, K_pp = blocks[0].columns(ops, blocks[0].r, blocks[0].U)
            Kpp = _with_jitter(xp, K_pp, M, model.jitter)
        else:
            Kuu, Kvv, Kvu = model._inducing_matrices()
            Kpp = ops.to_device(np.block([[Kuu, Kvu.T], [Kvu, Kvv]]))
        noise, B = model.likelihood.variance, idx.shape[0]
        # judged by the copy back (a rejected row's r = 0 makes NaN of its gradients, where NumPy's
        # stand-in would also warn): the device's results are read once, below
        with np.errstate(all="ignore"):
            try:
                LJ = xp.linalg.cholesky(Kpp)  # NumPy raises here; cuSOLVER leaves NaN, which the copy back shows
            except np.linalg.LinAlgError:
                return self._on_host(idx)
            G, c, r2, bad = rows.gram(model, LJ, blocks)
            m_u, m_v, L_u, L_v = self._q()
            t = whitened_stats_terms(xp, self.solve, LJ, M, G, c, r2 * model.kernel.at_one(), rows.yy, B,
                                     m_u, L_u, m_v, L_v, noise, self.num_data)
            parts = rows.device_sums(model, 2.0 * self.solve(LJ, t.dPhi, 1), self.solve(LJ, t.dbeta, 1), t.a)
            if own:  # the inducing block's chain joins the rows': both are the kernel's at the same sources
                dX, dS, dvar, dlen = blocks[0].backward(ops, T_pp, _jitter_backward(xp, t.dKpp, M, model.jitter),
                                                        blocks[0].r, blocks[0].U)
                parts = [parts[0] + dvar, parts[1] + dlen, *parts[2:4], parts[4] + dX + dS]
            gq = xp.concatenate([t.dm, t.dL_u.ravel(), t.dL_v.ravel()])
            head = xp.stack([xp.asarray(bad, dtype=xp.float64), t.value, t.trace, r2, t.dnoise,
                             xp.all(xp.isfinite(gq)).astype(xp.float64)])
        head, *sums = copy_back(ops, [head, *parts] if own else [head, t.dKpp, *parts])  # the step's one copy back
        dKpp = None if own else sums.pop(0)
        if head[0]:
            rows.rejected(model)
        if not (head[5] and np.all(np.isfinite(head[1:5])) and all(np.all(np.isfinite(s)) for s in sums)
                and (own or np.all(np.isfinite(dKpp)))):
            return self._on_host(idx)
        value, trace, sum_r2, dnoise = (float(v) for v in head[1:5])
        s = self.num_data / B
        try:
            check_trace_term(value, s * sum_r2 * model.kernel.at_one(), s * trace, noise, self.num_data)
        except NumericalFailure as err:  # as the host's step refuses it
            raise NumericalFailure("a minibatch step left the usable range (Cholesky failed); lower lr") from err
        self.q.step(gq)  # launched after the copy back: it runs while the host chains the rest
        grads = DecoupledGradients(model)
        if not own:
            grads.inducing(dKpp[:M, :M], dKpp[M:, M:], 2.0 * dKpp[M:, :M])
        grads.add_sums(rows.finish_sums(model, sums, t.a))
        g = grads.result(None, None, None, None, dnoise)
        self._advance(model._chain(g, self.rest.x, model._entries(self.names)))
        return value

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
        m_u, m_v, L_u, L_v = (np.asarray(a) for a in _split_q(self.ops.to_host(self.q.x), self.M, self.K))
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
        m_u, m_v, L_u, L_v = _split_q(self.ops.to_host(self.q.x), self.M, self.K)
        self.model.set_params(q_mu=m_u, q_mu_orth=m_v, q_sqrt=np.tril(L_u), q_sqrt_orth=np.tril(L_v))
        self.model.set_parameter_vector(self.rest.x, self.names)


def _split_q(x: np.ndarray, M: int, K: int) -> tuple:
    P = M + K
    return x[:M], x[M:P], x[P:P + M * M].reshape(M, M), x[P + M * M:].reshape(K, K)


def _solve(ops, L, B, trans):
    return ops.device_solve(L, B, trans=trans)


def _with_jitter(xp, K, M: int, jitter: float):
    """The host's jitter (:func:`~spherelab.linalg.add_jitter`) on each diagonal block of
    :math:`K_{pp}`: ``[:M, :M]`` and ``[M:, M:]``."""
    if jitter == 0.0:
        return K
    d = xp.diag(K)
    add = [xp.full(M, jitter) * xp.mean(d[:M])]
    if K.shape[0] > M:
        add.append(xp.full(K.shape[0] - M, jitter) * xp.mean(d[M:]))
    return K + xp.diag(xp.concatenate(add))


def _jitter_backward(xp, G, M: int, jitter: float):
    """Reverse mode of :func:`_with_jitter` (:func:`~spherelab.linalg.jitter_backward` per block)."""
    if jitter == 0.0:
        return G
    d, n = xp.diag(G), G.shape[0]
    add = [xp.ones(M) * (jitter * xp.sum(d[:M]) / M)]
    if n > M:
        add.append(xp.ones(n - M) * (jitter * xp.sum(d[M:]) / (n - M)))
    return G + xp.diag(xp.concatenate(add))
