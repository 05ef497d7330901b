r"""Funk–Hecke coefficients of shape functions on :math:`[-1, 1]`.

For a shape :math:`s` (a zonal kernel :math:`\kappa` or an activation :math:`\sigma`) on
:math:`S^{d-1}`, with :math:`\alpha = (d-2)/2` and the normalised measure
(``docs/design.md`` §1),

.. math:: c_\ell = \frac{\omega_d}{C_\ell^\alpha(1)} \int_{-1}^{1} s(t)\, C_\ell^\alpha(t)\,
          (1-t^2)^{(d-3)/2}\, dt
          = \omega_d \int_{-1}^{1} s(t)\, P_\ell^\alpha(t)\, (1-t^2)^{(d-3)/2}\, dt,

so that :math:`s(t) = \sum_\ell c_\ell Z_\ell(t)` and :math:`s(1) = \sum_\ell c_\ell N(\ell, d)`.

Two quadratures, both with the weight built in (never multiplied into the integrand as a
non-smooth factor, which ruins convergence — Gauss–Legendre in t with an explicit weight is
107 % wrong at 50 nodes for the arc-cosine kernel in d = 4):

* ``method="angle"`` (default): :math:`t = \cos\theta` turns the weight into
  :math:`\sin^{d-2}\theta\,d\theta`, an entire function; Gauss–Legendre in :math:`\theta` on
  each piece between declared kinks. Every shape of the library is analytic in :math:`\theta` on
  each piece — including the :math:`(1 \mp t)^{1/2}` endpoint behaviour of the arc-cosine kernels
  and of Matérn kernels at chordal distance, which no polynomial in t captures — so convergence is
  geometric (d = 2 needs no special case: the weight is 1).
* ``method="gegenbauer"``: Gauss–Gegenbauer nodes for :math:`(1-t^2)^{(d-3)/2}` (d = 2:
  Gauss–Chebyshev), Gauss–Jacobi on end pieces when kinks split the interval. Exact for
  polynomial shapes at few nodes; slow for shapes with endpoint square roots, and SciPy's
  Gauss–Jacobi nodes lose accuracy (~1e-11) beyond a few hundred nodes.

The node count doubles until two successive estimates agree to ``rtol`` (or stop improving: the
floating-point floor); their difference is the returned error estimate. Levels that vanish by
parity are set to exactly 0.

References: Funk–Hecke theorem (Dutordoir, PhD report Thm. 6, eq. A.9); Gautschi, *Orthogonal polynomials:
computation and approximation* (2004) for Gauss–Jacobi rules.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import roots_jacobi, roots_legendre

from .._validation import check_allocation, check_bool, check_degree, check_dim, check_int, check_positive
from ..linalg import NumericalFailure
from .gegenbauer import normalized_gegenbauer_table
from .special import alpha_of_dim, log_omega

__all__ = ["funk_hecke", "funk_hecke_with_rule", "FunkHeckeRule", "funk_hecke_rule", "PARITIES"]

PARITIES = (None, "even", "odd", "even_plus_linear")
_MAX_NODES = 8192


@dataclass(frozen=True)
class FunkHeckeRule:
    r"""A fixed quadrature rule that maps shape values at ``nodes`` to coefficients.

    ``coefficients = shape(nodes) @ matrix`` with ``matrix[i, l] = w_i P_l(t_i)`` (including
    :math:`\omega_d`); ``gaps`` are :math:`1 - t_i` with the digits that ``nodes`` round away near
    :math:`t = 1` (:math:`2\sin^2(\theta_i/2)` for the angle rule), for shapes that spike there.
    Reuse it to recompute a spectrum cheaply (one shape evaluation and one
    matrix-vector product) inside an optimiser; derivatives with respect to hyper-parameters use
    the same rule applied to the shape's derivative.
    """

    dim: int
    max_degree: int
    nodes: np.ndarray  # (Q,) points t in [-1, 1]
    matrix: np.ndarray  # (Q, L + 1)
    gaps: np.ndarray  # (Q,) 1 - t_i, exact to the rounding of the node's own angle

    def apply(self, values: np.ndarray) -> np.ndarray:
        """Coefficients from shape values at :attr:`nodes` (trailing axis = nodes)."""
        return np.asarray(values) @ self.matrix


def _pieces(kinks: tuple[float, ...]) -> list[tuple[float, float]]:
    edges = [-1.0, *kinks, 1.0]
    return list(zip(edges[:-1], edges[1:]))


@lru_cache(maxsize=256)
def _rule(dim: int, L: int, kinks: tuple[float, ...], method: str, n: int) -> FunkHeckeRule:
    a = (dim - 3) / 2.0  # weight exponent (1 - t^2)^a
    nodes, weights, gaps = [], [], []
    if method == "gegenbauer":
        for lo, hi in _pieces(kinks):
            half = (hi - lo) / 2.0
            if lo == -1.0 and hi == 1.0:
                u, w = roots_jacobi(n, a, a)
                t, wt = u, w
            elif hi == 1.0:  # singular factor (1 - t)^a at the right end
                u, w = roots_jacobi(n, a, 0.0)
                t = lo + half * (u + 1.0)
                wt = w * half ** (a + 1.0) * (1.0 + t) ** a
            elif lo == -1.0:  # singular factor (1 + t)^a at the left end
                u, w = roots_jacobi(n, 0.0, a)
                t = lo + half * (u + 1.0)
                wt = w * half ** (a + 1.0) * (1.0 - t) ** a
            else:
                u, w = roots_legendre(n)
                t = lo + half * (u + 1.0)
                wt = w * half * (1.0 - t * t) ** a
            nodes.append(t)
            weights.append(wt)
            gaps.append(1.0 - t)
    else:  # angle
        thetas = sorted(math.acos(k) for k in kinks)
        edges = [0.0, *thetas, math.pi]
        for lo, hi in zip(edges[:-1], edges[1:]):
            u, w = roots_legendre(n)
            half = (hi - lo) / 2.0
            theta = lo + half * (u + 1.0)
            nodes.append(np.cos(theta))
            weights.append(w * half * np.sin(theta) ** (dim - 2))
            # cos(theta) keeps ~1e-16 absolute near t = 1: a shape spiking within 1e-4 rad of it
            # (Matern at a short lengthscale on the circle) lost six digits to 1 - cos(theta)
            gaps.append(2.0 * np.sin(0.5 * theta) ** 2)
    t = np.concatenate(nodes)
    w = np.concatenate(weights) * math.exp(log_omega(dim))
    matrix = w[:, None] * normalized_gegenbauer_table(L, alpha_of_dim(dim), t)
    gap = np.concatenate(gaps)
    for array in (t, matrix, gap):
        array.setflags(write=False)
    return FunkHeckeRule(dim, L, t, matrix, gap)


def _check_kinks(kinks: Sequence[float]) -> tuple[float, ...]:
    out = []
    for k in kinks:
        k = float(k)
        if not (-1.0 < k < 1.0):
            raise ValueError(f"kinks must lie strictly inside (-1, 1), got {k}")
        out.append(k)
    return tuple(sorted(set(out)))


def _check_method(method: str) -> str:
    if method not in ("gegenbauer", "angle"):
        raise ValueError(f"method must be 'gegenbauer' or 'angle', got {method!r}")
    return method


def funk_hecke_rule(
    dim: int,
    max_degree: int,
    num_nodes: int,
    *,
    kinks: Sequence[float] = (),
    method: str = "angle",
) -> FunkHeckeRule:
    """The quadrature rule used by :func:`funk_hecke`, with ``num_nodes`` nodes per piece
    (cached; see :class:`FunkHeckeRule`)."""
    n = check_int(num_nodes, "num_nodes", minimum=1, maximum=_MAX_NODES)
    return _rule(check_dim(dim), check_degree(max_degree), _check_kinks(kinks), _check_method(method), n)


def _evaluate(shape: Callable, t: np.ndarray) -> np.ndarray:
    values = np.asarray(shape(t), dtype=np.float64)
    if values.shape != t.shape:
        raise ValueError(
            f"shape must be vectorised: shape(t) returned an array of shape {values.shape} "
            f"for t of shape {t.shape}"
        )
    if not np.all(np.isfinite(values)):
        bad = t[~np.isfinite(values)][:3]
        # a NumericalFailure (a ValueError): an optimiser's trial point steps back from it
        raise NumericalFailure(f"shape returned NaN or inf on [-1, 1] (e.g. at t = {bad.tolist()})")
    return values


def apply_parity(coeffs: np.ndarray, parity: str | None) -> np.ndarray:
    """Set the levels that vanish by symmetry to exactly zero (copy)."""
    if parity not in PARITIES:
        raise ValueError(f"parity must be one of {PARITIES}, got {parity!r}")
    c = np.array(coeffs, dtype=np.float64, copy=True)
    ell = np.arange(c.shape[-1])
    if parity == "even":
        c[..., ell % 2 == 1] = 0.0
    elif parity == "odd":
        c[..., ell % 2 == 0] = 0.0
    elif parity == "even_plus_linear":
        c[..., (ell % 2 == 1) & (ell >= 3)] = 0.0
    return c


def funk_hecke_with_rule(
    shape: Callable[[np.ndarray], np.ndarray],
    dim: int,
    max_degree: int,
    *,
    kinks: Sequence[float] = (),
    parity: str | None = None,
    method: str = "angle",
    rtol: float = 1e-14,
    num_nodes: int | None = None,
    of_gap: bool = False,
) -> tuple[np.ndarray, np.ndarray, FunkHeckeRule]:
    """:func:`funk_hecke` returning ``(coefficients, error estimate, converged rule)``; apply the
    rule to a hyper-parameter derivative of the shape (at ``rule.nodes``, or ``rule.gaps`` with
    ``of_gap``) to get the spectrum's derivative."""
    dim = check_dim(dim)
    L = check_degree(max_degree)
    check_allocation(8.0 * (L + 1.0) * (L + 64.0), f"max_degree = {L:,} (a quadrature of {L + 1:,} levels)",
                     "lower max_degree")
    rtol = check_positive(rtol, "rtol")
    kinks_t = _check_kinks(kinks)
    method = _check_method(method)
    if parity not in PARITIES:
        raise ValueError(f"parity must be one of {PARITIES}, got {parity!r}")
    if not callable(shape):
        raise TypeError("shape must be a callable s(t) on [-1, 1]")
    of_gap = check_bool(of_gap, "of_gap")

    def estimate(n: int) -> np.ndarray:
        rule = _rule(dim, L, kinks_t, method, n)
        return rule.apply(_evaluate(shape, rule.gaps if of_gap else rule.nodes))

    if num_nodes is not None:
        n = check_int(num_nodes, "num_nodes", minimum=2, maximum=_MAX_NODES)
        fine = estimate(n)
        err = np.abs(fine - estimate(max(1, n // 2)))
        n_used = n
    else:
        n = max(32, L + 16) if method == "gegenbauer" else max(48, L + dim // 2 + 24)
        coarse = estimate(n)
        fine, err, n_used = coarse, np.full(L + 1, np.inf), n
        while 2 * n <= _MAX_NODES:
            candidate = estimate(2 * n)
            gap = np.abs(candidate - coarse)
            if gap.max() > 0.5 * err.max():
                break  # no longer improving: the rounding floor (or an undeclared kink)
            fine, err, n_used = candidate, gap, 2 * n
            if gap.max() <= rtol * max(np.abs(fine).max(), np.finfo(float).tiny):
                break
            coarse, n = candidate, 2 * n
        scale = max(np.abs(fine).max(), np.finfo(float).tiny)
        # errors below 1e-12 of the shape's own size are rounding, however small the
        # coefficients (a spike at t = 1 puts its mass above degree L; sums over thousands of
        # nodes were seen to differ by 7e-14 of a Matern shape's size at the rounding floor)
        size = float(np.abs(_evaluate(shape, np.zeros(1) if of_gap else np.ones(1)))[0])
        if err.max() > 1e-10 * scale and err.max() > 1e-12 * size:
            warnings.warn(
                f"funk_hecke: estimates still differ by {err.max():.2e} at {2 * n} nodes per "
                "piece; declare the shape's kinks, or use method='angle'",
                RuntimeWarning,
                stacklevel=2,
            )
    coeffs = apply_parity(fine, parity)
    err = np.where(coeffs == 0.0, 0.0, err) if parity is not None else err
    return coeffs, err, _rule(dim, L, kinks_t, method, n_used)


def funk_hecke(
    shape: Callable[[np.ndarray], np.ndarray],
    dim: int,
    max_degree: int,
    *,
    kinks: Sequence[float] = (),
    parity: str | None = None,
    method: str = "angle",
    rtol: float = 1e-14,
    num_nodes: int | None = None,
    return_error: bool = False,
    of_gap: bool = False,
) -> Any:
    r"""Funk–Hecke coefficients :math:`c_0..c_L` of a shape function on :math:`S^{d-1}`.

    Parameters
    ----------
    shape
        Vectorised callable :math:`s(t)` on :math:`[-1, 1]`.
    dim
        Ambient dimension :math:`d \ge 2`.
    max_degree
        L >= 0.
    kinks
        Points in :math:`(-1, 1)` where ``shape`` is not smooth (e.g. ``(0.0,)`` for ReLU);
        the integral is split there.
    parity
        Structural zeros: ``"even"`` (s even: odd levels vanish), ``"odd"``,
        ``"even_plus_linear"`` (s minus a linear function is even: odd levels >= 3 vanish, as for
        the arc-cosine kernel, ReLU and softplus). Those levels are returned as exact zeros.
    method
        ``"angle"`` (default) or ``"gegenbauer"`` (see the module docstring).
    rtol
        Stop doubling the nodes when successive estimates differ by at most
        ``rtol * max|c|``.
    num_nodes
        Use exactly this many nodes per piece (no refinement; error estimate from half as many).
    return_error
        Also return the per-level error estimate.
    of_gap
        ``shape`` is given as a function of :math:`u = 1 - t` (on :math:`[0, 2]`), evaluated at
        gaps that keep their digits near :math:`t = 1`: for shapes that fall within a tiny angle of
        it, where :math:`t` itself rounds to 1.

    Returns
    -------
    numpy.ndarray or (numpy.ndarray, numpy.ndarray)
        ``(L + 1,)`` coefficients (and error estimates).

    Examples
    --------
    >>> import numpy as np
    >>> c = funk_hecke(lambda t: np.maximum(t, 0.0), 3, 4, kinks=[0.0], parity="even_plus_linear")
    >>> np.round(c, 4).tolist()   # Dutordoir, PhD report Table B.2, d = 3
    [0.25, 0.1667, 0.0625, 0.0, -0.0104]
    """
    return_error = check_bool(return_error, "return_error")
    coeffs, err, _ = funk_hecke_with_rule(
        shape, dim, max_degree, kinks=kinks, parity=parity, method=method, rtol=rtol,
        num_nodes=num_nodes, of_gap=of_gap,
    )
    return (coeffs, err) if return_error else coeffs
