"""Tolerances from the computation's rounding, never from what one machine's results happened to be.

Two evaluations that differ only in the order of their sums — another chunk size, another thread
count, Dask's blocks instead of memory's chunks — differ by at most twice the rounding of one sum:
a sum of n terms computed in any order is within :math:`\\gamma_{n-1}\\sum_i |x_i|` of the exact
sum, :math:`\\gamma_k = ku/(1 - ku)`, :math:`u = \\varepsilon/2` (Higham 2002, *Accuracy and
Stability of Numerical Algorithms*, §4.2, eq. 4.4); a dot product of length n within
:math:`\\gamma_n \\sum_i |x_i y_i|` (§3.1, eq. 3.5). A result computed from such sums through a
solve of condition :math:`\\kappa` moves by up to :math:`\\kappa` times that (first order).
"""

from __future__ import annotations

import numpy as np

EPS = float(np.finfo(np.float64).eps)


def gamma(n: float) -> float:
    """:math:`\\gamma_n = nu / (1 - nu)`, the relative rounding bound of n floating-point operations."""
    u = EPS / 2
    if n * u >= 1:
        raise ValueError(f"gamma({n}): n u >= 1, no bound")
    return n * u / (1 - n * u)


def reordered(n: float, magnitude, condition: float = 1.0):
    """The largest difference between two evaluations of a sum of ``n`` terms whose absolute values
    add up to ``magnitude`` (an array: one bound per entry), summed in two different orders and
    passed through a computation of relative condition ``condition``."""
    return 2 * gamma(n) * condition * np.asarray(magnitude, dtype=float)


def close_by_rounding(got, expected, n: float, magnitude, condition: float = 1.0) -> None:
    """Assert ``|got - expected| <= reordered(n, magnitude, condition)`` entry by entry, naming the
    worst entry and its bound where it fails."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    bound = np.broadcast_to(reordered(n, magnitude, condition), expected.shape)
    excess = np.abs(got - expected) - bound
    if excess.size and not np.all(excess <= 0):
        i = np.unravel_index(int(np.argmax(excess)), excess.shape) if excess.ndim else ()
        raise AssertionError(f"entry {i}: {got[i]!r} against {expected[i]!r}, difference "
                             f"{abs(got[i] - expected[i]):.3g} beyond the rounding bound {bound[i]:.3g} "
                             f"({n:g} terms, condition {condition:g})")
