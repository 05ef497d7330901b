r"""The minibatch fits of :class:`~spherelab.VISH` (Hensman, Fusi & Lawrence 2013), with the
uncollapsed bounds of :mod:`spherelab.bounds.vish_svi`.

* Gaussian likelihood: q(u) = N(m, S) by natural-gradient steps of size :math:`\gamma` in the
  natural parameters, :math:`S^{-1} \leftarrow (1-\gamma)S^{-1} + \gamma(\Lambda +
  \tfrac NB \Lambda\Phi_b^\top\Phi_b\Lambda/\sigma^2)`, :math:`S^{-1}m \leftarrow
  (1-\gamma)S^{-1}m + \gamma\tfrac NB\Lambda\Phi_b^\top y_b/\sigma^2`; the spectrum and noise by
  Adam on the bound's gradients.
* Other likelihoods: Adam on a whitened q and the spectrum: the prior of u is
  :math:`N(0, \Lambda^{-1})`, so :math:`m = \Lambda^{-1/2}m_w`, :math:`L = \Lambda^{-1/2}L_w` and
  q starts at the prior (:math:`m_w = 0`, :math:`L_w = I`; the initial KL is 0).

Trainable phase directions follow Adam on the same minibatch's :math:`\partial L/\partial K_{uf}`.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve
from scipy.special import expit

from ..bounds.vish_svi import uncollapsed_bound, uncollapsed_bound_general
from ..likelihoods import Gaussian
from ..linalg import cholesky_or_explain
from ..optim import Adam, natural_step
from .registry import softplus, softplus_inverse

__all__ = ["natural_gradient_fit", "whitened_adam_fit", "uncollapsed_elbo"]


class _Directions:
    """Adam on the directions of trainable features from a minibatch's :math:`\\partial L/\\partial\\Phi`."""

    def __init__(self, model, lr: float) -> None:
        self.features, self.kernel = model.features, model.kernel
        self.opt = Adam(self.features.get_params(), lr=lr)

    def step(self, ev, dPhi: np.ndarray) -> None:
        self.features.set_params(self.opt.step(self.features.param_vjp(dPhi.T, ev)))


def _batch(model, X, rng, B):
    idx = rng.choice(X.shape[0], size=min(B, X.shape[0]), replace=False)
    ev = model.features.evaluate(model.kernel, X[idx])
    return idx, ev, model.features.Kuf_from(ev).T


def _spectral_gradient(model, names, dlam, dv):
    L = model.max_degree
    per_level = np.bincount(model.features.degrees, weights=dlam, minlength=L + 1)
    g = model.kernel.spectrum_vjp(model.features.dim, L, per_level, dv)
    return np.array([g[p] for p in names])


def natural_gradient_fit(model, X, y, B, iterations, lr, gamma, seed, train_directions) -> None:
    """Gaussian likelihood: natural gradients for q(u), Adam for the spectrum and noise."""
    rng = np.random.default_rng(seed)
    kern, lik, n = model.kernel, model.likelihood, X.shape[0]
    dirs = _Directions(model, lr) if (train_directions and model.features.trainable) else None
    names = list(kern.spectral_parameter_names)
    lam = model.features.Kuu_inverse_diag(kern)
    precision, theta1 = np.diag(lam), np.zeros(lam.size)  # start at the prior: K_uu^-1 = Lambda
    opt = Adam(softplus_inverse([*(getattr(kern, p) for p in names), lik.variance]), lr=lr)
    for _ in range(iterations):
        idx, ev, Phi = _batch(model, X, rng, B)
        lam = model.features.Kuu_inverse_diag(kern)
        noise, scale = lik.variance, n / idx.size
        PL = Phi * lam
        theta1, precision = natural_step(theta1, precision, scale * PL.T @ y[idx] / noise,
                                         np.diag(lam) + scale * PL.T @ PL / noise, gamma)
        m, Ls = _moments(precision, theta1)
        res = uncollapsed_bound(lam, kern.at_one(), noise, m, Ls, Phi, y[idx], ev.r * ev.r, n, model._residual,
                                phi_gradient=dirs is not None)
        if dirs is not None:
            dirs.step(ev, res.dPhi)
        g = np.append(_spectral_gradient(model, names, res.dlam, res.dv), res.dnoise)
        values = softplus(opt.step(g * expit(opt.x)))
        for p, v in zip(names, values[:-1]):
            setattr(kern, p, float(v))
        lik.variance = float(values[-1])
    model.q_mu, model.q_sqrt = _moments(precision, theta1)


def _moments(precision, theta1):
    """Mean and Cholesky factor of S from the natural parameters (S = P^-1 = Lp^-T Lp^-1)."""
    Lp = cholesky_or_explain(precision, "S^-1 (q(u) precision)", "lower gamma or lr")
    Linv = np.linalg.inv(Lp)
    return cho_solve((Lp, True), theta1), np.linalg.cholesky(Linv.T @ Linv)


def whitened_adam_fit(model, X, y, B, iterations, lr, seed, train_directions) -> None:
    """Non-conjugate likelihoods: Adam on the whitened q(u) and the kernel's spectrum."""
    rng = np.random.default_rng(seed)
    kern, n = model.kernel, X.shape[0]
    dirs = _Directions(model, lr) if (train_directions and model.features.trainable) else None
    M = model.features.num_features
    tril = np.tril_indices(M)
    diag_pos = np.flatnonzero(tril[0] == tril[1])
    names = list(kern.spectral_parameter_names)
    h = len(names)
    lw0 = np.eye(M)[tril]
    lw0[diag_pos] = softplus_inverse(lw0[diag_pos])
    opt = Adam(np.concatenate([softplus_inverse([getattr(kern, p) for p in names]), np.zeros(M), lw0]), lr=lr)

    def unpack(u):
        for name, val in zip(names, softplus(u[:h])):
            setattr(kern, name, float(val))
        lvec = u[h + M:].copy()
        lvec[diag_pos] = softplus(lvec[diag_pos])
        Lw = np.zeros((M, M))
        Lw[tril] = lvec
        lam = model.features.Kuu_inverse_diag(kern)
        sq = 1.0 / np.sqrt(lam)  # u = Lambda^-1/2 w: the whitened prior N(0, I) is the prior
        return sq * u[h:h + M], sq[:, None] * Lw, lam, sq

    for _ in range(iterations):
        u = opt.x
        m, L, lam, sq = unpack(u)
        idx, ev, Phi = _batch(model, X, rng, B)
        res = uncollapsed_bound_general(lam, kern.at_one(), model.likelihood, m, L, Phi, y[idx], ev.r * ev.r, n,
                                        model._residual, phi_gradient=dirs is not None)
        dlam = res.dlam - (res.dm * m + np.sum(res.dL * L, axis=1)) / (2.0 * lam)
        g_h = _spectral_gradient(model, names, dlam, res.dv) * expit(u[:h])
        g_l = (sq[:, None] * res.dL)[tril]
        g_l[diag_pos] *= expit(u[h + M:][diag_pos])
        opt.step(np.concatenate([g_h, sq * res.dm, g_l]))
        if dirs is not None:
            dirs.step(ev, res.dPhi)
    model.q_mu, model.q_sqrt, _, _ = unpack(opt.x)


def uncollapsed_elbo(model, X, y) -> float:
    """The uncollapsed bound of the model's current q(u) on all of (X, y) (validated arrays)."""
    ev = model.features.evaluate(model.kernel, X)
    Phi, r2 = model.features.Kuf_from(ev).T, ev.r * ev.r
    lam, v = model.features.Kuu_inverse_diag(model.kernel), model.kernel.at_one()
    if isinstance(model.likelihood, Gaussian):
        return uncollapsed_bound(lam, v, model.likelihood.variance, model.q_mu, model.q_sqrt, Phi, y, r2, len(y),
                                 model._residual).value
    return uncollapsed_bound_general(lam, v, model.likelihood, model.q_mu, model.q_sqrt, Phi, y, r2, len(y),
                                     model._residual).value
