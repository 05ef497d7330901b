r"""The orthogonally-decoupled ELBO (Tiao, thesis §3.3-3.4; Shi, Titsias & Mnih 2020, "SOLVE-GP")
and its derivatives with respect to every matrix it consumes (GPy's contract).

Two sets of inducing variables: :math:`u` (any feature) and :math:`v = f(W)` at K orthogonal
inputs, of which only the part orthogonal to :math:`u`, :math:`v' = v - K_{vu}K_{uu}^{-1}u`, is
modelled: :math:`p(v') = N(0, S_{vv})`, :math:`q(u) = N(m_u, C_u)`, :math:`q(v') = N(m_v, C_v)`,

.. math:: S_{vv} = K_{vv} - K_{vu}K_{uu}^{-1}K_{uv}, \qquad S_{vf} = K_{vf} - K_{vu}K_{uu}^{-1}K_{uf}.

Predictive (Tiao, thesis eqs. 3.11-3.12), :math:`A = K_{uu}^{-1}K_{uf}`, :math:`B = S_{vv}^{-1}S_{vf}`:

.. math:: \mu = A^\top m_u + B^\top m_v, \qquad
          \nu = k_{ff} - \mathrm{diag}(K_{fu}A) + \mathrm{diag}(A^\top C_u A)
                - \mathrm{diag}(S_{fv}B) + \mathrm{diag}(B^\top C_v B).

ELBO :math:`= \tfrac{N}{|B|}\sum_{n\in\text{batch}} E_q[\log p(y_n\mid f_n)]
- \mathrm{KL}[q(u)\,\|\,N(0, K_{uu})] - \mathrm{KL}[q(v')\,\|\,N(0, S_{vv})]`.
``K = 0`` is the SVGP; :math:`C_v = S_{vv}` gives ODVGP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from ..linalg import (
    chol_inverse,
    chol_inverse_tri,
    cholesky_or_explain,
    inverse_factor,
)
from .statistics import check_trace_term, check_variance_rounding
from .whitened import (
    gaussian_noise_gradient,
    kl_whitened,
    whitened_forward,
    whitened_kernel_backward,
    whitened_q_backward,
)
from .whitened_stats import whitened_stats_terms

__all__ = [
    "TERMS",
    "Predictive",
    "decoupled_predictive",
    "HINT_UU",
    "HINT_VV",
    "OrthogonalBound",
    "orthogonal_bound",
    "orthogonal_bound_whitened",
    "StatsBound",
    "gaussian_stats_bound_whitened",
    "joint_cholesky",
    "joint_factors",
    "whitened_optimum",
]

HINT_UU = ("Kuu is singular: fewer units than the truncated feature space has dimensions? "
            "Use fewer units, a higher truncation, or spread the unit weights.")
HINT_VV = ("S_vv = Kvv - Kvu Kuu^-1 Kuv is singular: orthogonal inputs coincide, or the features "
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


#: the five terms of the predictive variance (Tiao, thesis eq. 3.12), in summation order
TERMS = ("Kff", "-Qff", "+QCuQ", "-SfvSvv^-1Svf", "+SfvSvv^-1CvSvv^-1Svf")


@dataclass
class Predictive:
    """The decoupled predictive at a batch: ``mean`` ``(B,)``, the five variance ``terms``
    (:data:`TERMS`, each ``(B,)``) and what the bound's backward pass reuses (``cache``)."""

    mean: np.ndarray
    terms: dict
    cache: dict

    @property
    def var(self) -> np.ndarray:
        """The predictive variance of f, the terms' sum (not clipped)."""
        return sum(self.terms[k] for k in TERMS)


def decoupled_predictive(Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, *, whiten: bool) -> Predictive:
    r"""The one predictive of the orthogonally-decoupled posterior, used by the bounds and by
    ``predict_f`` / ``variance_terms`` alike (Tiao, thesis eqs. 3.11-3.12): with
    :math:`A = K_{uu}^{-1}K_{uf}`, :math:`B = S_{vv}^{-1}S_{vf}`,
    :math:`\mu = A^\top m_u + B^\top m_v` and
    :math:`\nu = k_{ff} - \mathrm{diag}(K_{fu}A) + \mathrm{diag}(A^\top C_uA) - \mathrm{diag}(S_{fv}B)
    + \mathrm{diag}(B^\top C_vB)`; whitened (:math:`u = L_{uu}\tilde u`, :math:`v' = L_{vv}\tilde v`),
    :math:`A_t = L_k^{-1}K_{uf}`, :math:`B_t = L_s^{-1}S_{vf}` and the terms are column norms. Shapes
    as in :func:`orthogonal_bound`; K = 0 gives zero orthogonal terms."""
    B = Kuf.shape[1]
    K = Kvv.shape[0]
    L_u, L_v = np.tril(L_u), np.tril(L_v)
    zero = np.zeros(B)
    if whiten:
        Lk, At, LtA = whitened_forward(Kuu, Kuf, L_u, "Kuu", HINT_UU)
        cache = {"Lk": Lk, "At": At, "LtA": LtA, "L_u": L_u, "L_v": L_v}
        mean = At.T @ m_u
        terms = {"Kff": kff, "-Qff": -np.einsum("mn,mn->n", At, At), "+QCuQ": np.einsum("mn,mn->n", LtA, LtA)}
        if K:
            Pt = solve_triangular(Lk, Kvu.T, lower=True)  # Lk^-1 Kuv (M, K)
            Svv = Kvv - Pt.T @ Pt
            Svf = Kvf - Pt.T @ At
            Ls, Bt, LtB = whitened_forward(0.5 * (Svv + Svv.T), Svf, L_v, "S_vv", HINT_VV)
            cache.update(Pt=Pt, Ls=Ls, Bt=Bt, LtB=LtB)
            mean = mean + Bt.T @ m_v
            terms["-SfvSvv^-1Svf"] = -np.einsum("kn,kn->n", Bt, Bt)
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.einsum("kn,kn->n", LtB, LtB)
    else:
        Lk = cholesky_or_explain(Kuu, "Kuu", HINT_UU)
        A = cho_solve((Lk, True), Kuf)
        Su = L_u @ L_u.T
        SuA = Su @ A
        cache = {"Lk": Lk, "A": A, "Su": Su, "SuA": SuA, "L_u": L_u, "L_v": L_v}
        mean = A.T @ m_u
        terms = {"Kff": kff, "-Qff": -np.einsum("mn,mn->n", A, Kuf), "+QCuQ": np.einsum("mn,mn->n", A, SuA)}
        if K:
            P = cho_solve((Lk, True), Kvu.T)  # Kuu^-1 Kuv (M, K)
            Svv = Kvv - Kvu @ P
            Svf = Kvf - Kvu @ A
            Ls = cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", HINT_VV)
            Bm = cho_solve((Ls, True), Svf)
            Cv = L_v @ L_v.T
            CvB = Cv @ Bm
            cache.update(P=P, Svf=Svf, Ls=Ls, Bm=Bm, Cv=Cv, CvB=CvB)
            mean = mean + Bm.T @ m_v
            terms["-SfvSvv^-1Svf"] = -np.einsum("kn,kn->n", Bm, Svf)
            terms["+SfvSvv^-1CvSvv^-1Svf"] = np.einsum("kn,kn->n", Bm, CvB)
    terms.setdefault("-SfvSvv^-1Svf", zero)
    terms.setdefault("+SfvSvv^-1CvSvv^-1Svf", zero)
    return Predictive(mean, terms, cache)


def orthogonal_bound(
    Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, y, likelihood, num_data: int
) -> OrthogonalBound:
    r"""The orthogonally-decoupled ELBO on a batch and its matrix derivatives.

    Parameters
    ----------
    Kuu, Kuf, kff : ``(M, M)``, ``(M, B)``, ``(B,)``
        Feature covariances and the prior variances at the batch inputs.
    m_u, L_u : ``(M,)``, ``(M, M)``
        :math:`q(u) = N(m_u, L_uL_u^\top)` (lower triangle of L_u used).
    Kvv, Kvu, Kvf : ``(K, K)``, ``(K, M)``, ``(K, B)``
        Covariances of the orthogonal inducing values (K may be 0).
    m_v, L_v : ``(K,)``, ``(K, K)``
        :math:`q(v') = N(m_v, L_vL_v^\top)`.
    y, likelihood, num_data : ``(B,)``, a likelihood, int
        Targets, a likelihood with ``variational_expectations``, and N (the data term is scaled
        by N / B).
    """
    M, B = Kuf.shape
    K = Kvv.shape[0]
    scale = num_data / B
    pred = decoupled_predictive(Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, whiten=False)
    mean, var, c = pred.mean, pred.var, pred.cache
    L_u, L_v, Lk, A, Su, SuA = c["L_u"], c["L_v"], c["Lk"], c["A"], c["Su"], c["SuA"]
    Kuu_inv = chol_inverse(Lk)
    if K:
        P, Svf, Ls, Bm, Cv, CvB = c["P"], c["Svf"], c["Ls"], c["Bm"], c["Cv"], c["CvB"]
        Svv_inv = chol_inverse(Ls)
    e, gmu, gvar = likelihood.variational_expectations(y, mean, np.maximum(var, 1e-300))

    def logdet_tri(L):
        return 2.0 * float(np.sum(np.log(np.abs(np.diag(L)))))

    kl_u = 0.5 * (np.sum(Kuu_inv * Su) + m_u @ Kuu_inv @ m_u - M + 2 * np.sum(np.log(np.diag(Lk))) - logdet_tri(L_u))
    value = scale * float(e.sum()) - kl_u
    gmu = scale * gmu
    gvar = scale * gvar

    # ---- backward ----
    dm_u = A @ gmu - Kuu_inv @ m_u
    dSu = (A * gvar) @ A.T - 0.5 * (Kuu_inv - chol_inverse_tri(L_u))
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
        kl_v = 0.5 * (
            np.sum(Svv_inv * Cv) + m_v @ Svv_inv @ m_v - K + 2 * np.sum(np.log(np.diag(Ls))) - logdet_tri(L_v)
        )
        value -= kl_v
        dm_v = Bm @ gmu - Svv_inv @ m_v
        dCv = (Bm * gvar) @ Bm.T - 0.5 * (Svv_inv - chol_inverse_tri(L_v))
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
    check_variance_rounding(value, gvar, pred.terms.values(), num_data)
    return OrthogonalBound(float(value), mean, var, dKuu, dKuf, dkff, dm_u, dL_u, dKvv, dKvu, dKvf, dm_v, dL_v, dnoise)


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
    through :func:`~spherelab.linalg.cholesky_backward`."""
    M, B = Kuf.shape
    K = Kvv.shape[0]
    scale = num_data / B
    pred = decoupled_predictive(Kuu, Kuf, kff, m_u, L_u, Kvv, Kvu, Kvf, m_v, L_v, whiten=True)
    mean, var, c = pred.mean, pred.var, pred.cache
    L_u, L_v, Lk, At, LtA = c["L_u"], c["L_v"], c["Lk"], c["At"], c["LtA"]
    if K:
        Pt, Ls, Bt, LtB = c["Pt"], c["Ls"], c["Bt"], c["LtB"]
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
    check_variance_rounding(value, gvar, pred.terms.values(), num_data)
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
    on :math:`L_J` at fixed :math:`K_{pf}` included) through :func:`~spherelab.linalg.cholesky_backward` of
    :math:`L_J`, and to q.
    No :math:`(P, B)` product is formed here, so the caller can stream the rows in chunks.
    """
    t = whitened_stats_terms(np, _host_solve, LJ, M, Phi, beta, sum_kff, yy, batch, m_u, L_u, m_v, L_v,
                             noise_variance, num_data)
    s = num_data / batch
    check_trace_term(float(t.value), s * sum_kff, s * float(t.trace), float(noise_variance), num_data)
    dKpp = t.dKpp
    return StatsBound(float(t.value), dKpp[:M, :M], dKpp[M:, M:], 2.0 * dKpp[M:, :M], t.dPhi, t.dbeta, t.a,
                      t.dm[:M], t.dL_u, t.dm[M:], t.dL_v, float(t.dnoise))


def _host_solve(L, B, trans):
    return solve_triangular(L, B, lower=True, trans=trans)


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
    Lk = cholesky_or_explain(Kuu, "Kuu", HINT_UU)
    if Kvv.shape[0] == 0:
        return Lk, np.zeros((Kuu.shape[0], 0)), np.zeros((0, 0))
    Pt = solve_triangular(Lk, Kvu.T, lower=True)
    Svv = Kvv - Pt.T @ Pt
    return Lk, Pt, cholesky_or_explain(0.5 * (Svv + Svv.T), "S_vv", HINT_VV)


def whitened_optimum(Phi, beta, noise_variance: float, M: int):
    r"""The maximiser of :func:`gaussian_stats_bound_whitened` over q: with
    :math:`\Lambda = I + \Phi/\sigma^2`, the joint whitened mean
    :math:`\Lambda^{-1}\beta/\sigma^2` ``(M + K,)`` and the factors of
    :math:`\Lambda_{uu}^{-1}`, :math:`\Lambda_{vv}^{-1}`."""
    Lam = np.eye(Phi.shape[0]) + 0.5 * (Phi + Phi.T) / noise_variance
    L_u, L_v = inverse_factor(Lam[:M, :M], "Λ_uu = I + Φ_uu/σ²"), inverse_factor(Lam[M:, M:], "Λ_vv = I + Φ_vv/σ²")
    return np.linalg.solve(Lam, beta / noise_variance), L_u, L_v
