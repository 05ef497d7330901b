r"""The spherical harmonics' per-point computations as device functions, written once in plain
Python and compiled twice: by ``numba.njit`` for the CPU kernels (:mod:`.harmonics_jit`) and by
``numba.cuda.jit(device=True)`` for the CUDA kernels (:mod:`spherelab.devices.cuda_kernels`).

Per point, a buffer of factor values (circle powers :math:`(x_1 + ix_2)^m`, then
:math:`\rho_k^n P_n^\lambda(x_k/\rho_k)` per level of the Gelfand–Tsetlin chain) is filled
(:func:`fill_core`, scaled by :func:`inverse_norm_powers`), and each feature is a constant times
a product of buffer slots (:func:`assemble_row`; the plan of :mod:`.harmonics_plan`).
:func:`vjp_point` is the reverse mode of one point.
"""

from __future__ import annotations

import math

__all__ = ["inverse_norm_powers", "fill_core", "assemble_row", "vjp_point"]


def inverse_norm_powers(x, rpow):  # pragma: no cover - compiled
    """rpow[n] = |x|^(-n), correctly rounded for |x| within rounding of 1.

    The harmonics are evaluated as homogeneous polynomials, so a row whose norm is 1 + 1e-16
    (as any normalised float row is) would scale all N(l, d) harmonics of degree l by the same
    factor 1 + l e-16: a rounding bias that accumulates in the addition theorem. |x|^2 - 1 is
    computed without rounding (Dekker products, two-sum) and the powers from it.
    """
    hi = 0.0
    lo = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        p = v * v
        cv = 134217729.0 * v
        vh = cv - (cv - v)
        vl = v - vh
        e = ((vh * vh - p) + 2.0 * vh * vl) + vl * vl
        s = hi + p
        bp = s - hi
        err = (hi - (s - bp)) + (p - bp)
        hi = s
        lo += err + e
    log_r2 = math.log1p((hi - 1.0) + lo)
    for n in range(rpow.shape[0]):
        rpow[n] = math.exp(-0.5 * n * log_r2)


def fill_core(x, L, buf, rpow):  # pragma: no cover - compiled
    """Factor values scaled by rpow[degree] (ones: the solid harmonics' raw factors)."""
    d = x.shape[0]
    buf[0] = 1.0
    x0 = x[0]
    x1 = x[1]
    c = 1.0
    s = 0.0
    for m in range(1, L + 1):
        c_new = c * x0 - s * x1
        s = s * x0 + c * x1
        c = c_new
        buf[2 * m - 1] = c * rpow[m]
        buf[2 * m] = s * rpow[m]
    rho2 = x0 * x0 + x1 * x1
    T = L * (L + 1) // 2
    for k in range(3, d + 1):
        xk = x[k - 1]
        rho2 += xk * xk
        base = 1 + 2 * L + (k - 3) * T
        off = 0
        for m in range(L):
            two_lam = 2.0 * m + (k - 2)
            g_prev = 1.0
            g_cur = xk
            buf[base + off] = g_cur * rpow[1]
            off += 1
            for j in range(1, L - m):
                g_next = ((2.0 * j + two_lam) * xk * g_cur - j * rho2 * g_prev) / (j + two_lam)
                g_prev = g_cur
                g_cur = g_next
                buf[base + off] = g_cur * rpow[j + 1]
                off += 1


def assemble_row(buf, const, index, row):  # pragma: no cover - compiled
    """row[f] = const[f] * prod_p buf[index[f, p]]: the features from the factor buffer."""
    M = index.shape[0]
    P = index.shape[1]
    if P == 1:
        for f in range(M):
            row[f] = const[f] * buf[index[f, 0]]
    elif P == 2:
        for f in range(M):
            row[f] = const[f] * buf[index[f, 0]] * buf[index[f, 1]]
    else:
        for f in range(M):
            v = const[f]
            for p in range(P):
                v *= buf[index[f, p]]
            row[f] = v


def vjp_point(x, wrow, L, const, index, buf, bbar, rho2bar, g, accumulate):  # pragma: no cover - compiled
    """The reverse mode of one point's features: ``g`` (d,) = d/dx sum_m wrow[m] H_m(x), given the
    raw factors ``buf`` of x (:func:`fill_core` with unit scales); ``bbar``, ``rho2bar`` are
    scratch of the sizes of ``buf`` and d + 1. With ``accumulate`` False, ``bbar`` already holds
    the adjoints of the factors (a caller that formed them for several points at once) and
    ``wrow`` is not read."""
    d = x.shape[0]
    M = index.shape[0]
    P = index.shape[1]
    T = L * (L + 1) // 2
    if accumulate:
        for q in range(bbar.shape[0]):
            bbar[q] = 0.0
    for f in range(M if accumulate else 0):
        w = wrow[f] * const[f]
        if w == 0.0:
            continue
        for p in range(P):
            slot = index[f, p]
            if slot == 0:
                continue
            prod = w
            for q in range(P):
                if q != p:
                    prod *= buf[index[f, q]]
            bbar[slot] += prod
    for j in range(d):
        g[j] = 0.0
        rho2bar[j] = 0.0
    rho2bar[d] = 0.0
    # level recurrences, from the last level down (rho_k^2 adjoints collected per k)
    rho2 = 0.0
    for j in range(d):
        rho2 += x[j] * x[j]
    for k in range(d, 2, -1):
        xk = x[k - 1]
        base = 1 + 2 * L + (k - 3) * T
        off = 0
        for m in range(L):
            nmax = L - m
            two_lam = 2.0 * m + (k - 2)
            # recompute G_0..G_nmax for this (k, m) (cheap, avoids storing them)
            gbar_next = 0.0  # adjoint of G_{j+1}
            gbar_cur = bbar[base + off + nmax - 1]  # adjoint of G_nmax (slot only)
            # walk j = nmax - 1 .. 1: G_{j+1} = a_j xk G_j - b_j rho2 G_{j-1}
            for j in range(nmax - 1, 0, -1):
                a_j = (2.0 * j + two_lam) / (j + two_lam)
                b_j = j / (j + two_lam)
                g_j = buf[base + off + j - 1]
                g_jm1 = 1.0 if j == 1 else buf[base + off + j - 2]
                # gbar_cur is the adjoint of G_{j+1}
                g[k - 1] += gbar_cur * a_j * g_j
                rho2bar[k] += -gbar_cur * b_j * g_jm1
                new_cur = bbar[base + off + j - 1] + gbar_cur * a_j * xk + gbar_next
                gbar_next = -gbar_cur * b_j * rho2
                gbar_cur = new_cur
            # G_1 = xk
            g[k - 1] += gbar_cur
            off += nmax
        rho2 -= xk * xk  # rho_{k-1}^2 for the next (lower) level
    # circle: (c_m + i s_m) = (x0 + i x1)^m, slots 2m-1 (cos) and 2m (sin)
    x0 = x[0]
    x1 = x[1]
    cbar = 0.0
    sbar = 0.0
    for m in range(L, 0, -1):
        cbar += bbar[2 * m - 1]
        sbar += bbar[2 * m]
        if m == 1:
            g[0] += cbar
            g[1] += sbar
        else:
            c_prev = buf[2 * m - 3]
            s_prev = buf[2 * m - 2]
            g[0] += cbar * c_prev + sbar * s_prev
            g[1] += -cbar * s_prev + sbar * c_prev
            new_c = cbar * x0 + sbar * x1
            new_s = -cbar * x1 + sbar * x0
            cbar = new_c
            sbar = new_s
    # rho_k^2 = sum_{j <= k} x_j^2
    acc = 0.0
    for k in range(d, 0, -1):
        if k >= 3:
            acc += rho2bar[k]
        g[k - 1] += 2.0 * x[k - 1] * acc
