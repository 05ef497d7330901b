r"""Spherical harmonics and orthogonal inducing points together, sized by a pair or by a time budget.

The hybrid of Tiao's thesis (§3.4): u the spherical harmonics up to a degree L (their diagonal
:math:`K_{uu}`, fitted first as :class:`~spherelab.VISH`), v K inducing points in the orthogonal
complement, chosen where the harmonic posterior leaves the most variance (greedy conditional variance,
Burt, Rasmussen & van der Wilk 2020, Alg. 1), then every parameter trained on the collapsed bound.
:func:`fit_hybrid` takes (L, K) explicitly, or chooses them from a number of seconds.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._validation import check_int, check_positive
from ..kernels import ZonalKernel
from ..models import VISH, OrthogonalSVGP, capped
from ..sphere import cumulative_num_harmonics

__all__ = ["fit_hybrid"]

#: the share of a time budget the harmonics' stage may take (the rest trains the orthogonal points)
VISH_SHARE = 0.25
#: L-BFGS-B evaluations the orthogonal stage should afford within what is left of the budget
EVALUATIONS = 150
#: the orthogonal points' probe: this many points, fitted for this many iterations, time one evaluation
PROBE_POINTS, PROBE_ITERATIONS = 32, 2


def fit_hybrid(kernel: ZonalKernel, X: Any, y: Any, *, degree: int | None = None, num_orthogonal: int | None = None,
               time_budget: float | None = None, likelihood=None, maxiter: int = 1000,
               max_orthogonal: int = 2000, seed: int = 0) -> OrthogonalSVGP:
    r"""Fit the hybrid (harmonics for u, orthogonal inducing points for v) on ``X`` ``(N, D)``, ``y``
    ``(N,)`` and return it, an :class:`~spherelab.OrthogonalSVGP` started from a fitted VISH.

    Parameters
    ----------
    kernel
        A spherelab zonal kernel (copied by the VISH stage).
    degree, num_orthogonal
        L and K. Either both given (no time limit unless ``time_budget`` is), or neither and
        ``time_budget`` given: then VISH is fitted at degrees 1, 2, ... while the next degree's time,
        extrapolated from the last ones as a power of M, stays within a quarter of the budget; a probe with
        32 orthogonal points times one evaluation of the collapsed bound, giving the P = M + K whose
        evaluations, scaled as :math:`P^2` (the pass over the rows dominates), afford 150 L-BFGS-B
        evaluations in the time left; L is the largest fitted degree with M <= P / 2, K the rest (at
        most ``max_orthogonal``, at most N); the last stage stops at the budget (``max_time``).
    time_budget
        Seconds for the whole fit (the stages above); the result's ``fit_report_`` says where it
        stopped.
    likelihood
        The likelihood (Gaussian; default noise variance 1). The VISH stage has the kernel prior:
        its bound is Titsias's over u for the full kernel, the hybrid's bound without v, so the
        hybrid starts at the VISH's bound and only climbs (the features prior bounds another model,
        the truncated kernel's, whose optimum can sit far below on the full kernel).
    maxiter, seed
        L-BFGS-B's limit for each stage; the seed of the VISH stage's lift subsample.

    Notes
    -----
    The decoupled posterior keeps q(u) and q(v⊥) independent (Shi, Titsias & Mnih 2020), so its
    collapsed bound is Titsias's over u and v together less the information the optimal joint q
    would share between the two blocks. On kin8nm, power and protein that loss was larger than all
    the harmonics add, and the same number of inducing points added more than the harmonics with
    a joint q (``benchmarks/RESULTS.md``, "What spherical harmonics add to inducing points"): there
    the hybrid trails inducing points alone.

    Examples
    --------
    >>> import spherelab as sl
    >>> X, y = sl.datasets.synthetic_regression(400, 2, seed=0)
    >>> model = sl.selection.fit_hybrid(sl.kernels.Matern(1.5), X, y, degree=3, num_orthogonal=8, maxiter=20)
    >>> model.features.max_degree, model.num_orthogonal
    (3, 8)
    """
    chosen = degree is not None, num_orthogonal is not None
    if chosen[0] != chosen[1]:
        raise ValueError("degree and num_orthogonal go together: give both, or neither and a time_budget")
    if not chosen[0] and time_budget is None:
        raise ValueError("give degree and num_orthogonal, or a time_budget in seconds to choose them from")
    budget = None if time_budget is None else check_positive(time_budget, "time_budget")
    maxiter = check_int(maxiter, "maxiter", minimum=1)
    max_orthogonal = check_int(max_orthogonal, "max_orthogonal", minimum=1)
    start = time.perf_counter()
    if chosen[0]:
        degree = check_int(degree, "degree", minimum=0)
        num_orthogonal = check_int(num_orthogonal, "num_orthogonal", minimum=1)
        vish = VISH(kernel, degree, likelihood, prior="kernel").fit(X, y, maxiter=maxiter, seed=seed)
    else:
        fitted = _vish_within(kernel, X, y, likelihood, maxiter, seed, VISH_SHARE * budget)
        P = _affordable(fitted[-1], X, y, budget - (time.perf_counter() - start))
        # half of the affordable inducing variables at least are points: on the frontier's sets
        # (benchmarks/RESULTS.md) points did more per variable than harmonics, which cost as much
        # in the pass; the harmonics keep the largest degree fitted within the other half
        vish = max((m for m in fitted if m.features.num_features <= P / 2), key=lambda m: m.max_degree,
                   default=fitted[0])
        num_orthogonal = int(np.clip(np.floor(P) - vish.features.num_features, 1,
                                     min(max_orthogonal, np.shape(X)[0])))
    model = OrthogonalSVGP.from_vish(vish, num_orthogonal, orthogonal_inputs="greedy")
    left = None if budget is None else max(budget - (time.perf_counter() - start), 1e-3)
    return model.fit(X, y, maxiter=maxiter, seed=seed, max_time=left)


def _vish_within(kernel, X, y, likelihood, maxiter, seed, seconds) -> list[VISH]:
    """VISH fitted at degrees 1, 2, ... while the next degree's fit, extrapolated from the last as
    :math:`M^a`, keeps the stage within ``seconds`` (every fit returned, by degree): degree 2 is
    fitted whenever time is left after degree 1, then a is the exponent the last two fits show,
    between 1 (the pass over the rows) and 3 (the M^3 algebra)."""
    dim = np.shape(X)[1] + 1
    size = lambda L: cumulative_num_harmonics(L, dim)  # noqa: E731
    spent, L, times, models = 0.0, 1, [], []
    while True:
        t = time.perf_counter()
        models.append(VISH(kernel, L, likelihood, prior="kernel").fit(X, y, maxiter=maxiter, seed=seed))
        times.append(time.perf_counter() - t)
        spent += times[-1]
        a = 3.0
        if len(times) > 1 and times[-2] > 0:
            a = float(np.clip(np.log(times[-1] / times[-2]) / np.log(size(L) / size(L - 1)), 1.0, 3.0))
        # the first fit carries one-time costs (compiled kernels loading): judged on it alone, degree 1
        # would look dear; so a second degree is fitted while the stage has time left at all
        if spent + (0.0 if L == 1 else times[-1] * (size(L + 1) / size(L)) ** a) > seconds:
            return models
        L += 1


def _affordable(vish: VISH, X, y, seconds: float) -> float:
    """P = M + K such that :data:`EVALUATIONS` evaluations of the collapsed bound over P inducing
    variables fit in ``seconds``, scaled as P^2 from a probe's measured time per evaluation."""
    k0 = min(PROBE_POINTS, int(np.shape(X)[0]))
    t = time.perf_counter()
    with capped():  # a few iterations to time them, not to converge
        probe = OrthogonalSVGP.from_vish(vish, k0, orthogonal_inputs="greedy").fit(X, y, maxiter=PROBE_ITERATIONS)
    # initialisation (the greedy choice, q's first solve) counts as two more evaluations
    per_eval = (time.perf_counter() - t) / (probe.fit_report_["fit"]["evaluations"] + 2)
    return (vish.features.num_features + k0) * float(np.sqrt(max(seconds, 0.0) / (EVALUATIONS * per_eval)))
