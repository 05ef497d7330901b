r"""An additive VISH with its interactions chosen from the data and its degrees from a budget of
features: :func:`fit_additive`.

1. **First order, always**: one component per input column (on the circle), fitted on a subsample
   of the training rows with every hyper-parameter (VISH's two stages).
2. **Which pairs** (and, with ``order=3``, triples): each candidate group is added to the first-order
   model at a low degree, and only its own spectrum and the noise are fitted, on the subsample's
   statistics (the other components as fitted, the lift as it starts). Its gain is the collapsed
   bound's rise over the first-order model's on the same footing. A candidate is kept when its gain
   exceeds :math:`\log n` nats on the subsample's n rows (the Bayesian information criterion's price
   of its two spectral parameters), the largest gains first, at most ``max_interactions``; triples
   are the unions of two kept pairs that share a column, judged against the model with the pairs.
   ``interactions=[...]`` gives the groups instead.
3. **Degrees from a budget**: the levels of all components are taken in decreasing order of their
   prior variance per feature, :math:`\lambda_{c,\ell}\,\overline{r_c^2}` (the spectrum fitted in
   1-2, the lift's mean squared radius), while the features they add fit in ``num_features``: a
   level explains that much prior variance with each of its :math:`N(\ell, d_c)` functions.
4. The chosen model fitted on every row, from the hyper-parameters found on the subsample.

Every choice is made on training rows; ``fit_report_["additive"]`` lists each candidate's gain, the
groups and degrees chosen and the criterion.
"""

from __future__ import annotations

import copy
import itertools
import time
from typing import Any, Sequence

import numpy as np

from .._validation import check_allocation, check_data, check_int, check_positive
from ..features.additive import AdditiveHarmonics
from ..kernels import Additive, Matern
from ..models import VISH, capped
from ..sphere.special import num_harmonics

__all__ = ["fit_additive"]

#: degrees of the selection stage: first-order components (circles) and candidate groups
FIRST_DEGREE, CANDIDATE_DEGREE = 8, 3


def _component(size: int) -> Matern:
    # a group of `size` standardised columns: norms near 1 after the lift
    return Matern(1.5, 1.0, bias=1.0, input_scale=float(np.sqrt(size)))


def _degrees_for(kernel: Additive, X: np.ndarray, budget: int, top: int = 60) -> list[int]:
    """Step 3 of the module docstring: every component gets degree 0, then levels in decreasing
    prior variance per feature while they fit in ``budget`` features."""
    r, _ = kernel.lift(X)
    mean_r2 = np.mean(r * r, axis=0)
    degrees = [0] * kernel.num_components
    used = kernel.num_components
    levels = []
    for c, (k, d) in enumerate(zip(kernel.components, kernel.dims)):
        lam = k.spectrum(d, top)
        levels += [(-lam[ell] * mean_r2[c], c, ell) for ell in range(1, top + 1) if lam[ell] > 0]
    for _, c, ell in sorted(levels):
        if ell != degrees[c] + 1:
            continue  # a component's levels are taken in order (a skipped one ends it)
        cost = num_harmonics(ell, kernel.dims[c])
        if used + cost > budget:
            continue
        degrees[c], used = ell, used + cost
    return degrees


def _groups(D: int, given: Any) -> list[tuple[int, ...]] | None:
    if given is None or (isinstance(given, str) and given == "auto"):
        return None
    if isinstance(given, str) or not hasattr(given, "__iter__"):
        raise TypeError(f"interactions must be 'auto' or a list of column groups such as [(0, 1)], got {given!r}")
    out = []
    for g in given:
        cols = tuple(check_int(c, "interactions entries", minimum=0, maximum=D - 1) for c in g)
        if len(cols) < 2 or len(set(cols)) != len(cols):
            raise ValueError(f"interactions: each group names two or more distinct columns, got {g!r}")
        out.append(cols)
    return out


def _bound(kernel: Additive, degrees: Sequence[int], X, y, noise: float, maxiter: int) -> tuple[float, VISH]:
    """The collapsed bound after fitting the spectra and the noise only (the lift as it is)."""
    from ..likelihoods import Gaussian

    model = VISH(kernel, features=AdditiveHarmonics(list(degrees)), likelihood=Gaussian(noise), prior="kernel")
    model.fit(X, y, train_lift=False, maxiter=maxiter)
    return model.elbo(), model


def fit_additive(X: Any, y: Any, *, interactions: Any = "auto", order: int = 2, max_interactions: int | None = None,
                 num_features: int = 1000, subsample: int = 2000, seed: int = 0,
                 max_time: float | None = None) -> VISH:
    """Fit an additive VISH (module docstring).

    Parameters
    ----------
    X, y
        Standardised training rows ``(N, D)`` and targets ``(N,)``.
    interactions
        ``"auto"`` (chosen from the data) or the groups of two or more columns to add to the
        first-order components (``[]``: first order only).
    order
        2 (pairs) or 3 (pairs, then triples made of kept pairs), with ``"auto"``.
    max_interactions
        At most this many groups beyond the first order (default: D).
    num_features
        The features the final model may use in all (degrees from the budget, step 3).
    subsample, seed
        Rows of the selection stages, and their seed.
    max_time
        Seconds for the final fit (the selection's stages are short fits on the subsample).

    Returns
    -------
    VISH
        Fitted on every row, ``fit_report_["additive"]`` holding what was chosen and why.
    """
    X, y = check_data(X, y)
    N, D = X.shape
    order = check_int(order, "order", minimum=2, maximum=3)
    max_interactions = D if max_interactions is None else check_int(max_interactions, "max_interactions", minimum=0)
    num_features = check_int(num_features, "num_features", minimum=1)
    # the final fit holds M x M matrices: a budget beyond memory is refused before anything runs
    check_allocation(8.0 * 4 * float(num_features) ** 2, f"num_features = {num_features:,}", "lower num_features")
    subsample = check_int(subsample, "subsample", minimum=10)
    if max_time is not None:
        max_time = check_positive(max_time, "max_time")
    start = time.perf_counter()
    given = _groups(D, interactions)
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    pick = np.sort(rng.choice(N, min(subsample, N), replace=False))
    Xs, ys = X[pick], y[pick]
    singles = [(c,) for c in range(D)]
    if num_features < D:
        raise ValueError(f"num_features = {num_features} cannot hold one feature per input ({D})")
    first = Additive([_component(1) for _ in singles], singles)
    with capped():  # the selection's fits are short by design
        base = VISH(first, features=AdditiveHarmonics(FIRST_DEGREE)).fit(Xs, ys, seed=seed, maxiter=200,
                                                                          lift_maxiter=60)
    noise = base.likelihood.variance
    gains: dict[str, float] = {}
    if given is None:
        chosen = _select(first, [g for g in itertools.combinations(range(D), 2)], Xs, ys, noise, gains,
                         max_interactions)
        if order == 3 and len(chosen) < max_interactions:
            triples = sorted({tuple(sorted(set(a) | set(b))) for a, b in itertools.combinations(chosen, 2)
                              if len(set(a) | set(b)) == 3})
            with_pairs = Additive([*map(copy.deepcopy, first.components), *(_component(2) for _ in chosen)],
                                  [*singles, *chosen])
            chosen += _select(with_pairs, triples, Xs, ys, noise, gains, max_interactions - len(chosen))
    else:
        chosen = given
    groups = [*singles, *chosen]
    kernel = Additive([*map(copy.deepcopy, base.kernel.components), *(_component(len(g)) for g in chosen)], groups)
    with capped():  # the new components' spectra at the selection's footing, for the budget's ordering
        _, sized = _bound(kernel, [FIRST_DEGREE] * D + [CANDIDATE_DEGREE] * len(chosen), Xs, ys, noise, 100)
    degrees = _degrees_for(sized.kernel, Xs, num_features)
    left = None if max_time is None else max(max_time - (time.perf_counter() - start), 1e-3)
    model = VISH(sized.kernel, features=AdditiveHarmonics(degrees)).fit(X, y, seed=seed, max_time=left)
    report = dict(model.fit_report_ or {})
    report["additive"] = {
        "criterion": f"a group is kept when it raises the bound on {len(pick)} rows by more than "
                     f"log n = {np.log(len(pick)):.2f} nats, largest gains first" if given is None else "given",
        "gains": gains, "groups": [list(g) for g in groups], "degrees": degrees,
        "features": model.features.num_features}
    model.fit_report_ = report
    return model


def _select(kernel: Additive, candidates: list[tuple[int, ...]], Xs, ys, noise: float, gains: dict,
            limit: int) -> list[tuple[int, ...]]:
    """The candidates whose gain over ``kernel``'s bound exceeds log n, largest first, at most ``limit``."""
    if not candidates or limit <= 0:
        return []
    degrees = [FIRST_DEGREE if len(g) == 1 else CANDIDATE_DEGREE for g in kernel.groups]
    with capped():
        reference, _ = _bound(copy.deepcopy(kernel), degrees, Xs, ys, noise, 100)
        for g in candidates:
            trial = Additive([*map(copy.deepcopy, kernel.components), _component(len(g))], [*kernel.groups, g])
            value, _ = _bound(trial, [*degrees, CANDIDATE_DEGREE], Xs, ys, noise, 100)
            gains[str(tuple(g))] = value - reference
    price = np.log(Xs.shape[0])
    ranked = sorted((g for g in candidates if gains[str(tuple(g))] > price), key=lambda g: -gains[str(tuple(g))])
    return ranked[:limit]
