r"""Phase-truncated spherical-harmonic features with learned directions (Eleftheriadis et al. §5.2).

Full spherical-harmonic features need :math:`N(\ell, d)` functions per degree, which explodes
with the dimension (:math:`N(4, 17) = 4\,692`). Eleftheriadis et al. keep at most ``max_phases`` functions
per degree: for degree :math:`\ell` with directions :math:`v_1..v_P \in S^{d-1}`
(:math:`P = \min(N(\ell, d), \text{max\_phases})`) the zonal functions
:math:`g_j(x) = Z_\ell(v_j^\top x)` span a P-dimensional subspace of the degree-:math:`\ell`
harmonics :math:`\mathcal H_\ell`. Their Gram matrix in :math:`L^2(S^{d-1}, \bar\sigma)` follows
from the reproducing property of the zonal function,

.. math:: \langle g_i, g_j\rangle = Z_\ell(v_i^\top v_j) =: \Gamma_{ij} = R R^\top
          \quad (\text{Cholesky}),

so :math:`\tilde\phi_i = \sum_j (R^{-1})_{ij} g_j` are orthonormal by construction — in
exact arithmetic; in floating point to about :math:`\kappa(\Gamma)\,\epsilon`, which the greedy
(well-conditioned) default directions keep small and random directions need not —
they stay inside :math:`\mathcal H_\ell`, and therefore still :math:`K_{uu} = \mathrm{diag}(1/\lambda_\ell)`
for :math:`u_i = \langle f, r\tilde\phi_i\rangle_{\mathcal H}` (``docs/design.md`` §4). With
:math:`P = N(\ell, d)` they are an orthonormal basis of :math:`\mathcal H_\ell` (a rotation of the
spherical harmonics), so the model equals VISH with full harmonics.

The directions are stored unnormalised (:math:`v_j = w_j/\|w_j\|`, any :math:`w_j \ne 0`) and are
trainable; :meth:`PhaseTruncatedHarmonics.vjp` chains :math:`\partial L/\partial\tilde\Phi`
through the orthonormalisation (Cholesky reverse mode) into the :math:`w_j` and the points.

References: Eleftheriadis et al. §5.2 (Gram–Schmidt on :math:`V_\ell^\top V_\ell`); Dutordoir, PhD
report App. A and ``docs/design.md`` §4 (fundamental systems by greedy determinant maximisation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from .._state import Fields
from .._validation import check_allocation, check_dim, check_finite_array, check_int, check_seed
from ..backend.ops import Operations
from ..linalg import cholesky_backward
from ..sphere.gegenbauer import zonal_series
from ..sphere.harmonics import SphericalHarmonics
from ..sphere.special import num_harmonics
from .harmonic import SphericalFeatures

__all__ = ["PhaseTruncatedHarmonics"]

_CANDIDATES = 8  # candidate directions per phase for the greedy initialisation


def _unit(W: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    n = np.sqrt(np.einsum("ij,ij->i", W, W))
    if np.any(n == 0):
        raise ValueError(
            f"{name} has a zero row (row {int(np.flatnonzero(n == 0)[0])}): a direction needs a non-zero vector"
        )
    return n, W / n[:, None]


def _zonal(ell: int, dim: int, t: np.ndarray, ops, derivative: bool = False):
    c = np.zeros(ell + 1)
    c[ell] = 1.0
    return zonal_series(c, dim, t, derivative=derivative, ops=ops)


def greedy_directions(
    ell: int, dim: int, count: int, rng: np.random.Generator, candidates: int | None = None
) -> np.ndarray:
    r"""``count`` unit directions for degree ``ell`` chosen from random candidates by greedy
    maximisation of :math:`\det Z_\ell(V V^\top)` (pivoted Cholesky on the candidates' Gram
    matrix), i.e. an approximate fundamental system (Dutordoir, PhD report App. A). ``(count, dim)``."""
    ell = check_int(ell, "ell", minimum=0)
    dim = check_dim(dim)
    count = check_int(count, "count", minimum=1)
    n_cand = candidates if candidates is not None else max(_CANDIDATES * count, 64)
    C = rng.standard_normal((n_cand, dim))
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    G = _zonal(ell, dim, np.clip(C @ C.T, -1.0, 1.0), "cpu")  # the initialisation: on the host
    diag = np.diag(G).copy()
    chosen: list[int] = []
    Lc = np.zeros((count, n_cand))
    for k in range(count):
        j = int(np.argmax(diag))
        if diag[j] <= 1e-12 * G[0, 0]:
            raise np.linalg.LinAlgError(
                f"could not find {count} independent degree-{ell} zonal functions among {n_cand} candidates"
            )
        chosen.append(j)
        row = (G[j] - Lc[:k, j] @ Lc[:k]) / np.sqrt(diag[j])
        Lc[k] = row
        diag = diag - row * row
        diag[chosen] = -np.inf
    return C[chosen]


class PhaseTruncatedHarmonics(SphericalFeatures):
    r"""At most ``max_phases`` orthonormalised zonal functions per degree :math:`0..L` on
    :math:`S^{d-1}`, with trainable directions (Eleftheriadis et al. §5.2; module docstring).

    Parameters
    ----------
    dim
        d = number of inputs + 1 (the bias coordinate).
    max_degree
        L, the highest degree.
    max_phases
        Functions kept per degree: :math:`P_\ell = \min(N(\ell, d), \text{max\_phases})`.
    directions
        Optional list of ``L + 1`` arrays ``(P_l, d)`` (non-zero rows); default: greedy
        approximate fundamental systems from random candidates (``seed``).
    seed
        Seed of the default initialisation.

    Attributes
    ----------
    degrees : numpy.ndarray
        ``(M,)`` degree of each feature, ordered by degree.
    phases : list of int
        :math:`P_\ell`.

    Notes
    -----
    Where they help (Eleftheriadis et al.: many inputs, few directions that matter, high
    frequency along them), trained directions need the features prior and a fit that trains them
    for many steps; :meth:`spherelab.VISH.fit` then fits the spectrum and noise on rows the
    directions were not trained on, since under that prior the directions are hyper-parameters
    that fit their rows' noise (``benchmarks/RESULTS.md``, "Phase-truncated harmonics where
    Eleftheriadis et al. say they help"). Under the kernel prior the trace term charges every
    dropped phase's prior mass, which at high degree is nearly all of it.

    Examples
    --------
    >>> import numpy as np, spherelab
    >>> F = spherelab.PhaseTruncatedHarmonics(17, 10, 100)
    >>> F.num_features  # 1 + 17 + 100 * 9, where full harmonics up to degree 10 need 7 354 710
    918
    """

    fields = Fields(config=("dim", "max_degree", "max_phases", "directions"), fitted=("keep=_keep",),
                    transient=("phases",), cache={"factors=_factors": ("directions",)})

    def __init__(self, dim: int, max_degree: int, max_phases: int, directions: Any = None, seed: int = 0) -> None:
        self.dim = check_dim(dim)
        self.max_degree = check_int(max_degree, "max_degree", minimum=0)
        self.max_phases = check_int(max_phases, "max_phases", minimum=1)
        # at least min(phases, harmonics) directions of dim entries per degree: refused before the loop
        check_allocation(8.0 * self.dim * (self.max_degree + 1.0) * min(self.max_phases, 2 * self.max_degree + 1),
                         f"max_degree = {self.max_degree:,} with max_phases = {self.max_phases:,}",
                         "lower max_degree or max_phases")
        seed = check_seed(seed)
        self.phases = [min(int(num_harmonics(ell, self.dim)), self.max_phases) for ell in range(self.max_degree + 1)]
        if directions is None:
            rng = np.random.default_rng(seed)
            directions = [greedy_directions(ell, self.dim, P, rng) for ell, P in enumerate(self.phases)]
        self.set_directions(directions)

    @classmethod
    def _load_state(cls, state):
        directions = state.value("directions")
        max_degree = state.int("max_degree", minimum=0)
        if not isinstance(directions, list) or len(directions) != max_degree + 1:
            raise state.fail("directions", f"a list of max_degree + 1 = {max_degree + 1} arrays", directions)
        features = cls(state.int("dim", minimum=2), max_degree, state.int("max_phases", minimum=1), directions)
        features._keep = features._keep_from(state)
        return features

    # ---- parameters -----------------------------------------------------------------------
    def set_directions(self, directions: Any) -> None:
        """Replace the directions (list of ``(P_l, d)`` arrays with non-zero rows)."""
        if len(directions) != self.max_degree + 1:
            raise ValueError(f"directions must be a list of max_degree + 1 = {self.max_degree + 1} arrays")
        out = []
        for ell, (V, P) in enumerate(zip(directions, self.phases)):
            V = check_finite_array(V, f"directions[{ell}]", ndim=2)
            if V.shape != (P, self.dim):
                raise ValueError(f"directions[{ell}] must have shape {(P, self.dim)}, got {V.shape}")
            _unit(V, f"directions[{ell}]")
            out.append(V.copy())
        self.directions = out

    def get_params(self) -> np.ndarray:
        """All direction vectors, flattened in degree order."""
        return np.concatenate([V.ravel() for V in self.directions])

    def set_params(self, values: Any) -> None:
        values = np.asarray(values, dtype=np.float64)
        out, k = [], 0
        for V in self.directions:
            out.append(values[k:k + V.size].reshape(V.shape))
            k += V.size
        if k != values.size:
            raise ValueError(f"expected {k} parameters, got {values.size}")
        self.set_directions(out)

    @property
    def all_degrees(self) -> np.ndarray:
        """Degree of each function, ``(sum P_l,)``, ordered by degree."""
        return np.repeat(np.arange(self.max_degree + 1), self.phases)

    def initialise(self, dim: int, rng: Any = None) -> None:
        if dim != self.dim:
            raise ValueError(f"the data have {dim - 1} inputs but these features live on S^{self.dim - 1} "
                             f"(expected {self.dim - 1} inputs)")

    def degree_slice(self, degree: int) -> slice:
        start = int(sum(self.phases[:degree]))
        return slice(start, start + self.phases[degree])

    # ---- orthonormalisation ---------------------------------------------------------------
    def _factor(self, ell: int):
        V = self.directions[ell]
        _, Vh = _unit(V, f"directions[{ell}]")
        # P x P per degree: on the host whatever the device
        Gam, dGam = _zonal(ell, self.dim, np.clip(Vh @ Vh.T, -1.0, 1.0), "cpu", derivative=True)
        Gam = 0.5 * (Gam + Gam.T)
        try:
            R = np.linalg.cholesky(Gam)
        except np.linalg.LinAlgError:
            raise np.linalg.LinAlgError(
                f"the degree-{ell} Gram matrix Z_l(V V^T) of the phase directions is singular: two "
                "directions (or their antipodes) coincide or the directions are linearly dependent "
                "in H_l; re-initialise them (PhaseTruncatedHarmonics(..., directions=None)) or "
                "lower max_phases"
            ) from None
        # the explicit inverse of the small triangular factor: every later use is a matmul
        Rinv = solve_triangular(R, np.eye(R.shape[0]), lower=True)
        return Vh, R, Rinv, dGam

    def factors(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per degree ``(V_hat, R, R^-1, Z'_l(V_hat V_hat^T))``: unit directions, the Cholesky
        factor of :math:`Z_\\ell(\\hat V\\hat V^\\top)`, its inverse, and the derivative of the
        zonal function on the Gram entries (all cached until the directions change)."""
        return self.fields.cached(self, "factors", lambda: [self._factor(ell) for ell in range(self.max_degree + 1)])

    # ---- evaluation -----------------------------------------------------------------------
    def _check_points(self, Xh: Any) -> np.ndarray:
        Xh = check_finite_array(Xh, "X", ndim=2)
        if Xh.shape[1] != self.dim:
            raise ValueError(f"X must have {self.dim} columns (points on S^{self.dim - 1}), got {Xh.shape[1]}")
        norms = np.sqrt(np.einsum("ij,ij->i", Xh, Xh))
        if np.any(np.abs(norms - 1.0) > 1e-6):
            raise ValueError("X must contain unit vectors (points on the sphere); lift data with kernel.lift")
        return Xh

    #: the directions are trainable parameters (VISH trains them with the lift)
    trainable = True

    def __call__(self, Xh: Any, out: np.ndarray | None = None, *, ops: Operations | str = "cpu") -> np.ndarray:
        r""":math:`\tilde\Phi_{n,i} = \tilde\phi_i(\hat x_n)`, ``(N, M)``, for unit vectors
        ``Xh`` ``(N, d)`` (written into ``out`` if given), the zonal functions evaluated by ``ops``."""
        Xh = self._check_points(Xh)
        if out is None:
            out = np.empty((Xh.shape[0], self.all_degrees.size))
        for ell, (Vh, _, Rinv, _) in enumerate(self.factors()):
            Z = _zonal(ell, self.dim, np.clip(Xh @ Vh.T, -1.0, 1.0), ops)
            out[:, self.degree_slice(ell)] = Z @ Rinv.T
        return out

    def unit_values(self, Xh: np.ndarray, out: np.ndarray | None = None, *,
                    ops: Operations | str = "cpu") -> np.ndarray:
        return self(Xh, out=out, ops=ops)

    def vjp(self, Xh: Any, G: Any, G_points: Any = None, *,
            ops: Operations | str = "cpu") -> tuple[np.ndarray, np.ndarray]:
        r"""Chain :math:`G = \partial L/\partial\tilde\Phi` (``(N, M)``) into the direction
        parameters (flat, like :meth:`get_params`) and the points ``Xh`` (``(N, d)``, the
        unconstrained derivative; project on the tangent space if needed). ``G_points``, if
        given, replaces ``G`` for the points (both from one evaluation of the zonal functions).

        Per degree, with :math:`\tilde\Phi = Z R^{-\top}`, :math:`Z_{nj} = Z_\ell(\hat x_n^\top\hat v_j)`:
        :math:`\bar Z = G R^{-1}`, :math:`\bar R = -R^{-\top}(G^\top Z)R^{-\top}` (lower part), then
        the Cholesky reverse mode gives :math:`\bar\Gamma`, and
        :math:`\bar{\hat v}_j = \sum_n \bar Z_{nj}Z'_{nj}\hat x_n
        + \sum_i 2\bar\Gamma_{ij}Z'(\hat v_i^\top\hat v_j)\hat v_i`,
        :math:`\bar w_j = (I - \hat v_j\hat v_j^\top)\bar{\hat v}_j/\|w_j\|`.
        """
        Xh = self._check_points(Xh)
        G = check_finite_array(G, "G", ndim=2)
        M_all = self.all_degrees.size
        if G.shape != (Xh.shape[0], M_all):
            raise ValueError(f"G must have shape {(Xh.shape[0], M_all)}, got {G.shape}")
        if G_points is not None and G_points.shape != G.shape:
            raise ValueError(f"G_points must have shape {G.shape}, got {G_points.shape}")
        dX = np.zeros_like(Xh)
        grads = []
        for ell, (Vh, R, Rinv, dGam_dt) in enumerate(self.factors()):
            Gb = G[:, self.degree_slice(ell)]
            Z, dZ_dt = _zonal(ell, self.dim, np.clip(Xh @ Vh.T, -1.0, 1.0), ops, derivative=True)
            Zbar = Gb @ Rinv  # G R^{-1}
            if G_points is not None:
                dX += ((G_points[:, self.degree_slice(ell)] @ Rinv) * dZ_dt) @ Vh
            Rbar = -Rinv.T @ (Gb.T @ Z) @ Rinv.T
            Gam_bar = cholesky_backward(R, np.tril(Rbar))
            H = Zbar * dZ_dt
            if G_points is None:
                dX += H @ Vh
            dVh = H.T @ Xh + 2.0 * (Gam_bar * dGam_dt) @ Vh
            norms = np.linalg.norm(self.directions[ell], axis=1)
            tangential = dVh - np.einsum("ij,ij->i", dVh, Vh)[:, None] * Vh
            grads.append((tangential / norms[:, None]).ravel())
        return np.concatenate(grads), dX

    def lift_vjp(self, Xh: np.ndarray, Phi_hat: np.ndarray, W: np.ndarray, *,
                 ops: Operations | str = "cpu") -> np.ndarray:
        r""":math:`\sum_m W_{nm}\nabla_{\tilde x}\psi_m(\tilde x_n)` for the homogeneous
        extension :math:`\psi_m(\tilde x) = r\tilde\phi_m(\tilde x/r)`:
        :math:`\nabla\psi = \tilde\phi(\hat x)\hat x + (I - \hat x\hat x^\top)\nabla\tilde\phi(\hat x)`,
        evaluated at the unit points ``Xh`` (``(N, d)``)."""
        _, dX = self.vjp(Xh, W, ops=ops)
        dX -= np.einsum("nd,nd->n", dX, Xh)[:, None] * Xh
        return dX + Xh * np.einsum("nm,nm->n", W, Phi_hat)[:, None]

    def lift_vjp_with_params(self, Xh: np.ndarray, Phi_hat: np.ndarray, W: np.ndarray,
                             r: np.ndarray, *, ops: Operations | str = "cpu") -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`lift_vjp` and the direction gradient for :math:`\Phi = r\tilde\Phi`
        (weights ``W * r``) from one evaluation of the zonal functions."""
        g_dirs, dX = self.vjp(Xh, W * r[:, None], G_points=W, ops=ops)
        dX -= np.einsum("nd,nd->n", dX, Xh)[:, None] * Xh
        return dX + Xh * np.einsum("nm,nm->n", W, Phi_hat)[:, None], g_dirs

    def projection_check(self, ell: int, points: np.ndarray) -> np.ndarray:
        r"""Gram matrix :math:`\int\tilde\phi_i\tilde\phi_j d\bar\sigma` of degree ``ell``
        estimated by least squares on ``points`` against the reference harmonics
        (:class:`~spherelab.SphericalHarmonics`): the identity up to rounding. Diagnostic."""
        ref = SphericalHarmonics(self.dim, ell)(points)[:, -int(num_harmonics(ell, self.dim)):]
        mine = self(points)[:, self.degree_slice(ell)]
        Q = np.linalg.lstsq(ref, mine, rcond=None)[0]  # mine = ref @ Q
        return Q.T @ Q

    def __repr__(self) -> str:
        return (f"PhaseTruncatedHarmonics(dim={self.dim}, max_degree={self.max_degree}, "
                f"max_phases={self.max_phases}, M={self.num_features})")
