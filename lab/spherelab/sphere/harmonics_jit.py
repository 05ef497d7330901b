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


@jit()
def _columns_chunk(X, start, stop, L, const, index, scale, buf, rpow, block, acc, out, col0):  # pragma: no cover
    """out[f, col0 + i - start] = scale[i] * feature f at X[i] for i in start:stop: blocks of
    points whose factor buffers sit side by side, so that each feature's product runs across a
    block in SIMD; the product is formed in :func:`assemble_row`'s order, then scaled."""
    M = index.shape[0]
    P = index.shape[1]
    buffer_size = buf.shape[0]
    for b0 in range(start, stop, _BLOCK):
        nb = min(_BLOCK, stop - b0)
        c0 = col0 + b0 - start
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
                        out[f, c0 + p] = c * block[i0, p] * scale[b0 + p]
                elif P == 2:
                    i1 = index[f, 1]
                    for p in range(_BLOCK):
                        out[f, c0 + p] = c * block[i0, p] * block[i1, p] * scale[b0 + p]
                else:
                    i1 = index[f, 1]
                    i2 = index[f, 2]
                    for p in range(_BLOCK):
                        out[f, c0 + p] = c * block[i0, p] * block[i1, p] * block[i2, p] * scale[b0 + p]
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
                out[f, c0 + p] = acc[p] * scale[b0 + p]


@jit(parallel=True)
def eval_kernel(X, L, const, index, buffer_size, out):  # pragma: no cover
    # point by point into the rows: measured as fast as assembling blocks and transposing them
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
    pass (its columns), bitwise ``eval_kernel(...).T * scale``."""
    n_points = X.shape[0]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        rpow = np.empty(L + 1)
        block = np.empty((buffer_size, _BLOCK))
        acc = np.empty(_BLOCK)
        start = ch * _CHUNK
        _columns_chunk(X, start, min(start + _CHUNK, n_points), L, const, index, scale, buf, rpow, block, acc,
                       out, start)


@jit(parallel=True)
def vjp_kernel(X, L, const, index, buffer_size, W, grad):  # pragma: no cover - compiled
    """grad[n] = d/dx sum_m W[n, m] H_m(x) at x = X[n], H_m the solid (homogeneous degree-l)
    harmonic: reverse-mode through the feature products and the factor recurrences. The
    adjoints of the factors are formed for blocks of points at once (SIMD across points, as in
    :func:`columns_kernel`, in the order of :func:`vjp_point`'s own loop), then each point goes
    back through its recurrences."""
    n_points = X.shape[0]
    d = X.shape[1]
    M = index.shape[0]
    P = index.shape[1]
    n_chunks = (n_points + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        buf = np.empty(buffer_size)
        bbar = np.empty(buffer_size)
        ones = np.ones(L + 1)
        rho2bar = np.empty(d + 1)
        g = np.empty(d)
        block = np.empty((buffer_size, _BLOCK))
        bblock = np.empty((buffer_size, _BLOCK))
        wt = np.empty((M, _BLOCK))
        tmp = np.empty(_BLOCK)
        stop_chunk = min(ch * _CHUNK + _CHUNK, n_points)
        for b0 in range(ch * _CHUNK, stop_chunk, _BLOCK):
            nb = min(_BLOCK, stop_chunk - b0)
            if nb < _BLOCK:  # a partial block: point by point
                for i in range(b0, b0 + nb):
                    _fill_core(X[i], L, buf, ones)
                    _vjp_point(X[i], W[i], L, const, index, buf, bbar, rho2bar, g, True)
                    for j in range(d):
                        grad[i, j] = g[j]
                continue
            for p in range(_BLOCK):
                _fill_core(X[b0 + p], L, buf, ones)
                for q in range(buffer_size):
                    block[q, p] = buf[q]
                    bblock[q, p] = 0.0
                for f in range(M):
                    wt[f, p] = W[b0 + p, f] * const[f]
            for f in range(M):  # slot 0 (the constant 1) collects adjoints nobody reads
                i0 = index[f, 0]
                if P == 1:
                    for p in range(_BLOCK):
                        bblock[i0, p] += wt[f, p]
                elif P == 2:
                    i1 = index[f, 1]
                    for p in range(_BLOCK):
                        w = wt[f, p]
                        bblock[i0, p] += w * block[i1, p]
                        bblock[i1, p] += w * block[i0, p]
                elif P == 3:
                    i1 = index[f, 1]
                    i2 = index[f, 2]
                    for p in range(_BLOCK):
                        w = wt[f, p]
                        bblock[i0, p] += w * block[i1, p] * block[i2, p]
                        bblock[i1, p] += w * block[i0, p] * block[i2, p]
                        bblock[i2, p] += w * block[i0, p] * block[i1, p]
                else:
                    for k in range(P):
                        for p in range(_BLOCK):
                            tmp[p] = wt[f, p]
                        for q in range(P):
                            if q != k:
                                slot = index[f, q]
                                for p in range(_BLOCK):
                                    tmp[p] *= block[slot, p]
                        slot = index[f, k]
                        for p in range(_BLOCK):
                            bblock[slot, p] += tmp[p]
            for p in range(_BLOCK):
                for q in range(buffer_size):
                    buf[q] = block[q, p]
                    bbar[q] = bblock[q, p]
                _vjp_point(X[b0 + p], W[b0 + p], L, const, index, buf, bbar, rho2bar, g, False)
                for j in range(d):
                    grad[b0 + p, j] = g[j]
