r"""The algebra of VISH's collapsed bound (:func:`spherelab.bounds.vish.collapsed_bound`) on any
array namespace: the host's NumPy, or a device's arrays, so that a device evaluates the bound
where its statistics already are and sends back one copy of results
(:meth:`spherelab.rows.vish.ResidentLift.evaluate`).

With :math:`S = \Lambda^{1/2}`, :math:`B = I + SGS/\sigma^2 = L_BL_B^\top`, :math:`w = L_B^{-1}Sc`:

.. math:: \mathcal L = -\tfrac n2\log 2\pi - \tfrac12\log|B| - \tfrac n2\log\sigma^2
          - \frac{y^\top y}{2\sigma^2} + \frac{w^\top w}{2\sigma^4}
          - \frac{v\sum_n r_n^2 - \mathrm{tr}(\Lambda G)}{2\sigma^2}

(Dutordoir, Durrande & Hensman 2020, eqs. 3-4; the last term is dropped for the features prior),
and its derivatives by :math:`\lambda`, :math:`\sigma^2`, :math:`G` and :math:`c` (their forms:
:func:`~spherelab.bounds.vish.collapsed_bound`). Nothing here converts to a host float: the
caller decides when the results cross.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

__all__ = ["collapsed_terms"]


def collapsed_terms(xp: Any, cholesky: Callable, solve_lower: Callable, factor_inverse: Callable, lam, v: float,
                    noise: float, G, c, yy: float, sum_diag, n: int, on: float, gradients: bool) -> SimpleNamespace:
    r"""The bound's value and, with ``gradients``, its derivatives, as arrays of ``xp``.

    Parameters
    ----------
    xp
        The arrays' module (``numpy``, or ``cupy``).
    cholesky, solve_lower, factor_inverse
        :math:`B \mapsto L_B`, :math:`(L, b) \mapsto L^{-1}b` and :math:`L \mapsto (LL^\top)^{-1}` on those arrays.
    lam, G, c
        :math:`\lambda` ``(M,)`` (all > 0), :math:`G` ``(M, M)`` symmetric, :math:`c` ``(M,)``.
    v, noise, yy, n
        :math:`\kappa(1)` (an additive kernel's: ``(C,)``, one per component), :math:`\sigma^2`,
        :math:`y^\top y` and the rows' count (host numbers).
    sum_diag
        :math:`\sum_n r_n^2` (a host number or a 0-d array; ``(C,)`` per component with ``v``).
    on
        The trace term's weight: 1 (kernel prior) or 0 (features prior).

    Returns
    -------
    SimpleNamespace
        ``value`` and ``trace`` (:math:`\mathrm{tr}(\Lambda G)`), 0-d; with ``gradients`` also
        ``dlam`` ``(M,)``, ``dnoise`` (0-d), ``dG`` ``(M, M)``, ``dc`` ``(M,)``, and ``B`` and
        ``Binv`` (for the caller's rounding estimate).
    """
    s = xp.sqrt(lam)
    SGS = G * xp.outer(s, s)
    B = SGS / noise
    B[xp.diag_indices_from(B)] += 1.0
    LB = cholesky(B)
    Sc = s * c
    w = solve_lower(LB, Sc)
    logdetB = 2.0 * xp.sum(xp.log(xp.diag(LB)))
    trace_lg = xp.dot(lam, xp.diag(G))
    value = (
        -0.5 * n * np.log(2 * np.pi)
        - 0.5 * logdetB
        - 0.5 * n * np.log(noise)
        - 0.5 * yy / noise
        + 0.5 * (w @ w) / noise**2
        - 0.5 * on * (xp.sum(v * sum_diag) - trace_lg) / noise
    )
    out = SimpleNamespace(value=value, trace=trace_lg)
    if not gradients:
        return out
    Binv = factor_inverse(LB)
    z = Binv @ Sc  # B^{-1} S c ; a = A^{-1} c = S z
    a = s * z
    # diag(B^{-1} SGS) without the product itself (2 M^3 flops): the bound then costs a Cholesky
    # and potri, M^3 flops in all against 4.3 M^3
    diag_BinvSGS = xp.einsum("ij,ji->i", Binv, SGS)
    dloglam = -diag_BinvSGS / (2 * noise) + z**2 / (2 * noise**2) + on * lam * xp.diag(G) / (2 * noise)
    Ainv = Binv * xp.outer(s, s)  # A^{-1} = S B^{-1} S
    dA = -0.5 * Ainv - xp.outer(a, a) / (2 * noise**2)
    dnoise = (
        (0.5 * xp.sum(diag_BinvSGS) + 0.5 * (z @ SGS @ z) / noise**2) / noise**2
        - 0.5 * n / noise
        + 0.5 * yy / noise**2
        - (Sc @ z) / noise**3
        + 0.5 * on * (xp.sum(v * sum_diag) - trace_lg) / noise**2
    )
    out.dlam = dloglam / lam
    out.dnoise = dnoise
    out.dG = dA / noise + on * xp.diag(lam) / (2 * noise)
    out.dc = a / noise**2
    out.B, out.Binv = B, Binv
    return out
