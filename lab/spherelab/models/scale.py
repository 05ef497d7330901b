r"""Data far from unit scale: a warning that names the fix before a fit spends its time.

The lift :math:`x \mapsto (x/s, b)/\|(x/s, b)\|` (Dutordoir et al. 2020, §3) puts inputs on the
sphere around the origin, and the GP prior has mean zero. Inputs whose columns sit far from the
origin (an offset of many standard deviations) crowd onto a small cap of the sphere, where the
low-degree harmonics cannot tell the points apart, and a learned input scale cannot undo an offset;
targets with a large mean are explained by the prior's variance instead of the data. Standardising
with the training statistics (:class:`spherelab.datasets.Standardizer`) fixes both.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._validation import scale_of
from .report import caller_level

__all__ = ["ScaleWarning", "warn_off_scale"]

#: rows looked at (evenly spaced): the check costs O(D) per row of this sample, never O(N)
SAMPLE_ROWS = 10_000
#: a column's offset in standard deviations, and its standard deviation, beyond which it warns
MAX_OFFSET, MAX_SCALE, MIN_SCALE = 3.0, 30.0, 1.0 / 30.0


class ScaleWarning(UserWarning):
    """Training inputs or targets far from unit scale (:func:`warn_off_scale`); the message says
    which columns and how to standardise them."""


def _far(sample: np.ndarray) -> list[str]:
    with np.errstate(over="ignore", invalid="ignore"):  # squares beyond float64: refused by the fit's checks
        mean, sd = sample.mean(axis=0), sample.std(axis=0)
        spread = scale_of(sample, axis=0)[1]  # 0 for a column constant up to rounding
    out = []
    for j, (m, s, t) in enumerate(zip(np.atleast_1d(mean), np.atleast_1d(sd), np.atleast_1d(spread))):
        if s == 0 or t == 0 or not (np.isfinite(m) and np.isfinite(s)):
            continue  # a constant column says nothing about scale; an overflowing one is refused, not warned
        if abs(m) > MAX_OFFSET * max(s, 1.0) or not MIN_SCALE <= s <= MAX_SCALE:
            out.append(f"{j} (mean {m:.3g}, sd {s:.3g})")
    return out


def warn_off_scale(owner: str, X: Any, y: Any = None) -> None:
    """Warn (:class:`ScaleWarning`) when ``X`` ``(N, D)`` has a column whose mean is more than three
    standard deviations (and more than 3) from zero, or whose standard deviation is outside
    1/30 .. 30, or when the targets ``y`` do (Gaussian regression: pass ``None`` for labels).
    Only in-memory NumPy arrays are checked, on at most ``SAMPLE_ROWS`` evenly spaced rows."""
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.shape[0] < 2:
        return
    step = max(1, X.shape[0] // SAMPLE_ROWS)
    parts = []
    columns = _far(X[::step])
    if columns:
        parts.append(f"inputs X far from unit scale, column{'s' if len(columns) > 1 else ''} "
                     + ", ".join(columns[:4]) + (f" and {len(columns) - 4} more" if len(columns) > 4 else "")
                     + ": the lift puts x/s on a sphere around the origin, so an offset crowds the points "
                     "onto a small cap")
    if isinstance(y, np.ndarray) and y.ndim == 1 and _far(y[::step, None]):
        parts.append(f"targets y far from unit scale (mean {y[::step].mean():.3g}, sd {y[::step].std():.3g}): "
                     "the prior has mean zero")
    if parts:
        warnings.warn(f"{owner}: " + "; ".join(parts) + ". Standardise with the training statistics "
                      "(spherelab.datasets.Standardizer().fit(X, y): transform before fit and predict, "
                      "inverse_predictive(mean, var) on the predictions)", ScaleWarning, stacklevel=caller_level())
