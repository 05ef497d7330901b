"""Likelihoods p(y | f).

Only the Gaussian likelihood is implemented so far; the Bernoulli (probit) likelihood for
classification arrives with the uncollapsed ELBO.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Gaussian"]


class Gaussian:
    r"""Homoscedastic Gaussian noise, :math:`y = f(x) + \epsilon`,
    :math:`\epsilon \sim N(0, \sigma^2)` with ``variance`` :math:`\sigma^2 > 0`."""

    def __init__(self, variance: float = 1.0) -> None:
        v = float(variance)
        if not np.isfinite(v) or v <= 0:
            raise ValueError(f"variance (the noise variance) must be a finite number > 0, got {variance!r}")
        self.variance = v

    def predict_y(self, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y given those of f."""
        return np.asarray(mean), np.asarray(var) + self.variance

    def log_predictive_density(self, y: Any, mean: Any, var: Any) -> np.ndarray:
        """:math:`\\log N(y \\mid \\mu, v + \\sigma^2)` elementwise."""
        s2 = np.asarray(var) + self.variance
        return -0.5 * (np.log(2 * np.pi * s2) + (np.asarray(y) - mean) ** 2 / s2)

    def __repr__(self) -> str:
        return f"Gaussian(variance={self.variance!r})"
