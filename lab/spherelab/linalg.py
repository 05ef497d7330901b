r"""Dense linear algebra shared by every bound and model: Cholesky factorisation with bounded
jitter and an explanation when it fails, triangular inverses and solves, the reverse mode of the
Cholesky factorisation, and relative jitter with its reverse mode.

A failed factorisation raises :class:`NumericalFailure` (a ``numpy.linalg.LinAlgError``) that
names the matrix and says what to try. The optimisers treat exactly this exception (and nothing
else) as "the trial point is outside the usable range, step back"; any other error is a bug and
propagates.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas, cho_solve, cholesky, lapack, solve_triangular

from ._listing import own_names

__all__ = [
    "NumericalFailure",
    "JITTERS",
    "cholesky_or_explain",
    "add_jitter",
    "jitter_backward",
    "cholesky_backward",
    "chol_inverse",
    "chol_inverse_tri",
    "inv_tri_T",
    "logdet_tri_gradient",
    "inverse_factor",
    "forward_solve",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


class NumericalFailure(np.linalg.LinAlgError):
    """A matrix that should be positive definite is not (even with jitter), or a value left the
    floating-point range. Optimisers reject such a trial point and step back. (A
    ``numpy.linalg.LinAlgError``, hence also a ``ValueError``.)"""


#: jitter tried on a failed Cholesky, relative to the largest diagonal entry (bounded)
JITTERS = (0.0, 1e-12, 1e-10, 1e-8)


def cholesky_or_explain(A: np.ndarray, name: str, hint: str) -> np.ndarray:
    """Lower Cholesky factor with bounded jitter (relative ``JITTERS``), or a
    ``numpy.linalg.LinAlgError`` that names the matrix, its size, its smallest diagonal entry,
    the largest jitter tried and what to try."""
    if not np.all(np.isfinite(A)):
        raise NumericalFailure(
            f"{name} ({A.shape[0]}x{A.shape[0]}) has {int(np.sum(~np.isfinite(A)))} non-finite "
            f"entries. {hint}"
        )
    scale = float(np.max(np.abs(np.diag(A)))) if A.size else 1.0
    err = None
    for jitter in JITTERS:
        try:
            B = A if jitter == 0.0 else A + jitter * scale * np.eye(A.shape[0])
            L = cholesky(B, lower=True, check_finite=False)
            if np.all(np.isfinite(L)):
                return L
        except (np.linalg.LinAlgError, ValueError) as e:  # not positive definite
            err = e
    diag = np.diag(A)
    raise NumericalFailure(
        f"Cholesky of {name} ({A.shape[0]}x{A.shape[0]}) failed even with jitter "
        f"{JITTERS[-1]:g} x max diagonal: {err}. Smallest diagonal entry {np.min(diag):.3e}, "
        f"largest {np.max(diag):.3e}. {hint}"
    )


def add_jitter(A: np.ndarray, jitter: float) -> np.ndarray:
    r""":math:`A + j\,\mathrm{mean}(\mathrm{diag}A)\,I` (relative jitter; ``A`` unchanged for j = 0)."""
    if jitter == 0.0 or A.shape[0] == 0:
        return A
    return A + jitter * float(np.mean(np.diag(A))) * np.eye(A.shape[0])


def jitter_backward(G: np.ndarray, jitter: float) -> np.ndarray:
    r"""Reverse mode of :func:`add_jitter`: :math:`G + (j/n)\,\mathrm{tr}(G)\,I`."""
    if jitter == 0.0 or G.shape[0] == 0:
        return G
    return G + jitter * np.trace(G) / G.shape[0] * np.eye(G.shape[0])


def cholesky_backward(L: np.ndarray, dL: np.ndarray, xp=np, solve=None) -> np.ndarray:
    r"""Reverse mode of :math:`\Sigma = LL^\top`: given :math:`\bar L` (lower triangle used),
    the symmetric :math:`\bar\Sigma = \tfrac12(G + G^\top)`,
    :math:`G = L^{-\top}\Phi(L^\top\bar L)L^{-1}` with :math:`\Phi` the lower triangle with
    halved diagonal (Murray 2016, "Differentiation of the Cholesky decomposition").
    ``xp`` and ``solve`` (``solve(L, B, trans)``: :math:`L^{-1}B` or :math:`L^{-\top}B`) put it on
    a device's arrays; the defaults are NumPy and SciPy's triangular solve."""
    if L.shape[0] == 0:
        return xp.zeros((0, 0))
    if solve is None:
        def solve(L, B, trans):
            return solve_triangular(L, B, lower=True, trans=trans)
    P = xp.tril(L.T @ xp.tril(dL))
    P = P - 0.5 * xp.diag(xp.diag(P))  # the halved diagonal (exact: x - x/2 = x/2)
    G = solve(L, solve(L, P, 1).T, 1).T
    return 0.5 * (G + G.T)


def chol_inverse(L: np.ndarray) -> np.ndarray:
    """:math:`(L L^\top)^{-1}` from a lower Cholesky factor ``L`` (``(n, n)``)."""
    n = L.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    # LAPACK's potri (triangular inverse, then L^-T L^-1): 2n^3/3 flops against 2n^3 for solving
    # against the identity, the same backward-stable computation
    inverse, info = lapack.dpotri(np.asarray(L, dtype=np.float64), lower=1)
    if info != 0:  # a zero on the diagonal: the solve raises the usual error
        return cho_solve((L, True), np.eye(n))
    lower = np.tril(inverse)
    return lower + np.tril(lower, -1).T


def chol_inverse_tri(L: np.ndarray) -> np.ndarray:
    """(L L^T)^-1 for a lower-triangular L with any signs on its diagonal."""
    n = L.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    Li = solve_triangular(L, np.eye(n), lower=True)
    return Li.T @ Li


def inv_tri_T(L: np.ndarray) -> np.ndarray:
    """:math:`L^{-\\top}` for lower-triangular L (empty for 0 x 0)."""
    if L.size == 0:
        return np.zeros_like(L)
    # LAPACK's triangular inverse: a third of the flops of solving against the identity, measured
    # 0.5-0.7 ms against 1.4 ms at n = 256 (one thread); the same backward-stable computation
    inverse, info = lapack.dtrtri(np.asarray(L, dtype=np.float64), lower=1)
    if info != 0:  # a zero on the diagonal: the solve raises the usual error
        return solve_triangular(L, np.eye(L.shape[0]), lower=True).T
    return np.tril(inverse).T


def logdet_tri_gradient(L: np.ndarray, xp=np) -> np.ndarray:
    r""":math:`\partial\log|\det L|/\partial L` for lower-triangular L: the lower triangle of
    :math:`L^{-\top}`, which is upper triangular, so only its diagonal :math:`1/L_{ii}` (no
    triangular inverse: O(n) instead of O(n^3)); ``xp``: the arrays' module."""
    return xp.diag(1.0 / xp.diag(L)) if L.size else xp.zeros_like(L)


def inverse_factor(Lam: np.ndarray, name: str = "the posterior precision") -> np.ndarray:
    r"""Lower-triangular L with :math:`LL^\top = \Lambda^{-1}` for symmetric positive-definite
    :math:`\Lambda` (empty for 0 x 0): with :math:`\Lambda = CC^\top`, :math:`C^{-1} = QR` gives
    :math:`\Lambda^{-1} = R^\top R`, so :math:`L = R^\top` without forming the inverse. A
    :math:`\Lambda` that is not finite or not positive definite raises :class:`NumericalFailure`
    naming ``name`` (an optimiser's trial point is then rejected)."""
    if Lam.shape[0] == 0:
        return np.zeros((0, 0))
    C = cholesky_or_explain(Lam, name, "The statistics overflowed or lost definiteness at these "
                            "hyper-parameters: standardise the data, or raise the noise variance's floor.")
    return np.linalg.qr(solve_triangular(C, np.eye(C.shape[0]), lower=True), mode="r").T


def forward_solve(LJ: np.ndarray, Kpf: np.ndarray) -> np.ndarray:
    """:math:`L_J^{-1}K_{pf}` by forward substitution (an explicit triangular inverse with
    ``dtrmm`` is 1.3x faster on (256, 8192) blocks but 10x less accurate). A row-major ``Kpf``
    ``(P, n)`` is solved as :math:`X^\top = K_{pf}^\top L_J^{-\top}` (``dtrsm`` from the right on
    its column-major transpose): no reordering copy, to the same rounding (the decoupled models'
    (256, 7373) solve 26.0 -> 18.7 ms on one thread against LAPACK's ``trtrs``: claim
    ``decoupled-profile`` in ``benchmarks/RESULTS.md``)."""
    Kpf = np.asarray(Kpf, dtype=np.float64)
    if Kpf.ndim == 2 and Kpf.size and np.all(np.diag(LJ) != 0):
        if Kpf.flags.c_contiguous:
            return blas.dtrsm(1.0, LJ, Kpf.T, side=1, lower=1, trans_a=1).T
        if Kpf.flags.f_contiguous:  # a row-major K_fp's transpose (the rows floor): dtrsm from the left
            return blas.dtrsm(1.0, LJ, Kpf, lower=1)
    return solve_triangular(LJ, Kpf, lower=True)  # (a zero on the diagonal raises LinAlgError here)
