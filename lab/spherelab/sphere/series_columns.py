r"""A zonal series on a grid of inner products and its reverse mode: the CPU side of the device seam's
``series_columns`` and ``series_columns_backward`` (:mod:`spherelab.backend.ops`).

.. math:: F_{ij} = r_i\,\rho_j \sum_{\ell=0}^{L} c_\ell P_\ell^\alpha(t_{ij}), \qquad
          t_{ij} \text{ clipped to } [-1, 1],

with the normalised Gegenbauer polynomials :math:`P_\ell^\alpha` (:mod:`.gegenbauer`); a zonal series
:math:`\sum_\ell a_\ell Z_\ell(t)` is :math:`c_\ell = a_\ell N(\ell, d)`, :math:`\alpha = (d - 2)/2`
(:func:`normalized_zonal`). This is the activated features' cross-covariance
:math:`[K_{fu}]_{nm} = r_n\|w_m\|\,g_L(\hat x_n^\top\hat w_m)` (Tiao, thesis eq. 3.6) on rows that a
decoupled model keeps on its device (:mod:`spherelab.rows.device`). Its reverse mode
returns what :func:`~spherelab.sphere.lift.lifted_row_gradients` takes,
:math:`A = G\odot(s - t s')`, :math:`B = G\odot s'`, with :math:`s'` dropped where
:math:`|t| = 1` (its factor :math:`\hat b - t\hat a` vanishes there, as in
:func:`~spherelab.features.zonal.zonal_pair_gradients`). One Clenshaw pass per entry, compiled
from the same source (:mod:`.gegenbauer_src`) as the CUDA kernels.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .._validation import check_dim, check_finite_array
from ..backend.jit import jit
from ..threads import policy
from . import gegenbauer_src as src
from .special import alpha_of_dim, num_harmonics

__all__ = ["normalized_zonal", "series_columns_cpu", "series_columns_backward_cpu"]

_tables = jit()(src.clenshaw_tables)
_point = jit()(src.clenshaw_point)
_pair_terms = jit()(src.pair_terms)


def normalized_zonal(coeffs, dim: int) -> tuple[np.ndarray, float]:
    r"""The coefficients ``c`` and :math:`\alpha` of :math:`\sum_\ell a_\ell Z_\ell(t)` in the normalised
    basis: :math:`c_\ell = a_\ell N(\ell, d)`, :math:`\alpha = (d - 2)/2`."""
    dim = check_dim(dim)
    a = check_finite_array(coeffs, "coeffs", ndim=1)
    counts = np.array([float(num_harmonics(ell, dim)) for ell in range(a.shape[0])])
    return np.ascontiguousarray(a * counts), float(alpha_of_dim(dim))


@jit()
def _recurrence(coeffs, alpha):  # pragma: no cover - compiled
    L = coeffs.shape[0] - 1
    a_tab = np.zeros(L + 1)
    b_tab = np.zeros(L + 2)
    return a_tab, b_tab, _tables(L, 2.0 * alpha, a_tab, b_tab)


@jit(parallel=True)
def _values_kernel(T, r1, r2, coeffs, alpha, out):  # pragma: no cover - compiled
    a_tab, b_tab, b_1 = _recurrence(coeffs, alpha)
    for i in prange(T.shape[0]):
        for j in range(T.shape[1]):
            v, _ = _point(min(1.0, max(-1.0, T[i, j])), coeffs, a_tab, b_tab, b_1, False)
            out[i, j] = r1[i] * r2[j] * v


@jit(parallel=True)
def _backward_kernel(T, G, coeffs, alpha, A, B):  # pragma: no cover - compiled
    a_tab, b_tab, b_1 = _recurrence(coeffs, alpha)
    for i in prange(T.shape[0]):
        for j in range(T.shape[1]):
            t = min(1.0, max(-1.0, T[i, j]))
            v, d = _point(t, coeffs, a_tab, b_tab, b_1, True)
            A[i, j], B[i, j] = _pair_terms(t, v, d, G[i, j])


def _grid(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64))


def series_columns_cpu(T, r1, r2, coeffs, alpha):
    """``series_columns(T (n, P), r1 (n,), r2 (P,), coeffs (L + 1,), alpha) -> F (n, P)``."""
    T, c = _grid(T), _grid(coeffs)
    out = np.empty(T.shape)
    with policy(T.size * c.shape[0] * 4):
        _values_kernel(T, _grid(r1), _grid(r2), c, float(alpha), out)
    return out


def series_columns_backward_cpu(T, G, coeffs, alpha):
    """``series_columns_backward(T (n, P), G (n, P), coeffs, alpha) -> (A, B)``, each ``(n, P)``."""
    T, G, c = _grid(T), _grid(G), _grid(coeffs)
    A, B = np.empty(T.shape), np.empty(T.shape)
    with policy(T.size * c.shape[0] * 6):
        _backward_kernel(T, G, c, float(alpha), A, B)
    return A, B
