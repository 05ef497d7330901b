"""The CPU implementations of the device seam (:mod:`.ops`): the package's NumPy / Numba code."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular as _solve

from ..backend.ops import register
from ..chunks import chunk_rows, host_rows
from ..kernels.matern_jit import matern_backward, matern_values
from ..linalg import chol_inverse, cholesky_or_explain, forward_solve
from ..sphere.gegenbauer_jit import clenshaw_cpu, derivative_table_cpu, table_cpu
from ..sphere.harmonics import harmonic_columns_cpu, harmonics_cpu, harmonics_vjp_cpu
from ..sphere.series_columns import series_columns_backward_cpu, series_columns_cpu

__all__: list[str] = []


register("cpu", "harmonics")(harmonics_cpu)
register("cpu", "harmonics_vjp")(harmonics_vjp_cpu)
register("cpu", "device_harmonics_vjp")(harmonics_vjp_cpu)
register("cpu", "harmonic_columns")(harmonic_columns_cpu)


register("cpu", "gegenbauer_table")(table_cpu)
register("cpu", "gegenbauer_derivative_table")(derivative_table_cpu)
register("cpu", "clenshaw")(clenshaw_cpu)
register("cpu", "series_columns")(series_columns_cpu)
register("cpu", "series_columns_backward")(series_columns_backward_cpu)


register("cpu", "matern_values")(matern_values)
register("cpu", "matern_backward")(matern_backward)
register("cpu", "cholesky")(cholesky_or_explain)


@register("cpu", "zonal_columns")
def zonal_columns(T, r1, r2, code, lengthscale, variance):
    return matern_values(T, r1, r2, code, lengthscale, variance, False)


@register("cpu", "zonal_columns_backward")
def zonal_columns_backward(T, G, r1, r2, code, lengthscale, variance):
    return matern_backward(T, G, r1, r2, code, lengthscale, variance, False)


@register("cpu", "device_solve")
def device_solve(L, B, trans=0):
    # as a GPU's: no finiteness scan, a non-finite factor gives non-finite results, which the rows
    # floor's copy back judges (an optimiser's trial point then goes to the host's checks)
    if trans == 0:  # the rows floor's columns: dtrsm on either memory order
        return forward_solve(L, B)
    return _solve(L, B, lower=True, trans=trans, check_finite=False)


# LAPACK's potri: a third of the flops of two solves against the identity
register("cpu", "factor_inverse")(chol_inverse)


@register("cpu", "device_constant")
def device_constant(a):
    return a


@register("cpu", "array_namespace")
def array_namespace():
    return np


@register("cpu", "gram_update")
def gram_update(G, c, A, y):
    # G += A A^T by NumPy's dgemm: measured 4x faster here than SciPy's dsyrk (a different
    # OpenBLAS build), despite computing both triangles
    G += A @ A.T
    c += A @ y


@register("cpu", "solve_triangular")
def solve_triangular(L, B, trans=0):
    return _solve(L, B, lower=True, trans=trans)


@register("cpu", "device_harmonics")
def device_harmonics(X, plan):
    return harmonics_cpu(X, plan, np.empty((X.shape[0], plan.degrees.shape[0])))


register("cpu", "stream_rows")(host_rows)
register("cpu", "pass_rows")(chunk_rows)
register("cpu", "to_device")(np.asarray)
register("cpu", "to_host")(np.asarray)
