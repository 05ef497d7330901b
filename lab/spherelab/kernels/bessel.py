r"""The modified Bessel functions the squared-exponential spectrum needs, to the last digits.

:math:`\lambda_n \propto e^{-z} z^{-\alpha} I_{n+\alpha}(z)` (Dutordoir et al. 2020, App. B), so its
derivative in :math:`z` needs :math:`I_{\nu+1}/I_\nu`; written as
:math:`d\log\lambda_n/dz = n/z - q_\nu` with :math:`q_\nu = 1 - I_{\nu+1}(z)/I_\nu(z)`, it loses no digit
once :math:`q_\nu` is known to full relative precision — but ``1 - ratio`` evaluated as written
loses :math:`\log_{10} z` of them (:math:`q_\nu \approx (\nu + 1/2)/z` for large z). This module computes
:math:`q_\nu` without that subtraction.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ive_large", "ratio_complement"]


def ive_large(nu: np.ndarray, z: float, terms: int = 8) -> np.ndarray:
    r""":math:`e^{-z}I_\nu(z)` for :math:`z \ge 10^8` by its asymptotic series
    :math:`(2\pi z)^{-1/2}\sum_k (-1)^k \prod_{j \le k}(4\nu^2 - (2j-1)^2) / (k!\,(8z)^k)`
    (Abramowitz & Stegun 9.7.1): each term is at most :math:`4\nu^2/8z` times the last."""
    mu = 4.0 * np.asarray(nu, dtype=np.float64) ** 2
    term, total = np.ones_like(mu), np.ones_like(mu)
    for k in range(1, terms):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * z)
        total = total + term
    return total / math.sqrt(2.0 * math.pi * z)


def _asymptotic(nu: np.ndarray, z: float, terms: int = 30) -> np.ndarray:
    r""":math:`z\,q_\nu` from A&S 9.7.1 for :math:`I_\nu` and :math:`I_{\nu+1}` together, valid for
    :math:`\nu^2 \le z/2` (each term then at most a quarter of the last). The two series' leading 1s
    cancel exactly on paper, so the difference is summed term by term:
    :math:`z(S_\nu - S_{\nu+1}) = (\nu + \tfrac12) + \sum_{k \ge 2}(-1)^k (a_k(\nu) - a_k(\nu+1)) z^{1-k}`,
    each difference of products by the product rule, never as a subtraction of the products."""
    mu, mu1 = 4.0 * nu**2, 4.0 * (nu + 1.0) ** 2
    a, a1, diff = np.ones_like(nu), np.ones_like(nu), np.zeros_like(nu)  # a_k(nu), a_k(nu + 1), their difference
    s_nu, z_diff = np.ones_like(nu), np.zeros_like(nu)
    for k in range(1, terms):
        c = (2 * k - 1) ** 2
        scale = 1.0 / (k * 8.0 * z)
        # a_k - a1_k = (mu - c) (a_{k-1} - a1_{k-1}) + (mu - mu1) a1_{k-1}, all over 8 k z
        diff = ((mu - c) * diff + (mu - mu1) * a1) * scale
        a, a1 = a * (mu - c) * scale, a1 * (mu1 - c) * scale
        sign = -1.0 if k % 2 else 1.0
        s_nu = s_nu + sign * a
        z_diff = z_diff + sign * diff * z
    return z_diff / s_nu


def ratio_complement(alpha: float, L: int, z: float) -> np.ndarray:
    r""":math:`z\,q_\nu`, :math:`q_\nu = 1 - I_{\nu+1}(z)/I_\nu(z)`, for :math:`\nu = \alpha + n`,
    :math:`n = 0..L` (shape ``(L + 1,)``), to full relative precision for :math:`z > 0`.

    Where :math:`\nu^2 \le z/2` for every level, the asymptotic series (:func:`_asymptotic`). Elsewhere the
    recurrence :math:`I_{\nu-1} = (2\nu/z) I_\nu + I_{\nu+1}` run downwards,
    :math:`q_{\nu-1} = (2\nu/z - q_\nu)/(2\nu/z + 1 - q_\nu)`: the subtraction on top never cancels
    (:math:`q_\nu < 2\nu/z` with a margin), and an error in :math:`q_\nu` reaches :math:`q_{\nu-1}`
    multiplied by :math:`(2\nu/z + 1 - q_\nu)^{-2} < 1`. It starts 60 orders above
    :math:`\max(\nu, z)`, where Amos's (1974) approximation
    :math:`I_{\nu+1}/I_\nu \approx z/(\nu + \frac12 + \sqrt{(\nu + \frac32)^2 + z^2})` is close and the
    damping erases what is left of its error.
    """
    nu = alpha + np.arange(L + 1, dtype=np.float64)
    if nu[-1] ** 2 <= 0.5 * z:
        return _asymptotic(nu, z)
    top = alpha + L + 60 + max(0, math.ceil(min(z, 1e7) - alpha - L))
    root = math.hypot(top + 1.5, z)
    q = (top + 0.5 + (top + 1.5) ** 2 / (root + z)) / (top + 0.5 + root)
    out = np.empty(L + 1)
    v = top
    while v > alpha:
        if v - alpha <= L:
            out[int(round(v - alpha))] = q
        a = 2.0 * v / z
        q = (a - q) / (a + 1.0 - q)
        v -= 1.0
    out[0] = q
    return z * out
