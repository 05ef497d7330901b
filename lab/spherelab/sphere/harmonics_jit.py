r"""The compiled evaluation of the spherical harmonics and of their VJP (:mod:`.harmonics`):
parallel over chunks of points, each point filling a small buffer of factor values
(:math:`\rho^n P_n^\lambda(x_k/\rho)` per level) whose products are the features."""

from __future__ import annotations

import numpy as np
from numba import prange

from ..backend.jit import jit
from . import harmonics_src as src

__all__ = ["eval_kernel", "vjp_kernel"]

_CHUNK = 64  # points per parallel work item: buffers stay in L1/L2


# the per-point computations, compiled for the CPU from their one source (harmonics_src; the
# CUDA kernels compile the same functions)
_inverse_norm_powers = jit()(src.inverse_norm_powers)
_fill_core = jit()(src.fill_core)
_assemble_row = jit()(src.assemble_row)
_vjp_point = jit()(src.vjp_point)


@jit(parallel=True)
def eval_kernel(X, L, const, index, buffer_size, out):  # pragma: no cover
    n_points = X.shape[0]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        rpow = np.empty(L + 1)
        start = ch * _CHUNK
        stop = min(start + _CHUNK, n_points)
        for i in range(start, stop):
            _inverse_norm_powers(X[i], rpow)
            _fill_core(X[i], L, buf, rpow)
            _assemble_row(buf, const, index, out[i])


@jit(parallel=True)
def vjp_kernel(X, L, const, index, buffer_size, W, grad):  # pragma: no cover - compiled
    """grad[n] = d/dx sum_m W[n, m] H_m(x) at x = X[n], H_m the solid (homogeneous degree-l)
    harmonic: reverse-mode through the feature products and the factor recurrences."""
    n_points = X.shape[0]
    d = X.shape[1]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        bbar = np.empty(buffer_size)
        ones = np.ones(L + 1)
        rho2bar = np.empty(d + 1)
        g = np.empty(d)
        start = ch * _CHUNK
        stop = min(start + _CHUNK, n_points)
        for i in range(start, stop):
            _fill_core(X[i], L, buf, ones)
            _vjp_point(X[i], W[i], L, const, index, buf, bbar, rho2bar, g)
            for j in range(d):
                grad[i, j] = g[j]
