r"""The compiled evaluation of the spherical harmonics and of their VJP (:mod:`.harmonics`):
parallel over chunks of points, each point filling a small buffer of factor values
(:math:`\rho^n P_n^\lambda(x_k/\rho)` per level) whose products are the features."""

from __future__ import annotations

import numpy as np
from numba import prange

from ..backend.jit import jit
from . import harmonics_src as src

__all__ = ["eval_kernel", "columns_kernel", "vjp_kernel"]

_CHUNK = 64  # points per parallel work item: buffers stay in L1/L2
_BLOCK = 16  # points assembled together by columns_kernel: SIMD across points, one index load each


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
def columns_kernel(X, L, const, index, buffer_size, scale, out):  # pragma: no cover - compiled
    """out[f, i] = scale[i] * feature f at X[i]: the transposed, scaled layout of the statistics
    pass (its columns). Points are taken in blocks whose factor buffers sit side by side, so each
    feature's product runs across a block of points in SIMD; the product is formed in the same
    order as :func:`eval_kernel` then scaled, so the values are bitwise those of
    ``eval_kernel(...).T * scale``."""
    n_points = X.shape[0]
    M = index.shape[0]
    P = index.shape[1]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        rpow = np.empty(L + 1)
        block = np.empty((buffer_size, _BLOCK))
        acc = np.empty(_BLOCK)
        stop_chunk = min(ch * _CHUNK + _CHUNK, n_points)
        for b0 in range(ch * _CHUNK, stop_chunk, _BLOCK):
            nb = min(_BLOCK, stop_chunk - b0)
            for p in range(nb):
                _inverse_norm_powers(X[b0 + p], rpow)
                _fill_core(X[b0 + p], L, buf, rpow)
                for q in range(buffer_size):
                    block[q, p] = buf[q]
            if nb == _BLOCK and P <= 3:  # fixed trip counts: the loops vectorise
                for f in range(M):
                    c = const[f]
                    i0 = index[f, 0]
                    if P == 1:
                        for p in range(_BLOCK):
                            out[f, b0 + p] = c * block[i0, p] * scale[b0 + p]
                    elif P == 2:
                        i1 = index[f, 1]
                        for p in range(_BLOCK):
                            out[f, b0 + p] = c * block[i0, p] * block[i1, p] * scale[b0 + p]
                    else:
                        i1 = index[f, 1]
                        i2 = index[f, 2]
                        for p in range(_BLOCK):
                            out[f, b0 + p] = c * block[i0, p] * block[i1, p] * block[i2, p] * scale[b0 + p]
                continue
            for f in range(M):
                c = const[f]
                for p in range(nb):
                    acc[p] = c
                for q in range(P):
                    slot = index[f, q]
                    for p in range(nb):
                        acc[p] *= block[slot, p]
                for p in range(nb):
                    out[f, b0 + p] = acc[p] * scale[b0 + p]


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
