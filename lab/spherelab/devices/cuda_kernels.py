r"""The CUDA kernels (numba-cuda): the device functions of the one plain-Python source
(:mod:`spherelab.sphere.gegenbauer_src`, :mod:`spherelab.kernels.matern_src`,
:mod:`spherelab.sphere.harmonics_src`) compiled with ``cuda.jit(device=True)``, and thin grid-stride
launch kernels around them. :mod:`.cuda` launches them; importing this module imports
``numba.cuda``."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels import matern_src
from ..sphere import gegenbauer_src, harmonics_src

__all__ = ["table_kernel", "derivative_kernel", "clenshaw_kernel", "series_values_kernel", "series_backward_kernel",
           "matern_values_kernel", "matern_backward_kernel", "harmonics_kernel", "harmonics_vjp_kernel",
           "load_typing_registries"]

_table_row = cuda.jit(device=True)(gegenbauer_src.table_row)
_derivative_row = cuda.jit(device=True)(gegenbauer_src.derivative_row)
_clenshaw_point = cuda.jit(device=True)(gegenbauer_src.clenshaw_point)
_pair_terms = cuda.jit(device=True)(gegenbauer_src.pair_terms)
_chordal = cuda.jit(device=True)(matern_src.chordal)
_inverse_norm_powers = cuda.jit(device=True)(harmonics_src.inverse_norm_powers)
_fill_core = cuda.jit(device=True)(harmonics_src.fill_core)
_assemble_row = cuda.jit(device=True)(harmonics_src.assemble_row)
_vjp_point = cuda.jit(device=True)(harmonics_src.vjp_point)
_shape3 = cuda.jit(device=True)(matern_src.shape3)


@cuda.jit
def table_kernel(t, L, two_a, out):  # pragma: no cover - compiled
    for i in range(cuda.grid(1), t.shape[0], cuda.gridsize(1)):
        _table_row(t[i], L, two_a, out, i)


@cuda.jit
def derivative_kernel(t, L, alpha, out):  # pragma: no cover - compiled
    for i in range(cuda.grid(1), t.shape[0], cuda.gridsize(1)):
        _derivative_row(t[i], L, alpha, out, i)


@cuda.jit
def clenshaw_kernel(t, coeffs, a_tab, b_tab, b_1, want_deriv, values, derivs):  # pragma: no cover
    for i in range(cuda.grid(1), t.shape[0], cuda.gridsize(1)):
        v, d = _clenshaw_point(t[i], coeffs, a_tab, b_tab, b_1, want_deriv)
        values[i] = v
        if want_deriv:
            derivs[i] = d


@cuda.jit
def series_values_kernel(T, r1, r2, coeffs, a_tab, b_tab, b_1, out):  # pragma: no cover - compiled
    n2 = T.shape[1]
    for k in range(cuda.grid(1), T.shape[0] * n2, cuda.gridsize(1)):
        i = k // n2
        j = k - i * n2
        v, _ = _clenshaw_point(min(1.0, max(-1.0, T[i, j])), coeffs, a_tab, b_tab, b_1, False)
        out[i, j] = r1[i] * r2[j] * v


@cuda.jit
def series_backward_kernel(T, G, coeffs, a_tab, b_tab, b_1, A, B):  # pragma: no cover - compiled
    n2 = T.shape[1]
    for k in range(cuda.grid(1), T.shape[0] * n2, cuda.gridsize(1)):
        i = k // n2
        j = k - i * n2
        t = min(1.0, max(-1.0, T[i, j]))
        v, d = _clenshaw_point(t, coeffs, a_tab, b_tab, b_1, True)
        A[i, j], B[i, j] = _pair_terms(t, v, d, G[i, j])


@cuda.jit
def matern_values_kernel(T, r1, r2, code, inv_l, variance, same, out):  # pragma: no cover
    n2 = T.shape[1]
    inv_l2 = inv_l * inv_l
    for k in range(cuda.grid(1), T.shape[0] * n2, cuda.gridsize(1)):
        i = k // n2
        j = k - i * n2
        _, rho = _chordal(T[i, j], same and i == j, inv_l)
        m, _, _ = _shape3(code, rho, inv_l2)
        out[i, j] = variance * r1[i] * r2[j] * m


@cuda.jit
def matern_backward_kernel(T, G, r1, r2, code, inv_l, variance, same, A, B, row_var, row_l):  # pragma: no cover
    inv_l2 = inv_l * inv_l
    for i in range(cuda.grid(1), T.shape[0], cuda.gridsize(1)):  # one thread per row
        acc_v = 0.0
        acc_l = 0.0
        for j in range(T.shape[1]):
            t, rho = _chordal(T[i, j], same and i == j, inv_l)
            m, dm, kt = _shape3(code, rho, inv_l2)
            g = G[i, j]
            grr = g * r1[i] * r2[j]
            acc_v += grr * m
            acc_l += grr * (-dm * rho * inv_l)
            if same and t == 1.0:
                kt = 0.0
            A[i, j] = g * variance * (m - t * kt)
            B[i, j] = g * variance * kt
        row_var[i] = acc_v
        row_l[i] = variance * acc_l


@cuda.jit
def harmonics_kernel(X, L, const, index, buf, rpow, out):  # pragma: no cover - compiled
    tid = cuda.grid(1)
    for i in range(tid, X.shape[0], cuda.gridsize(1)):  # buf, rpow: this thread's scratch rows
        _inverse_norm_powers(X[i], rpow[tid])
        _fill_core(X[i], L, buf[tid], rpow[tid])
        _assemble_row(buf[tid], const, index, out[i])


@cuda.jit
def harmonics_vjp_kernel(X, W, L, const, index, buf, bbar, ones, rho2bar, g, grad):  # pragma: no cover
    tid = cuda.grid(1)
    for i in range(tid, X.shape[0], cuda.gridsize(1)):
        _fill_core(X[i], L, buf[tid], ones[tid])
        _vjp_point(X[i], W[i], L, const, index, buf[tid], bbar[tid], rho2bar[tid], g[tid], True)
        for j in range(X.shape[1]):
            grad[i, j] = g[tid, j]


def _touch(a):  # pragma: no cover - compiled
    a[0] = 0.0


def load_typing_registries() -> None:
    """Compile one trivial kernel with NumPy's ``row_stack`` present. numba-cuda (0.30.x) registers
    an overload of ``np.row_stack`` when its typing registries load, at the first compilation,
    and NumPy 2.5 removed that alias: on NumPy >= 2.5 every kernel compilation then fails with
    ``AttributeError: module 'numpy' has no attribute 'row_stack'`` (found by the device check
    on the lent H200; NVIDIA/numba-cuda#907, which upstream will not fix). The alias is lent to
    NumPy for that one compilation and taken back: the registries load once per process."""
    if hasattr(np, "row_stack"):
        cuda.jit("void(float64[:])")(_touch)
        return
    np.row_stack = np.vstack
    try:
        cuda.jit("void(float64[:])")(_touch)
    finally:
        del np.row_stack
