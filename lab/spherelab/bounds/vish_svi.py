r"""The uncollapsed (SVGP) bounds of VISH's minibatch fit (Hensman, Fusi & Lawrence 2013, with
VISH's diagonal :math:`K_{uu} = \Lambda^{-1}`; Dutordoir, Durrande & Hensman 2020): value and
derivatives with respect to q, the spectrum, :math:`\kappa(1)`, the noise and, when asked, the
features' values (GPy's contract)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..linalg import NumericalFailure
from .statistics import check_variance_rounding

__all__ = ["UncollapsedBound", "uncollapsed_bound", "uncollapsed_bound_whitened", "uncollapsed_bound_general",
           "whiten"]


@dataclass
class UncollapsedBound:
    """Value and derivatives of the uncollapsed (SVGP) ELBO for one minibatch.

    ``dm`` (M,), ``dL`` (M, M) lower-triangular, ``dlam`` (M,), ``dv``, ``dnoise``; ``dPhi``
    (B, M) and ``dr2`` (B,) (with respect to the rows' :math:`r_n^2`) when asked for
    (``phi_gradient=True``: the lift and trainable features chain them); ``dlikelihood``: the
    derivatives with respect to a likelihood's own parameters (:func:`uncollapsed_bound_general`)."""

    value: float
    dm: np.ndarray
    dL: np.ndarray
    dlam: np.ndarray
    dv: float
    dnoise: float
    dPhi: np.ndarray | None = None
    dr2: np.ndarray | None = None
    dlikelihood: dict = field(default_factory=dict)


def _log_det_factor(L: np.ndarray) -> tuple[np.ndarray, float]:
    r"""The diagonal of ``L`` and :math:`\log|\det L|` (any signs: :math:`S = LL^\top` either way)."""
    diagL = np.diag(L)
    if np.any(diagL == 0):
        raise NumericalFailure("q(u)'s factor L has a zero on its diagonal (S is singular): lower the step size")
    return diagL, float(np.sum(np.log(np.abs(diagL))))


def _prior(r2, v):
    r"""Each row's prior variance at its radii: :math:`r_n^2 v`, or for an additive kernel
    :math:`\sum_c r_{c,n}^2 v_c` (``r2`` ``(B, C)``, ``v`` ``(C,)``)."""
    return r2 @ v if np.ndim(r2) == 2 else r2 * v


def _per_row(d, v, shape):
    r""":math:`\partial L/\partial r^2` of every row from the rows' :math:`\partial L/\partial(r^2 v)` ``d``."""
    return np.multiply.outer(d, v) if len(shape) == 2 else np.broadcast_to(d * v, shape).copy()


def _total(x):
    return float(x) if np.ndim(x) == 0 else x


def _q_terms(lam, m, L, Phi, r2, v, residual):
    """What both bounds compute of q(u) = N(m, LL^T) on the rows: L (lower part), its diagonal,
    Phi Lambda, the means mu, Q = Phi Lambda L, the variances (the residual prior term included when
    ``residual``; not clamped), diag S, the KL term and the variances' terms (their rounding is checked)."""
    M = Phi.shape[1]
    L = np.tril(L)
    diagL, logdet = _log_det_factor(L)
    PL = Phi * lam  # Phi Lambda
    Q = PL @ L
    on = 1.0 if residual else 0.0
    terms = (on * _prior(r2, v), -on * np.einsum("nm,nm->n", PL, Phi), np.einsum("nk,nk->n", Q, Q))
    var = terms[0] + terms[1] + terms[2]
    S_diag = np.einsum("ij,ij->i", L, L)
    kl = 0.5 * (float(lam @ S_diag) + float(m @ (lam * m)) - M - 2 * logdet - np.sum(np.log(lam)))
    return L, diagL, PL, PL @ m, Q, var, S_diag, kl, on, terms


def uncollapsed_bound(
    lam: np.ndarray,
    v: float,
    noise: float,
    m: np.ndarray,
    L: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
    phi_gradient: bool = False,
) -> UncollapsedBound:
    r"""SVGP ELBO with :math:`q(u) = N(m, LL^\top)`, :math:`K_{uu} = \Lambda^{-1}`, Gaussian noise,
    on a minibatch (``Phi`` ``(B, M)``, ``y``, ``r2`` = :math:`r_n^2`), the data term scaled by
    ``num_data / B`` (an unbiased estimate of the full-data term):

    .. math:: \mathcal L = \tfrac NB \sum_{n \in \text{batch}} \Big[-\tfrac12\log 2\pi\sigma^2
              - \frac{(y_n - \mu_n)^2 + \nu_n}{2\sigma^2}\Big]
              - \tfrac12\big[\mathrm{tr}(\Lambda S) + m^\top\Lambda m - M - \log|S|
              - \log|\Lambda|\big],

    :math:`\mu = \Phi\Lambda m`, :math:`\nu_n = r_n^2 v - \Phi_n\Lambda\Phi_n^\top +
    \|\Phi_n\Lambda L\|^2` (Dutordoir et al. 2020 eq. 1, ``docs/design.md`` §5); ``residual=False``
    drops :math:`r_n^2 v - \Phi_n\Lambda\Phi_n^\top` (the finite-rank prior of the features,
    :func:`collapsed_bound`).
    """
    lam = np.asarray(lam, dtype=np.float64)
    B = Phi.shape[0]
    scale = num_data / B
    L, diagL, PL, mu, Q, nu, S_diag, kl, on, terms = _q_terms(lam, m, L, Phi, r2, v, residual)
    resid = y - mu
    data = -0.5 * B * np.log(2 * np.pi * noise) - 0.5 * float(resid @ resid + nu.sum()) / noise
    value = scale * data - kl
    check_variance_rounding(value, np.full(B, 0.5 * scale / noise), terms, num_data)

    dmu = resid / noise  # dE/dmu
    dnu = -0.5 / noise  # dE/dnu (same for every n)
    dm = scale * (lam * (Phi.T @ dmu)) - lam * m
    dL = np.tril(scale * dnu * 2.0 * (PL.T @ Q) - lam[:, None] * L + np.diag(1.0 / diagL))
    QLt = Q @ L.T
    dlam = scale * (
        m * (Phi.T @ dmu) + dnu * (-on * np.einsum("nm,nm->m", Phi, Phi) + 2.0 * np.einsum("nm,nm->m", Phi, QLt))
    ) - 0.5 * (S_diag + m * m - 1.0 / lam)
    dv = _total(on * scale * dnu * r2.sum(axis=0))
    dnoise = scale * (-0.5 * B / noise + 0.5 * float(resid @ resid + nu.sum()) / noise**2)
    dPhi = dr2 = None
    if phi_gradient:  # mu = Phi Lambda m, nu = on (r2 v - Phi Lambda Phi^T) + |Phi Lambda L|^2
        dPhi = scale * (np.outer(dmu, lam * m) + dnu * 2.0 * (QLt - on * Phi) * lam)
        dr2 = _per_row(np.full(B, on * scale * dnu), v, r2.shape)
    return UncollapsedBound(float(value), dm, dL, dlam, dv, float(dnoise), dPhi, dr2)


def uncollapsed_bound_whitened(
    lam: np.ndarray,
    v: float,
    noise: float,
    m_w: np.ndarray,
    L_w: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
) -> UncollapsedBound:
    r""":func:`uncollapsed_bound` in whitened coordinates: the prior of u is
    :math:`N(0, K_{uu}) = N(0, \Lambda^{-1})`, so :math:`u = \Lambda^{-1/2}w`,
    :math:`m = \Lambda^{-1/2} m_w`, :math:`L = \Lambda^{-1/2} L_w`, and the prior is
    :math:`m_w = 0`, :math:`L_w = I` (the KL term vanishes there). Every variational parameter is
    O(1) whatever the spectrum's decay. ``dm``/``dL`` are with respect to :math:`m_w, L_w`;
    ``dlam`` includes the dependence of :math:`m, L` on :math:`\lambda`
    (:math:`\partial m/\partial\lambda = -m/2\lambda`)."""
    lam = np.asarray(lam, dtype=np.float64)
    s = 1.0 / np.sqrt(lam)
    m = s * m_w
    L = s[:, None] * np.tril(L_w)
    return whiten(uncollapsed_bound(lam, v, noise, m, L, Phi, y, r2, num_data, residual), lam, m, L)


def whiten(res: UncollapsedBound, lam: np.ndarray, m: np.ndarray, L: np.ndarray) -> UncollapsedBound:
    r"""A bound's derivatives at :math:`q(u) = N(m, LL^\top)` in whitened coordinates
    :math:`m_w = \Lambda^{1/2}m`, :math:`L_w = \Lambda^{1/2}L` (the prior :math:`N(0, \Lambda^{-1})`
    becomes :math:`N(0, I)`): :math:`\partial/\partial m_w = \Lambda^{-1/2}\partial/\partial m`, and
    ``dlam`` gains the dependence of :math:`m, L` on :math:`\lambda` at fixed :math:`m_w, L_w`
    (:math:`\partial m/\partial\lambda = -m/2\lambda`)."""
    s = 1.0 / np.sqrt(lam)
    dlam = res.dlam - (res.dm * m + np.sum(res.dL * np.tril(L), axis=1)) / (2.0 * lam)
    return UncollapsedBound(res.value, s * res.dm, np.tril(s[:, None] * res.dL), dlam, res.dv, res.dnoise, res.dPhi,
                            res.dr2, res.dlikelihood)


def uncollapsed_bound_general(
    lam: np.ndarray,
    v: float,
    likelihood,
    m: np.ndarray,
    L: np.ndarray,
    Phi: np.ndarray,
    y: np.ndarray,
    r2: np.ndarray,
    num_data: int,
    residual: bool = True,
    phi_gradient: bool = False,
) -> UncollapsedBound:
    """:func:`uncollapsed_bound` for any likelihood with ``variational_expectations`` (the data
    term from its per-point expectations and their ``mu``/``var`` derivatives). ``dnoise`` is 0;
    the likelihood's own parameters' derivatives are in ``dlikelihood``."""
    lam = np.asarray(lam, dtype=np.float64)
    B = Phi.shape[0]
    scale = num_data / B
    L, diagL, PL, mu, Q, var, S_diag, kl, on, terms = _q_terms(lam, m, L, Phi, r2, v, residual)
    e, dmu, dvar = likelihood.variational_expectations(y, mu, np.maximum(var, 1e-300))
    value = scale * float(e.sum()) - kl
    check_variance_rounding(value, scale * dvar, terms, num_data)
    dm = scale * (lam * (Phi.T @ dmu)) - lam * m
    dL = np.tril(scale * 2.0 * (PL.T @ (dvar[:, None] * Q)) - lam[:, None] * L + np.diag(1.0 / diagL))
    QLt = Q @ L.T
    dlam = scale * (
        m * (Phi.T @ dmu)
        + (dvar[:, None] * (-on * Phi * Phi + 2.0 * Phi * QLt)).sum(axis=0)
    ) - 0.5 * (S_diag + m * m - 1.0 / lam)
    dv = _total(on * scale * (dvar @ r2))
    dPhi = dr2 = None
    if phi_gradient:
        dPhi = scale * (np.outer(dmu, lam * m) + dvar[:, None] * 2.0 * (QLt - on * Phi) * lam)
        dr2 = _per_row(on * scale * dvar, v, r2.shape)
    dlik = {k: scale * g for k, g in likelihood.parameter_gradients(y, mu, np.maximum(var, 1e-300)).items()}
    return UncollapsedBound(float(value), dm, dL, dlam, dv, 0.0, dPhi, dr2, dlik)
