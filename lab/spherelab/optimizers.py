"""Optimisers without an autodiff framework: the gradients come from the bounds."""

from __future__ import annotations

import numpy as np

__all__ = ["Adam"]


class Adam:
    """Adam (Kingma & Ba 2015) on a flat parameter vector; :meth:`step` *ascends* the
    objective (an ELBO) and returns the new parameters."""

    def __init__(
        self, x0: np.ndarray, lr: float = 0.01, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.x = np.array(x0, dtype=np.float64)
        self.lr, self.beta1, self.beta2, self.eps = float(lr), beta1, beta2, eps
        self.m = np.zeros_like(self.x)
        self.v = np.zeros_like(self.x)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        """One ascent step along ``grad``; returns the updated parameters."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        mhat = self.m / (1 - self.beta1**self.t)
        vhat = self.v / (1 - self.beta2**self.t)
        self.x = self.x + self.lr * mhat / (np.sqrt(vhat) + self.eps)
        return self.x
