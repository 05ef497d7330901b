r"""The orthogonally-decoupled variational posterior with inter-domain features (seed 003 §3.3-3.4;
Shi, Titsias & Mnih 2020, "SOLVE-GP"), and its ELBO with hand-written gradients.

Two sets of inducing variables: :math:`u` (any feature: activated units, inducing points) and
:math:`v = f(W)` at K orthogonal inputs, of which only the part orthogonal to :math:`u`,
:math:`v' = v - K_{vu}K_{uu}^{-1}u`, is modelled: :math:`p(v') = N(0, S_{vv})`,
:math:`q(u) = N(m_u, C_u)`, :math:`q(v') = N(m_v, C_v)`, with

.. math:: S_{vv} = K_{vv} - K_{vu}K_{uu}^{-1}K_{uv}, \qquad S_{vf} = K_{vf} - K_{vu}K_{uu}^{-1}K_{uf}.

Predictive (seed 003 eqs. 3.11-3.12), :math:`A = K_{uu}^{-1}K_{uf}`, :math:`B = S_{vv}^{-1}S_{vf}`:

.. math:: \mu = A^\top m_u + B^\top m_v, \qquad
          \nu = k_{ff} - \mathrm{diag}(K_{fu}A) + \mathrm{diag}(A^\top C_u A)
                - \mathrm{diag}(S_{fv}B) + \mathrm{diag}(B^\top C_v B).

ELBO :math:`= \tfrac{N}{|B|}\sum_{n\in\text{batch}} E_q[\log p(y_n\mid f_n)]
- \mathrm{KL}[q(u)\,\|\,N(0, K_{uu})] - \mathrm{KL}[q(v')\,\|\,N(0, S_{vv})]`.

:func:`orthogonal_bound` returns the bound and its derivatives with respect to every matrix it
consumes (GPy's contract); :class:`OrthogonalSVGP` chains them into the parameters.
``K = 0`` is the (activated) SVGP; :math:`C_v = S_{vv}` gives ODVGP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from ._validation import check_data, check_finite_array, check_int
from ._blas import resolve_threads
from ._fitting import FitMixin, FlatReader
from .bounds import cholesky_or_explain
from .features import ActivatedFeatures, HarmonicFeatures, InducingPoints
from .kernels import ZonalKernel
from .likelihoods import Bernoulli, Gaussian

__all__ = [
    "OrthogonalBound",
    "orthogonal_bound",
    "orthogonal_bound_whitened",
    "gaussian_stats_bound_whitened",
    "StatsBound",
    "cholesky_backward",
    "OrthogonalSVGP",
    "ActivatedSVGP",
]

_HINT_UU = ("Kuu is singular: fewer units than the truncated feature space has dimensions? "
            "Use fewer units, a higher truncation, or spread the unit weights.")
_KEEP_ENTRIES = 1 << 24  # A = L_J^-1 K_pf kept between the two passes up to 128 MB
_CHUNK_ENTRIES = 1 << 21  # rows per chunk: (M + K, rows) blocks of 16 MB
_HINT_VV = ("S_vv = Kvv - Kvu Kuu^-1 Kuv is singular: orthogonal inputs coincide, or the features "
            "already explain f at W. Use fewer orthogonal points or move them apart.")


@dataclass
class OrthogonalBound:
    """Value and derivatives of :func:`orthogonal_bound` (each ``d*`` has the shape of its matrix)."""

    value: float
    mean: np.ndarray
    var: np.ndarray
    dKuu: np.ndarray
    dKuf: np.ndarray
    dkff: np.ndarray
    dm_u: np.ndarray
    dL_u: np.ndarray
    dKvv: np.ndarray
    dKvu: np.ndarray
    dKvf: np.ndarray
    dm_v: np.ndarray
    dL_v: np.ndarray
    dnoise: float = 0.0
    extra: dict = field(default_factory=dict)


def _chol_inverse(L: np.ndarray) -> np.ndarray:
    n = L.shape[0]
    return cho_solve((L, True), np.eye(n))


def orthogonal_bound(
    Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, y, likelihood, num_data: int
) -> OrthogonalBound:
    r"""The orthogonally-decoupled ELBO on a batch and its matrix derivatives.

    Parameters
    ----------
    Kuu ``(M, M)``, Kuf ``(M, B)``, kff ``(B,)``
        Feature covariances and the prior variances at the batch inputs.
    m_u ``(M,)``, L_u ``(M, M)``
        :math:`q(u) = N(m_u, L_uL_u^\top)` (lower triangle of L_u used).
    Kvv ``(K, K)``, Kvu ``(K, M)``, Kvf ``(K, B)``
        Covariances of the orthogonal inducing values (K may be 0).
    m_v ``(K,)``, L_v ``(K, K)``
        :math:`q(v') = N(m_v, L_vL_v^\top)`.
    y ``(B,)``, likelihood, num_data
        Targets, a likelihood with ``variational_expectations``, and N (the data term is scaled
        by N / B).
    """
    M, B = Kuf.shape
    K = Kvv.shape[0]
    scale = num_data / B
    L_u = np.tril(L_u)
    L_v = np.tril(L_v)
    Lk = cholesky_or_explain(Kuu, "Kuu", _HINT_UU)
    Kuu_inv = _chol_inverse(Lk)
    A = cho_solve((Lk, True), Kuf)
    Su = L_u @ L_u.T
    SuA = Su @ A
    mean = A.T @ m_u
    var = kff - np.einsum("mn,mn->n", A, Kuf) + np.einsum("mn,mn->n", A, SuA)
    if K:
        P = cho_solve((Lk, True), Kvu.T)  # Kuu^-1 Kuv (M, K)
        Svv = Kvv - Kvu @ P
        Svv = 0.5 * (Svv + Svv.T)
        Svf = Kvf - Kvu @ A
        Ls = cholesky_or_explain(Svv, "S_vv", _HINT_VV)
        Svv_inv = _chol_inverse(Ls)
        Bm = cho_solve((Ls, True), Svf)
        Cv = L_v @ L_v.T
        CvB = Cv @ Bm
        mean = mean + Bm.T @ m_v
        var = var - np.einsum("kn,kn->n", Bm, Svf) + np.einsum("kn,kn->n", Bm, CvB)
    e, gmu, gvar = likelihood.variational_expectations(y, mean, np.maximum(var, 1e-300))

    def logdet_tri(L):
        return 2.0 * float(np.sum(np.log(np.abs(np.diag(L)))))

    kl_u = 0.5 * (np.sum(Kuu_inv * Su) + m_u @ Kuu_inv @ m_u - M + 2 * np.sum(np.log(np.diag(Lk))) - logdet_tri(L_u))
    value = scale * float(e.sum()) - kl_u
    gmu = scale * gmu
    gvar = scale * gvar

    # ---- backward ----
    dm_u = A @ gmu - Kuu_inv @ m_u
    dSu = (A * gvar) @ A.T - 0.5 * (Kuu_inv - _chol_inverse_tri(L_u))
    dL_u = np.tril(2.0 * dSu @ L_u)
    dA = np.outer(m_u, gmu) - Kuf * gvar + 2.0 * SuA * gvar
    dKuf = -A * gvar
    dkff = gvar.copy()
    dKuu = 0.5 * (Kuu_inv @ (Su + np.outer(m_u, m_u)) @ Kuu_inv - Kuu_inv)
    dKvv = np.zeros((K, K))
    dKvu = np.zeros((K, M))
    dKvf = np.zeros((K, B))
    dm_v = np.zeros(K)
    dL_v = np.zeros((K, K))
    if K:
        kl_v = 0.5 * (np.sum(Svv_inv * Cv) + m_v @ Svv_inv @ m_v - K + 2 * np.sum(np.log(np.diag(Ls))) - logdet_tri(L_v))
        value -= kl_v
        dm_v = Bm @ gmu - Svv_inv @ m_v
        dCv = (Bm * gvar) @ Bm.T - 0.5 * (Svv_inv - _chol_inverse_tri(L_v))
        dL_v = np.tril(2.0 * dCv @ L_v)
        dBm = np.outer(m_v, gmu) - Svf * gvar + 2.0 * CvB * gvar
        dSvf = -Bm * gvar
        tmp = cho_solve((Ls, True), dBm)
        dSvf += tmp
        dSvv = -tmp @ Bm.T
        dSvv += 0.5 * (Svv_inv @ (Cv + np.outer(m_v, m_v)) @ Svv_inv - Svv_inv)
        # Svf = Kvf - Kvu A
        dKvf = dSvf
        dKvu = -dSvf @ A.T
        dA -= Kvu.T @ dSvf
        # Svv = Kvv - Kvu Kuu^-1 Kvu^T
        dKvv = dSvv
        dKvu -= (dSvv + dSvv.T) @ P.T
        dKuu += P @ dSvv @ P.T
    # A = Kuu^-1 Kuf
    KdA = cho_solve((Lk, True), dA)
    dKuf += KdA
    dKuu -= KdA @ A.T
    dnoise = gaussian_noise_gradient(likelihood, y, mean, var, scale)
    return OrthogonalBound(float(value), mean, var, dKuu, dKuf, dkff, dm_u, dL_u, dKvv, dKvu, dKvf, dm_v, dL_v, dnoise)


def cholesky_backward(L: np.ndarray, dL: np.ndarray) -> np.ndarray:
    r"""Reverse mode of :math:`\Sigma = LL^\top`: given :math:`\bar L` (lower triangle used),
    the symmetric :math:`\bar\Sigma = \tfrac12(G + G^\top)`,
    :math:`G = L^{-\top}\Phi(L^\top\bar L)L^{-1}` with :math:`\Phi` the lower triangle with
    halved diagonal (Murray 2016, "Differentiation of the Cholesky decomposition")."""
    if L.shape[0] == 0:
        return np.zeros((0, 0))
    P = np.tril(L.T @ np.tril(dL))
    P[np.diag_indices_from(P)] *= 0.5
    G = solve_triangular(L, solve_triangular(L, P, lower=True, trans=1).T, lower=True, trans=1).T
    return 0.5 * (G + G.T)


def kl_whitened(m: np.ndarray, L: np.ndarray) -> float:
    r""":math:`\mathrm{KL}[N(m, LL^\top)\,\|\,N(0, I)]` (lower triangle of L used)."""
    d = np.diag(L)
    return 0.5 * (float(np.sum(L * L)) + float(m @ m) - m.size - 2.0 * float(np.sum(np.log(np.abs(d)))))


def whitened_forward(Kuu: np.ndarray, Kuf: np.ndarray, L: np.ndarray, name: str = "Kuu", hint: str = _HINT_UU):
    r"""One whitened block :math:`u = L_{uu}\tilde u`, :math:`q(\tilde u) = N(m, LL^\top)`:
    returns ``(Lk, At, LtA)`` with :math:`L_k = \mathrm{chol}(K_{uu})`, :math:`A_t = L_k^{-1}K_{uf}`,
    :math:`L^\top A_t`; the block adds :math:`A_t^\top m` to the mean and
    :math:`-\|A_t\|^2 + \|L^\top A_t\|^2` (column norms) to the variance."""
    Lk = cholesky_or_explain(Kuu, name, hint)
    At = solve_triangular(Lk, Kuf, lower=True)
    return Lk, At, L.T @ At


def whitened_q_backward(m, L, At, LtA, gmu, gvar):
    r"""Reverse mode of one whitened block given :math:`\partial/\partial\mu`, :math:`\partial/\partial\nu`
    (``(B,)`` each) and the KL term: ``(dm, dL, dAt)``."""
    dm = At @ gmu - m
    Ag = At * gvar
    dL = np.tril(2.0 * (Ag @ LtA.T))
    dL += np.tril(-L + _inv_tri_T(L))
    dAt = np.outer(m, gmu) - 2.0 * Ag + 2.0 * (L @ (LtA * gvar))
    return dm, dL, dAt


def whitened_kernel_backward(Lk, At, dAt, dLk=None):
    r"""Chain :math:`\partial/\partial A_t` (:math:`A_t = L_k^{-1}K_{uf}`) into ``(dKuf, dKuu)``;
    ``dLk`` adds other uses of :math:`L_k`."""
    dKuf = solve_triangular(Lk, dAt, lower=True, trans=1)
    dLk = -np.tril(dKuf @ At.T) if dLk is None else dLk - np.tril(dKuf @ At.T)
    return dKuf, cholesky_backward(Lk, dLk)


def gaussian_noise_gradient(likelihood, y, mean, var, scale: float) -> float:
    r""":math:`\partial/\partial\sigma^2` of the scaled Gaussian expected log-likelihood (0 otherwise)."""
    if not isinstance(likelihood, Gaussian):
        return 0.0
    s2 = likelihood.variance
    return scale * float(np.sum(-0.5 / s2 + 0.5 * ((y - mean) ** 2 + var) / s2**2))


def orthogonal_bound_whitened(
    Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, y, likelihood, num_data: int
) -> OrthogonalBound:
    r""":func:`orthogonal_bound` in whitened coordinates: :math:`u = L_{uu}\tilde u`,
    :math:`v' = L_{vv}\tilde v` (:math:`L_{uu}L_{uu}^\top = K_{uu}`,
    :math:`L_{vv}L_{vv}^\top = S_{vv}`), :math:`q(\tilde u) = N(m_u, L_uL_u^\top)`,
    :math:`q(\tilde v) = N(m_v, L_vL_v^\top)`, both priors N(0, I). Same value as the plain
    bound at :math:`m = L_{uu}\tilde m`, :math:`C = L_{uu}\tilde C L_{uu}^\top`, but no
    :math:`K_{uu}^{-1}` or :math:`C^{-1}` appears, so ill-conditioned :math:`K_{uu}` (smooth
    activations, many units) stays usable. Derivatives reach :math:`K_{uu}`, :math:`S_{vv}`
    through :func:`cholesky_backward`."""
    M, B = Kuf.shape
    K = Kvv.shape[0]
    scale = num_data / B
    L_u = np.tril(L_u)
    L_v = np.tril(L_v)
    Lk, At, LtA = whitened_forward(Kuu, Kuf, L_u)
    mean = At.T @ m_u
    var = kff - np.einsum("mn,mn->n", At, At) + np.einsum("mn,mn->n", LtA, LtA)
    if K:
        Pt = solve_triangular(Lk, Kvu.T, lower=True)  # Lk^-1 Kuv (M, K)
        Svv = Kvv - Pt.T @ Pt
        Svf = Kvf - Pt.T @ At
        Ls, Bt, LtB = whitened_forward(0.5 * (Svv + Svv.T), Svf, L_v, "S_vv", _HINT_VV)
        mean = mean + Bt.T @ m_v
        var = var - np.einsum("kn,kn->n", Bt, Bt) + np.einsum("kn,kn->n", LtB, LtB)
    e, gmu, gvar = likelihood.variational_expectations(y, mean, np.maximum(var, 1e-300))
    value = scale * float(e.sum()) - kl_whitened(m_u, L_u)
    gmu = scale * gmu
    gvar = scale * gvar
    dm_u, dL_u, dAt = whitened_q_backward(m_u, L_u, At, LtA, gmu, gvar)
    dkff = gvar.copy()
    dLk = np.zeros((M, M))
    dKvv = np.zeros((K, K))
    dKvu = np.zeros((K, M))
    dKvf = np.zeros((K, B))
    dm_v = np.zeros(K)
    dL_v = np.zeros((K, K))
    if K:
        value -= kl_whitened(m_v, L_v)
        dm_v, dL_v, dBt = whitened_q_backward(m_v, L_v, Bt, LtB, gmu, gvar)
        # Bt = Ls^-1 Svf
        dSvf, dSvv = whitened_kernel_backward(Ls, Bt, dBt)
        # Svf = Kvf - Pt^T At ; Svv = Kvv - Pt^T Pt
        dKvf = dSvf
        dPt = -At @ dSvf.T - Pt @ (dSvv + dSvv.T)
        dAt -= Pt @ dSvf
        dKvv = dSvv
        # Pt = Lk^-1 Kuv
        dKuv = solve_triangular(Lk, dPt, lower=True, trans=1)
        dKvu = dKuv.T
        dLk -= np.tril(dKuv @ Pt.T)
    dKuf, dKuu = whitened_kernel_backward(Lk, At, dAt, dLk)
    dnoise = gaussian_noise_gradient(likelihood, y, mean, var, scale)
    return OrthogonalBound(float(value), mean, var, dKuu, dKuf, dkff, dm_u, dL_u, dKvv, dKvu, dKvf, dm_v, dL_v, dnoise)


@dataclass
class StatsBound:
    """Value and derivatives of :func:`gaussian_stats_bound_whitened` (``dkff`` is the derivative
    with respect to every :math:`k(x_n, x_n)` alike)."""

    value: float
    dKuu: np.ndarray
    dKvv: np.ndarray
    dKvu: np.ndarray
    dPhi: np.ndarray
    dbeta: np.ndarray
    dkff: float
    dm_u: np.ndarray
    dL_u: np.ndarray
    dm_v: np.ndarray
    dL_v: np.ndarray
    dnoise: float


def gaussian_stats_bound_whitened(
    LJ, M: int, Phi, beta, sum_kff: float, yy: float, batch: int, m_u, L_u, m_v, L_v,
    noise_variance: float, num_data: int,
) -> StatsBound:
    r""":func:`orthogonal_bound_whitened` for a Gaussian likelihood, from the batch's whitened
    sufficient statistics alone: with :math:`K_{pf} = [K_{uf}; K_{vf}]` (``(P, B)``, P = M + K)
    and :math:`A = L_J^{-1}K_{pf}`,

    .. math:: \Phi = AA^\top, \quad \beta = Ay, \quad \textstyle\sum_n k(x_n, x_n),
              \quad y^\top y, \quad B,

    accumulated by the caller over row chunks (:func:`joint_cholesky` gives :math:`L_J`; whitening
    each chunk before the product keeps :math:`\Phi` accurate where :math:`L_J^{-1}(K_{pf}K_{fp})
    L_J^{-\top}` would lose a factor :math:`\kappa(K_{pp})` of precision and leave the bound
    too noisy for a line search).

    The whitened decoupled posterior is the whitened SVGP on the joint inducing vector
    :math:`p = [u; v]` with :math:`L_J = \mathrm{chol}\begin{bmatrix}K_{uu} & K_{uv}\\
    K_{vu} & K_{vv}\end{bmatrix} = \begin{bmatrix}L_k & 0\\ P_t^\top & L_s\end{bmatrix}`
    (:math:`L_sL_s^\top = S_{vv}`), mean :math:`m = [m_u; m_v]` and block-diagonal
    :math:`L = \mathrm{diag}(L_u, L_v)`, so

    .. math:: \sum_n (y_n - \mu_n)^2 + \nu_n = y^\top y - 2m^\top\beta + m^\top\Phi m
              + \textstyle\sum_n k_{nn} - \mathrm{tr}\,\Phi + \mathrm{tr}(L^\top\Phi L),

    and ELBO :math:`= \tfrac NB\big[-\tfrac B2\log 2\pi\sigma^2 - (\cdot)/2\sigma^2\big]
    - \mathrm{KL}_u - \mathrm{KL}_v`. Derivatives go to :math:`\Phi`, :math:`\beta` (the caller
    chains :math:`\partial/\partial K_{pf} = L_J^{-\top}(2\bar\Phi A + \bar\beta y^\top)`), to
    :math:`K_{uu}`, :math:`K_{vv}`, :math:`K_{vu}` (the dependence of :math:`\Phi`, :math:`\beta`
    on :math:`L_J` at fixed :math:`K_{pf}` included) through :func:`cholesky_backward` of
    :math:`L_J`, and to q.
    No :math:`(P, B)` product is formed here, so the caller can stream the rows in chunks.
    """
    s = num_data / batch
    s2 = float(noise_variance)
    a = -0.5 * s / s2
    L_u, L_v = np.tril(L_u), np.tril(L_v)
    Phi = 0.5 * (Phi + Phi.T)
    m = np.concatenate([m_u, m_v])
    Phim = Phi @ m
    PLu = Phi[:M, :M] @ L_u
    PLv = Phi[M:, M:] @ L_v
    total = (yy - 2.0 * float(m @ beta) + float(m @ Phim) + sum_kff - float(np.trace(Phi))
             + float(np.sum(L_u * PLu)) + float(np.sum(L_v * PLv)))
    value = -0.5 * s * batch * np.log(2 * np.pi * s2) + a * total - kl_whitened(m_u, L_u) - kl_whitened(m_v, L_v)
    dm = 2.0 * a * (Phim - beta) - m
    dL_u = np.tril(2.0 * a * PLu - L_u + _inv_tri_T(L_u))
    dL_v = np.tril(2.0 * a * PLv - L_v + _inv_tri_T(L_v))
    dbeta = -2.0 * a * m
    G = np.outer(a * m, m)
    G[np.diag_indices_from(G)] -= a
    G[:M, :M] += a * (L_u @ L_u.T)
    G[M:, M:] += a * (L_v @ L_v.T)
    dLJ = -solve_triangular(LJ, 2.0 * G @ Phi + np.outer(dbeta, beta), lower=True, trans=1)
    dKpp = cholesky_backward(LJ, np.tril(dLJ))
    dnoise = s * (-0.5 * batch / s2 + 0.5 * total / s2**2)
    return StatsBound(float(value), dKpp[:M, :M], dKpp[M:, M:], 2.0 * dKpp[M:, :M], G, dbeta, a,
                      dm[:M], dL_u, dm[M:], dL_v, float(dnoise))


def joint_cholesky(Kuu, Kvv, Kvu) -> np.ndarray:
    r""":math:`L_J = \begin{bmatrix}L_k & 0\\ P_t^\top & L_s\end{bmatrix}`, the Cholesky factor
    of the joint covariance of :math:`[u; v]` ``(M + K, M + K)``, from :func:`joint_factors`."""
    Lk, Pt, Ls = joint_factors(Kuu, Kvv, Kvu)
    M, K = Lk.shape[0], Ls.shape[0]
    return np.block([[Lk, np.zeros((M, K))], [Pt.T, Ls]])


def joint_factors(Kuu, Kvv, Kvu) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r""":math:`L_k = \mathrm{chol}(K_{uu})`, :math:`P_t = L_k^{-1}K_{uv}` ``(M, K)`` and
    :math:`L_s = \mathrm{chol}(S_{vv})`, :math:`S_{vv} = K_{vv} - P_t^\top P_t`: the blocks of
    the Cholesky factor of the joint covariance of :math:`[u; v]`. A failed factorisation names
    the matrix (``Kuu`` or ``S_vv``) and what to try."""
    Lk = cholesky_or_explain(Kuu, "Kuu", _HINT_UU)
    if Kvv.shape[0] == 0:
        return Lk, np.zeros((Kuu.shape[0], 0)), np.zeros((0, 0))
    Pt = solve_triangular(Lk, Kvu.T, lower=True)
    Svv = Kvv - Pt.T @ Pt
    return Lk, Pt, cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", _HINT_VV)


def _whiten(LJ: np.ndarray, Kpf: np.ndarray) -> np.ndarray:
    """:math:`L_J^{-1}K_{pf}` by forward substitution (an explicit triangular inverse with
    ``dtrmm`` is 1.3x faster on (256, 8192) blocks but 10x less accurate)."""
    return solve_triangular(LJ, Kpf, lower=True)


def _inv_tri_T(L: np.ndarray) -> np.ndarray:
    """:math:`L^{-\\top}` for lower-triangular L (empty for 0 x 0)."""
    if L.size == 0:
        return np.zeros_like(L)
    return solve_triangular(L, np.eye(L.shape[0]), lower=True).T


def _inverse_factor(Lam: np.ndarray) -> np.ndarray:
    r"""Lower-triangular L with :math:`LL^\top = \Lambda^{-1}` for symmetric positive-definite
    :math:`\Lambda` (empty for 0 x 0): with :math:`\Lambda = CC^\top`, :math:`C^{-1} = QR` gives
    :math:`\Lambda^{-1} = R^\top R`, so :math:`L = R^\top` without forming the inverse."""
    if Lam.shape[0] == 0:
        return np.zeros((0, 0))
    C = np.linalg.cholesky(Lam)
    return np.linalg.qr(solve_triangular(C, np.eye(C.shape[0]), lower=True), mode="r").T


def _chol_inverse_tri(L: np.ndarray) -> np.ndarray:
    """(L L^T)^-1 for a lower-triangular L with any signs on its diagonal."""
    n = L.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    Li = solve_triangular(L, np.eye(n), lower=True)
    return Li.T @ Li


def _whitened_optimum(Phi, beta, noise_variance: float, M: int):
    r"""The maximiser of :func:`gaussian_stats_bound_whitened` over q: with
    :math:`\Lambda = I + \Phi/\sigma^2`, the joint whitened mean
    :math:`\Lambda^{-1}\beta/\sigma^2` ``(M + K,)`` and the factors of
    :math:`\Lambda_{uu}^{-1}`, :math:`\Lambda_{vv}^{-1}`."""
    Lam = np.eye(Phi.shape[0]) + 0.5 * (Phi + Phi.T) / noise_variance
    m = np.linalg.solve(Lam, beta / noise_variance)
    return m, _inverse_factor(Lam[:M, :M]), _inverse_factor(Lam[M:, M:])


class OrthogonalSVGP(FitMixin):
    r"""SVGP with inter-domain features :math:`u` and K orthogonal inducing points
    (the orthogonally-decoupled posterior of seed 003 eqs. 3.11-3.12).

    Parameters
    ----------
    kernel
        A :class:`~spherelab.kernels.ZonalKernel` (its ``bias`` and ``input_scale`` are trained).
    features
        :class:`~spherelab.features.ActivatedFeatures`, :class:`~spherelab.features.InducingPoints`
        or :class:`~spherelab.features.HarmonicFeatures` (spherical harmonics: VISH's features
        with orthogonal points).
    num_orthogonal
        K (0: the plain SVGP / activated SVGP).
    likelihood
        :class:`~spherelab.likelihoods.Gaussian` (default, closed-form expectations) or
        :class:`~spherelab.likelihoods.Bernoulli` (Gauss-Hermite).
    orthogonal_inputs
        ``(K, D)`` initial W; default: K training inputs chosen at random in :meth:`fit`.
    whiten
        Parameterise q in whitened coordinates (:func:`orthogonal_bound_whitened`; default):
        ``m_u``, ``L_u`` describe :math:`\tilde u = L_{uu}^{-1}u` and ``m_v``, ``L_v``
        :math:`\tilde v = L_{vv}^{-1}v'`, both with N(0, I) priors. Needed when :math:`K_{uu}`
        is ill-conditioned (smooth activations: softplus units span few effective dimensions).
    blas_threads
        BLAS threads inside :meth:`fit` and :meth:`fit_adam`: ``"auto"`` (default) uses one thread
        for models with at most 1024 inducing variables, where threads cost more than they give
        (measured 5x per minibatch step on 2 cores, ``spherelab._blas``); an int, or ``None`` for
        BLAS's own setting.
    sufficient_statistics
        Gaussian likelihood, whitened (the defaults): evaluate the ELBO and its gradient from
        :math:`\Phi = AA^\top` and :math:`Ay`, :math:`A = L_J^{-1}K_{pf}`
        (:func:`gaussian_stats_bound_whitened`),
        accumulated over chunks of rows, so memory does not grow with N and each step does three
        O((M + K)^2 N) products instead of about eight; used for batches of at least
        3(M + K) rows. ``False``: always the per-row bound (:func:`orthogonal_bound_whitened`,
        same value); Bernoulli always uses it.

    Trainable: ``m_u``, ``L_u`` (:math:`C_u = L_uL_u^\top`), ``m_v``, ``L_v``, ``W``, the feature
    parameters (unit weights or inducing inputs), the kernel's variance, shape parameters, bias
    and input scale, and the Gaussian noise variance — all with analytic gradients
    (:meth:`elbo_and_gradient`).
    """

    def __init__(self, kernel: ZonalKernel, features, num_orthogonal: int = 0, likelihood=None,
                 orthogonal_inputs: Any = None, whiten: bool = True, jitter: float = 1e-6,
                 blas_threads: Any = "auto", sufficient_statistics: bool = True) -> None:
        if not isinstance(kernel, ZonalKernel):
            raise TypeError(f"kernel must be a spherelab ZonalKernel, got {kernel!r}")
        if not isinstance(features, (ActivatedFeatures, InducingPoints, HarmonicFeatures)):
            raise TypeError(f"features must be ActivatedFeatures, InducingPoints or HarmonicFeatures, got {features!r}")
        self.kernel = kernel
        self.features = features
        self.num_orthogonal = check_int(num_orthogonal, "num_orthogonal", minimum=0)
        self.likelihood = likelihood if likelihood is not None else Gaussian(1.0)
        if not isinstance(self.likelihood, (Gaussian, Bernoulli)):
            raise TypeError(f"likelihood must be Gaussian or Bernoulli, got {self.likelihood!r}")
        self.W = None if orthogonal_inputs is None else check_finite_array(orthogonal_inputs, "orthogonal_inputs", ndim=2).copy()
        if self.W is not None and self.W.shape[0] != self.num_orthogonal:
            raise ValueError(f"orthogonal_inputs must have num_orthogonal = {self.num_orthogonal} rows")
        self.whiten = bool(whiten)
        self.jitter = float(jitter)
        if not (self.jitter >= 0 and np.isfinite(self.jitter)):
            raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
        self.m_u = self.L_u = self.m_v = self.L_v = None
        self.optimizer_result = None
        resolve_threads(blas_threads, 0)  # validate early
        self.blas_threads = blas_threads
        self.sufficient_statistics = bool(sufficient_statistics)

    def _num_inducing(self) -> int:
        return self.features.num_features + self.num_orthogonal

    # ---- set-up ---------------------------------------------------------------------------
    def _check_data(self, X, y):
        X, y = check_data(X, y)
        if isinstance(self.likelihood, Bernoulli):
            self.likelihood.check_targets(y)
        return X, y

    def initialise(self, X: np.ndarray, seed: int = 0) -> "OrthogonalSVGP":
        """Feature parameters, W (K distinct training inputs) and q at the prior
        (:math:`m = 0`, :math:`C_u = K_{uu}`, :math:`C_v = S_{vv}`)."""
        rng = np.random.default_rng(seed)
        self.features.initialise(X.shape[1] + 1, rng)
        if isinstance(self.features, HarmonicFeatures):
            self.features.bind(self.kernel)
        K = self.num_orthogonal
        if self.W is None:
            if K > X.shape[0]:
                raise ValueError(f"num_orthogonal = {K} exceeds the number of training rows {X.shape[0]}")
            self.W = X[rng.choice(X.shape[0], K, replace=False)].copy() if K else np.zeros((0, X.shape[1]))
        elif self.W.shape[1] != X.shape[1]:
            raise ValueError(f"orthogonal_inputs have {self.W.shape[1]} columns but X has {X.shape[1]}")
        M = self.features.num_features
        Kuu = self._with_jitter(self.features.Kuu(self.kernel))
        self.m_u = np.zeros(M)
        self.L_u = cholesky_or_explain(Kuu, "Kuu", _HINT_UU)
        self.m_v = np.zeros(K)
        if self.whiten:  # the prior in whitened coordinates
            self.L_u = np.eye(M)
            self.L_v = np.eye(K)
        elif K:
            Kvu = self.features.Kuf(self.kernel, self.W).T
            Svv = self._with_jitter(self.kernel.K(self.W)) - Kvu @ cho_solve((self.L_u, True), Kvu.T)
            self.L_v = cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", _HINT_VV)
        else:
            self.L_v = np.zeros((0, 0))
        return self

    # ---- matrices -------------------------------------------------------------------------
    def _matrices(self, X):
        Kuu, Kvv, Kvu = self._inducing_matrices()
        Kuf = self.features.Kuf(self.kernel, X)
        Kvf = self.kernel.K(self.W, X) if self.num_orthogonal else np.zeros((0, X.shape[0]))
        return Kuu, Kuf, self.kernel.diag(X), Kvv, Kvu, Kvf

    def bound(self, X, y, num_data: int | None = None) -> OrthogonalBound:
        """:func:`orthogonal_bound` at the current parameters on (X, y)."""
        Kuu, Kuf, kff, Kvv, Kvu, Kvf = self._matrices(X)
        fn = orthogonal_bound_whitened if self.whiten else orthogonal_bound
        return fn(Kuu, Kuf, kff, self.m_u, self.L_u, Kvv, Kvu, Kvf, self.m_v, self.L_v,
                                y, self.likelihood, X.shape[0] if num_data is None else num_data)

    def elbo_and_gradient(self, X, y, num_data: int | None = None) -> tuple[float, dict[str, Any]]:
        """The ELBO (minibatch estimate if ``num_data`` > len(y)) and its gradient with respect to
        every parameter, as a dict. Gaussian likelihood, whitened: from the batch's sufficient
        statistics streamed over row chunks (:func:`gaussian_stats_bound_whitened`)."""
        X = check_finite_array(X, "X", ndim=2)
        if self._use_stats(X.shape[0]):
            return self._elbo_and_gradient_stats(X, y, X.shape[0] if num_data is None else num_data)
        res = self.bound(X, y, num_data)
        grads = _Gradients(self)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        grads.rows(X, res.dKuf, res.dKvf, res.dkff)
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    def _use_stats(self, n: int) -> bool:
        # below ~3 rows per inducing variable the joint (M + K)^3 algebra of the statistics
        # path costs more than the per-row bound saves (measured: equal at n = 2(M + K))
        return (self.whiten and self.sufficient_statistics and isinstance(self.likelihood, Gaussian)
                and n >= 3 * self._num_inducing())

    def _row_chunks(self, X, y):
        step = max(1, _CHUNK_ENTRIES // max(self._num_inducing(), 1))
        for s in range(0, X.shape[0], step):
            yield X[s : s + step], y[s : s + step]

    def _features_at(self, X):
        """:math:`K_{pf} = [K_{uf}; K_{vf}]`, ``(M + K, n)``."""
        Kuf = self.features.Kuf(self.kernel, X)
        return np.vstack([Kuf, self.kernel.K(self.W, X)]) if self.num_orthogonal else Kuf

    def _statistics(self, X, y, LJ, keep: bool = False):
        r""":math:`\Phi = AA^\top`, :math:`\beta = Ay` (:math:`A = L_J^{-1}K_{pf}`) and
        :math:`\sum_n k(x_n, x_n)` over row chunks; with ``keep``, also the list of the chunks'
        A."""
        P = self._num_inducing()
        Phi, beta = np.zeros((P, P)), np.zeros(P)
        sum_kff, cache = 0.0, []
        for Xc, yc in self._row_chunks(X, y):
            Kpf = self._features_at(Xc)
            A = _whiten(LJ, Kpf)
            Phi += A @ A.T
            beta += A @ yc
            sum_kff += float(self.kernel.diag(Xc).sum())
            if keep:
                cache.append(A)
        return Phi, beta, sum_kff, cache

    def optimal_q(self, X: Any, y: Any) -> "OrthogonalSVGP":
        r"""Set q to the maximiser of the ELBO for a Gaussian likelihood at the current kernel,
        noise, features and orthogonal inputs (Titsias' optimum for the decoupled family).

        In whitened coordinates :math:`[u; v] = L_J[\tilde u; \tilde v]` the bound depends on the
        data through :math:`\Phi = AA^\top` and :math:`\beta = Ay`, :math:`A = L_J^{-1}K_{pf}`
        only (:func:`gaussian_stats_bound_whitened`); with :math:`\Lambda = I + \Phi/\sigma^2`
        the optimal means are :math:`\Lambda^{-1}\beta/\sigma^2` (u and v jointly: the data
        couple them) and, q(u) and q(v') being independent, the optimal covariances are the
        inverses of the diagonal blocks :math:`\Lambda_{uu}`, :math:`\Lambda_{vv}`. Without
        whitening they are mapped by :math:`L_k`, :math:`L_s`. One streamed pass over the rows
        (O(N(M + K)^2), memory independent of N). :meth:`fit` starts from this q by default.
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("optimal_q needs a Gaussian likelihood")
        X, y = self._check_data(X, y)
        if not self._initialised():
            self.initialise(X)
        M = self.features.num_features
        LJ = joint_cholesky(*self._inducing_matrices())
        Phi, beta, _, _ = self._statistics(X, y, LJ)
        m, L_u, L_v = _whitened_optimum(Phi, beta, self.likelihood.variance, M)
        Lk, Ls = LJ[:M, :M], LJ[M:, M:]
        if self.whiten:
            self.m_u, self.L_u, self.m_v, self.L_v = m[:M], L_u, m[M:], L_v
        else:
            self.m_u, self.L_u, self.m_v, self.L_v = Lk @ m[:M], Lk @ L_u, Ls @ m[M:], Ls @ L_v
        self._X, self._y = X, y
        return self

    def _elbo_and_gradient_stats(self, X, y, num_data: int, collapsed: bool = False):
        keep = X.shape[0] * self._num_inducing() <= _KEEP_ENTRIES  # else the second pass recomputes A
        M = self.features.num_features
        LJ = joint_cholesky(*self._inducing_matrices())
        Phi, beta, sum_kff, cache = self._statistics(X, y, LJ, keep)
        q = (self.m_u, self.L_u, self.m_v, self.L_v)
        if collapsed:
            m, L_u, L_v = _whitened_optimum(Phi, beta, self.likelihood.variance, M)
            q = (m[:M], L_u, m[M:], L_v)
        res = gaussian_stats_bound_whitened(LJ, M, Phi, beta, sum_kff, float(y @ y), X.shape[0],
                                            *q, self.likelihood.variance, num_data)
        grads = _Gradients(self)
        grads.inducing(res.dKuu, res.dKvv, res.dKvu)
        # dK_pf = L_J^-T (2 dPhi A + dbeta y^T): the P x P solve once, then one product per chunk
        Q = 2.0 * solve_triangular(LJ, res.dPhi, lower=True, trans=1)
        qb = solve_triangular(LJ, res.dbeta, lower=True, trans=1)
        for i, (Xc, yc) in enumerate(self._row_chunks(X, y)):
            A = cache[i] if keep else _whiten(LJ, self._features_at(Xc))
            dKpf = Q @ A + np.outer(qb, yc)
            grads.rows(Xc, dKpf[:M], dKpf[M:], np.full(Xc.shape[0], res.dkff))
        return res.value, grads.result(res.dm_u, res.dL_u, res.dm_v, res.dL_v, res.dnoise)

    def _collapsed_elbo_and_gradient(self, X, y):
        # the whitened optimum in the bound itself: one streamed pass, and the value (hence, by
        # the envelope theorem, the gradient in every other parameter) does not depend on
        # whether the model stores q whitened
        return self._elbo_and_gradient_stats(X, y, X.shape[0], collapsed=True)

    def _q_size(self) -> int:
        M, K = self.m_u.size, self.m_v.size
        return M + M * (M + 1) // 2 + K + K * (K + 1) // 2

    def _inducing_matrices(self):
        Kuu = self._with_jitter(self.features.Kuu(self.kernel))
        if self.num_orthogonal:
            return Kuu, self._with_jitter(self.kernel.K(self.W)), self.features.Kuf(self.kernel, self.W).T
        return Kuu, np.zeros((0, 0)), np.zeros((0, Kuu.shape[0]))

    # ---- parameter vector -----------------------------------------------------------------
    def _pack(self) -> np.ndarray:
        iu = np.tril_indices(self.m_u.size)
        iv = np.tril_indices(self.m_v.size)
        return np.concatenate([self.m_u, self.L_u[iu], self.m_v, self.L_v[iv], self.features.get_params(),
                               self.W.ravel(), self._pack_hypers()])

    def _unpack(self, theta: np.ndarray) -> None:
        M, K = self.m_u.size, self.m_v.size
        r = FlatReader(theta)
        self.m_u, self.L_u = r.vector(M), r.tril(M)
        self.m_v, self.L_v = r.vector(K), r.tril(K)
        self.features.set_params(r.vector(self.features.get_params().size))
        self.W = r.vector(self.W.size).reshape(self.W.shape)
        self._unpack_hypers(r.rest())

    def _grad_vector(self, g: dict[str, Any], theta: np.ndarray) -> np.ndarray:
        M, K = self.m_u.size, self.m_v.size
        return np.concatenate([g["m_u"], g["L_u"][np.tril_indices(M)], g["m_v"], g["L_v"][np.tril_indices(K)],
                               g["features"], g["W"].ravel(), self._hyper_gradient(g, theta)])

    def _initialised(self) -> bool:
        return self.m_u is not None

    def elbo(self, X: Any = None, y: Any = None) -> float:
        """The ELBO on all of (X, y) (default: the training data)."""
        X = self._X if X is None else X
        y = self._y if y is None else y
        X, y = self._check_data(X, y)
        if self._use_stats(X.shape[0]):
            return self.elbo_and_gradient(X, y)[0]  # streamed: memory independent of N
        return self.bound(X, y).value

    # ---- prediction -----------------------------------------------------------------------
    def _predictive(self, X: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if self.whiten:
            return self._predictive_whitened(X)
        Kuu, Kuf, kff, Kvv, Kvu, Kvf = self._matrices(X)
        Lk = cholesky_or_explain(Kuu, "Kuu", _HINT_UU)
        A = cho_solve((Lk, True), Kuf)
        Su = np.tril(self.L_u) @ np.tril(self.L_u).T
        mean = A.T @ self.m_u
        terms = {"Kff": kff, "-Qff": -np.einsum("mn,mn->n", A, Kuf), "+QCuQ": np.einsum("mn,mn->n", A, Su @ A)}
        if self.num_orthogonal:
            Svv = Kvv - Kvu @ cho_solve((Lk, True), Kvu.T)
            Svf = Kvf - Kvu @ A
            Ls = cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", _HINT_VV)
            Bm = cho_solve((Ls, True), Svf)
            Cv = np.tril(self.L_v) @ np.tril(self.L_v).T
            mean = mean + Bm.T @ self.m_v
            terms["-SfvSvv^-1Svf"] = -np.einsum("kn,kn->n", Bm, Svf)
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.einsum("kn,kn->n", Bm, Cv @ Bm)
        else:
            terms["-SfvSvv^-1Svf"] = np.zeros(X.shape[0])
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.zeros(X.shape[0])
        return mean, terms

    def _predictive_whitened(self, X: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        Kuu, Kuf, kff, Kvv, Kvu, Kvf = self._matrices(X)
        Lk, Pt, Ls = joint_factors(Kuu, Kvv, Kvu)
        At = solve_triangular(Lk, Kuf, lower=True)
        Lu = np.tril(self.L_u)
        LA = Lu.T @ At
        mean = At.T @ self.m_u
        terms = {"Kff": kff, "-Qff": -np.einsum("mn,mn->n", At, At), "+QCuQ": np.einsum("mn,mn->n", LA, LA)}
        if self.num_orthogonal:
            Bt = solve_triangular(Ls, Kvf - Pt.T @ At, lower=True)
            LB = np.tril(self.L_v).T @ Bt
            mean = mean + Bt.T @ self.m_v
            terms["-SfvSvv^-1Svf"] = -np.einsum("kn,kn->n", Bt, Bt)
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.einsum("kn,kn->n", LB, LB)
        else:
            terms["-SfvSvv^-1Svf"] = np.zeros(X.shape[0])
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.zeros(X.shape[0])
        return mean, terms

    def _check_fitted(self):
        if self.m_u is None:
            raise RuntimeError("call fit() (or initialise()) first")

    def variance_terms(self, X: Any) -> dict[str, np.ndarray]:
        r"""The five terms of the predictive variance (seed 003 eq. 3.12, Fig. 3.8), each ``(N,)``:
        ``Kff``, ``-Qff``, ``+QCuQ``, ``-SfvSvv^-1Svf``, ``+SfvSvv^-1CvSvv^-1Svf``; they sum to
        the variance of :meth:`predict_f` (before its clipping at 0)."""
        self._check_fitted()
        return self._predictive(check_finite_array(X, "X", ndim=2))[1]

    def predict_f(self, X: Any, chunk_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of f, ``(N,)`` each (chunked over rows)."""
        self._check_fitted()
        X = check_finite_array(X, "X", ndim=2)
        means, varis = [], []
        for s in range(0, X.shape[0], chunk_size):
            mean, terms = self._predictive(X[s : s + chunk_size])
            means.append(mean)
            varis.append(np.maximum(sum(terms.values()), 0.0))
        return np.concatenate(means), np.concatenate(varis)

    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y."""
        return self.likelihood.predict_y(*self.predict_f(X))


class _Gradients:
    """Accumulates :class:`OrthogonalSVGP`'s parameter gradients from the matrix derivatives
    (GPy's contract): the inducing block once, the row blocks once per chunk."""

    def __init__(self, model: "OrthogonalSVGP") -> None:
        self.model = model
        kern = model.kernel
        self.hyp = ["variance", *kern.shape_params, "bias", "input_scale"]
        self.acc = {k: np.zeros_like(np.asarray(getattr(kern, k), dtype=np.float64)) for k in self.hyp}
        self.fparams = np.zeros_like(model.features.get_params())
        self.dW = np.zeros_like(model.W)

    def _add(self, d: dict[str, Any], features: bool = False) -> None:
        for k in self.hyp:
            if k in d:
                self.acc[k] = self.acc[k] + np.asarray(d[k])
        if features:
            self.fparams += self.model.features.param_gradient(d)

    def inducing(self, dKuu, dKvv, dKvu) -> None:
        m, kern, feats = self.model, self.model.kernel, self.model.features
        self._add(feats.Kuu_gradients(kern, m._jitter_backward(dKuu)), features=True)
        if m.num_orthogonal:
            dKvv = m._jitter_backward(dKvv)
            d, dWvv, _ = kern.gradients_with_inputs(0.5 * (dKvv + dKvv.T), m.W)
            self._add(d)
            self.dW += dWvv
            d = feats.Kuf_gradients(kern, dKvu.T, m.W)
            self._add(d, features=True)
            self.dW += d["X"]

    def rows(self, X, dKuf, dKvf, dkff) -> None:
        m, kern = self.model, self.model.kernel
        self._add(m.features.Kuf_gradients(kern, dKuf, X), features=True)
        self._add(kern.diag_gradients(dkff, X))
        if m.num_orthogonal:
            d, dWvf, _ = kern.gradients_with_inputs(dKvf, m.W, X)
            self._add(d)
            self.dW += dWvf

    def result(self, dm_u, dL_u, dm_v, dL_v, dnoise) -> dict[str, Any]:
        g: dict[str, Any] = {"m_u": dm_u, "L_u": dL_u, "m_v": dm_v, "L_v": dL_v,
                             "features": self.fparams, "W": self.dW}
        g.update({k: (float(v) if np.ndim(v) == 0 else v) for k, v in self.acc.items()})
        g["noise"] = dnoise
        return g


class ActivatedSVGP(OrthogonalSVGP):
    """The activated SVGP (Dutordoir et al. 2021; seed 003 §3.2.2): :class:`OrthogonalSVGP` with
    ``num_orthogonal = 0``."""

    def __init__(self, kernel: ZonalKernel, features, likelihood=None) -> None:
        super().__init__(kernel, features, 0, likelihood)
