r"""The Matérn spectra's levels as power series in the inverse lengthscale, for lengthscales where
quadrature loses the small levels' digits.

With :math:`\kappa(t) = p(a)e^{-a} = \sum_k c_k a^k`, :math:`a = s\rho`, :math:`\rho = \sqrt{2 - 2t}`,
:math:`s = \sqrt{2\nu}/\ell`, every level is

.. math:: \lambda_n = \sum_k c_k s^k \mu_{k,n}, \qquad
          \mu_{k,n} = c_d\int_{-1}^1 (2 - 2t)^{k/2} P_n(t)\,(1 - t^2)^{\alpha - 1/2}\,dt,

and :math:`\mu_{k,n}` is a ratio of Gamma functions (the Jacobi-polynomial moment
:math:`\int (1-x)^{r}(1+x)^{b}P_n^{(a,b)}(x)\,dx`, Gradshteyn & Ryzhik 7.391.4, with
:math:`a = b = \alpha - 1/2` and :math:`r = a + k/2`); it vanishes for even :math:`k < 2n` (a
polynomial of degree :math:`k/2 < n` in t). Quadrature of :math:`\kappa` itself rounds every level
to about :math:`\varepsilon\max\kappa`, so a level far below the constant keeps only the digits it
has above that (Matérn-5/2 on :math:`S^8` at lengthscale 3: level 8 was 2e-9 off); the series'
terms are each exact to a few ulps, and where they do not cancel (moderate :math:`s`) their sum
keeps the level's own digits. :class:`~spherelab.kernels.Matern` takes, level by level, whichever of
the two has the smaller error bound.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln

__all__ = ["series_levels"]


def _moments(dim: int, L: int, K: int) -> np.ndarray:
    r""":math:`\mu_{k,n}` ``(K, L + 1)`` (module docstring)."""
    a = (dim - 3) / 2.0
    k = np.arange(K, dtype=np.float64)[:, None]
    n = np.arange(L + 1, dtype=np.float64)[None, :]
    r = a + k / 2.0
    even = (k % 2 == 0)
    half = k / 2.0
    # (-k/2)_n: zero for even k below 2n; its sign is that of its negative factors' count
    zero = even & (n > half)
    negatives = np.where(even, n, np.minimum(n, np.ceil(half)))
    sign = np.where(zero, 0.0, (-1.0) ** negatives)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_poch = np.where(even, gammaln(half + 1) - gammaln(np.maximum(half - n, 0) + 1),
                            gammaln(n - half) - gammaln(-half))
    log_poch = np.where(zero, 0.0, log_poch)
    log_integral = ((a + r + 1) * math.log(2.0) + gammaln(r + 1) + gammaln(a + n + 1) - gammaln(n + 1)
                    - gammaln(a + r + n + 2) + log_poch)
    log_p1 = gammaln(a + n + 1) - gammaln(a + 1) - gammaln(n + 1)  # P_n^{(a,a)}(1)
    log_cd = math.lgamma(dim / 2.0) - 0.5 * math.log(math.pi) - math.lgamma((dim - 1) / 2.0)
    return sign * np.exp(log_cd + half * math.log(2.0) + log_integral - log_p1)


@lru_cache(maxsize=64)
def _cached_moments(dim: int, L: int, K: int) -> np.ndarray:
    out = _moments(dim, L, K)
    out.setflags(write=False)
    return out


def series_levels(coeffs: np.ndarray, s: float, dim: int, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Levels 0..L of :math:`\sum_k c_k (s\rho)^k` on :math:`S^{d-1}` (module docstring), their
    derivatives in :math:`\log s` (:math:`\sum_k k c_k s^k\mu_{k,n}`) and a bound on each level's
    error: the rounding of the terms and their sum, :math:`16\varepsilon\sum_k|c_k s^k\mu_{k,n}|`,
    plus twice the last term (the series' truncation)."""
    K = len(coeffs)
    mu = _cached_moments(int(dim), int(L), K)
    powers = np.asarray(coeffs, dtype=np.float64) * s ** np.arange(K, dtype=np.float64)
    terms = powers[:, None] * mu
    values = terms.sum(axis=0)
    dlog = (np.arange(K, dtype=np.float64)[:, None] * terms).sum(axis=0)
    bound = 16.0 * np.finfo(np.float64).eps * np.abs(terms).sum(axis=0) + 2.0 * np.abs(terms[-4:]).max(axis=0)
    return values, dlog, bound
