r"""Test metrics of probabilistic predictions: root mean squared error, the negative log predictive
density of a Gaussian predictive, and the area under the ROC curve."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._listing import own_names
from ._validation import check_finite_array

__all__ = ["rmse", "nlpd", "roc_auc"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def _pair(y: Any, mean: Any, name: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    y = check_finite_array(y, "y").reshape(-1)
    mean = check_finite_array(mean, name).reshape(-1)
    if y.shape != mean.shape:
        raise ValueError(f"y and {name} must have the same length, got {y.shape[0]} and {mean.shape[0]}")
    if y.size == 0:
        raise ValueError("y is empty")
    return y, mean


def rmse(y: Any, mean: Any) -> float:
    r""":math:`\sqrt{\tfrac1N\sum_n (y_n - \mu_n)^2}`."""
    y, mean = _pair(y, mean)
    return float(np.sqrt(np.mean((y - mean) ** 2)))


def nlpd(y: Any, mean: Any, var: Any) -> float:
    r"""Mean negative log predictive density of :math:`y_n` under :math:`N(\mu_n, \sigma_n^2)`,
    :math:`\tfrac1N\sum_n \tfrac12\log 2\pi\sigma_n^2 + (y_n - \mu_n)^2/2\sigma_n^2`
    (``var`` is the predictive variance of y, noise included: ``predict_y``'s second output)."""
    y, mean = _pair(y, mean)
    _, var = _pair(y, var, "var")
    if np.any(var <= 0):
        raise ValueError("var must be > 0 (the predictive variance of y, noise included)")
    return float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))


def roc_auc(y: Any, score: Any) -> float:
    """Area under the ROC curve of ``score`` for binary labels ``y`` (the Mann–Whitney
    statistic; ties count one half)."""
    y = check_finite_array(y, "y").reshape(-1)
    score = check_finite_array(score, "score").reshape(-1)
    if y.shape != score.shape:
        raise ValueError(f"y and score must have the same length, got {y.shape[0]} and {score.shape[0]}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must contain only 0 and 1")
    pos, neg = int(y.sum()), int((1 - y).sum())
    if pos == 0 or neg == 0:
        raise ValueError("y needs both classes for an AUC")
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(s.size)
    i = 0
    while i < s.size:  # average ranks over ties
        j = i
        while j + 1 < s.size and s[j + 1] == s[i]:
            j += 1
        ranks[i : j + 1] = 0.5 * (i + j) + 1.0
        i = j + 1
    r = np.empty_like(ranks)
    r[order] = ranks
    return float((r[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))
