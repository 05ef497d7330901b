"""Datasets: synthetic generators (always available, offline) for tests, benchmarks and the
notebooks."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import check_int

__all__ = ["synthetic_regression"]


def synthetic_regression(
    num_points: int, num_inputs: int = 8, noise: float = 0.1, seed: Any = 0, *, chunk: int = 1_000_000
) -> tuple[np.ndarray, np.ndarray]:
    r"""A smooth non-linear regression problem with ``num_inputs`` standard-normal inputs:

    .. math:: y = \sin(x_1 + x_2/2) + \tfrac12\cos(x_3 - x_4)\tanh(x_5)
              + \tfrac14 x_6 x_7 / (1 + x_8^2) + 0.3\,\bar x + \epsilon

    (inputs beyond 8 enter only through the mean :math:`\bar x`; fewer inputs drop terms),
    :math:`\epsilon \sim N(0, \text{noise}^2)`. Generated in chunks (memory ~ the output).

    Returns
    -------
    X : ``(num_points, num_inputs)`` float64, y : ``(num_points,)`` float64
    """
    n = check_int(num_points, "num_points", minimum=1)
    D = check_int(num_inputs, "num_inputs", minimum=1)
    rng = np.random.default_rng(seed)
    X = np.empty((n, D))
    y = np.empty(n)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        x = rng.standard_normal((stop - start, D))
        z = np.zeros((stop - start, 8))
        z[:, : min(D, 8)] = x[:, :8]
        f = (
            np.sin(z[:, 0] + 0.5 * z[:, 1])
            + 0.5 * np.cos(z[:, 2] - z[:, 3]) * np.tanh(z[:, 4])
            + 0.25 * z[:, 5] * z[:, 6] / (1.0 + z[:, 7] ** 2)
            + 0.3 * x.mean(axis=1)
        )
        X[start:stop] = x
        y[start:stop] = f + noise * rng.standard_normal(stop - start)
    return X, y
