"""Synthetic data sets, always available offline: a smooth regression problem of any size and
stand-ins for Snelson's set, banana, SUSY, and a mirror-symmetric problem."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_nonnegative, check_seed, check_size
from .catalogue import UCI_SHAPES

__all__ = ["synthetic_regression", "snelson_like", "banana_like", "susy_like", "mirror_symmetric", "uci_like"]


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
    D = check_size(num_inputs, "num_inputs", minimum=1, what="inputs")
    n = check_size(num_points, "num_points", minimum=1, row_bytes=8.0 * (D + 10))
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(check_seed(seed))
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


def snelson_like(num_points: int = 200, noise: float = 0.25, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A 1-D regression set resembling Snelson & Ghahramani's (2006): inputs on [0.06, 5.97]
    with a gap-free but uneven density, a wiggly mean and Gaussian noise,

    .. math:: f(x) = 0.6\sin(2.6x) + 0.4\cos(4.3x + 1) - 0.3x + 0.5, \qquad
              y = f(x) + \epsilon,\ \epsilon \sim N(0, \text{noise}^2).

    Used by the notebooks when the real set is not in :func:`data_dir`.

    Returns
    -------
    X : ``(num_points, 1)``, y : ``(num_points,)``
    """
    n = check_size(num_points, "num_points", minimum=1, row_bytes=64.0)
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(check_seed(seed))
    x = 0.06 + 5.91 * rng.beta(1.2, 1.0, n)
    f = 0.6 * np.sin(2.6 * x) + 0.4 * np.cos(4.3 * x + 1.0) - 0.3 * x + 0.5
    return x[:, None], f + noise * rng.standard_normal(n)


def banana_like(num_points: int = 400, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """A two-class 2-D problem resembling the "banana" set of Hensman et al. (2015): class 0
    along a wide arc (upper left, round the bottom, up the right), class 1 along a bent band
    through its middle, both with Gaussian spread so the classes overlap a little.

    Returns
    -------
    X : ``(num_points, 2)``, y : ``(num_points,)`` in {0, 1}
    """
    n = check_size(num_points, "num_points", minimum=2, row_bytes=96.0)
    rng = np.random.default_rng(check_seed(seed))
    y = (rng.uniform(size=n) < 0.55).astype(np.float64)
    angle = np.deg2rad(rng.uniform(150.0, 380.0, n))
    arc = np.column_stack([1.35 * np.cos(angle), 1.2 * np.sin(angle) - 0.1])
    t = rng.uniform(-1.0, 1.0, n)
    band = np.column_stack([2.1 * t, 1.1 * t + 0.5 * t**2 - 0.5 * (1 - t**2) * 0.6])
    X = np.where(y[:, None] == 1.0, band, arc) + 0.28 * rng.standard_normal((n, 2))
    return X, y


def susy_like(num_points: int, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A synthetic stand-in for the SUSY classification set (Baldi et al. 2014; Eleftheriadis et al. §6):
    8 "low-level kinematic" inputs — two lepton transverse momenta (exponential), their
    pseudo-rapidities (Gaussian), the missing transverse energy and its azimuth relative to
    each lepton, and the transverse mass of lepton 1 with the missing energy — for signal
    (label 1, 46 %) and background events. Signal has harder momenta, more central leptons and
    larger missing energy correlated with the momenta, so the Bayes decision boundary is
    non-linear and the classes overlap: logistic regression on the standardised inputs reaches
    an AUC of about 0.87 and on their quadratic features about 0.90 (on SUSY itself: about 0.85
    and 0.88 for a deep network).

    Returns
    -------
    X : ``(num_points, 8)``, y : ``(num_points,)`` in {0, 1}
    """
    n = check_size(num_points, "num_points", minimum=2, row_bytes=96.0)
    rng = np.random.default_rng(check_seed(seed))
    y = (rng.uniform(size=n) < 0.46).astype(np.float64)
    sig = y == 1.0
    pt1 = rng.exponential(np.where(sig, 1.35, 1.0))
    pt2 = rng.exponential(np.where(sig, 1.1, 0.8))
    eta1 = rng.standard_normal(n) * np.where(sig, 0.9, 1.3)
    eta2 = rng.standard_normal(n) * np.where(sig, 1.0, 1.3)
    met = rng.exponential(np.where(sig, 1.0, 0.7)) + np.where(sig, 0.25 * (pt1 + pt2), 0.0)
    dphi1 = rng.uniform(-np.pi, np.pi, n)
    # signal: missing momentum tends to recoil against lepton 2
    dphi2 = np.where(sig, np.pi + 0.9 * rng.standard_normal(n), rng.uniform(-np.pi, np.pi, n))
    dphi2 = np.angle(np.exp(1j * dphi2))
    mt = np.sqrt(2.0 * pt1 * met * (1.0 - np.cos(dphi1)))
    X = np.column_stack([pt1, eta1, pt2, eta2, met, np.cos(dphi1), np.cos(dphi2), mt])
    return X, y


def mirror_symmetric(num_points: int, noise: float = 0.1, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""2-D regression data with a reflection symmetry in the inputs (Sun et al. 2021 §4.2, Thm. 4.2):
    :math:`x \sim N(0, 1.2^2 I)` (invariant under negating either coordinate and under rotations)
    and a target with a part in each of the four parity classes of
    :class:`~spherelab.groups.Reflection` ``(2)``,

    .. math:: f(x) = \sin 2.5x_1 + \cos 2x_2 + \sin 1.5x_1\,\sin 2x_2 + \tfrac12\cos 2x_1\,\sin 2.5x_2,

    plus Gaussian noise of standard deviation ``noise``.

    Returns
    -------
    X : ``(num_points, 2)``, y : ``(num_points,)``
    """
    n = check_size(num_points, "num_points", minimum=1, row_bytes=64.0)
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(check_seed(seed))
    X = 1.2 * rng.standard_normal((n, 2))
    x1, x2 = X[:, 0], X[:, 1]
    f = np.sin(2.5 * x1) + np.cos(2 * x2) + np.sin(1.5 * x1) * np.sin(2 * x2) + 0.5 * np.cos(2 * x1) * np.sin(2.5 * x2)
    return X, f + noise * rng.standard_normal(n)


# --------------------------------------------------------------------------------------------
# UCI regression sets with the standard 90/10 splits (Hernandez-Lobato & Adams 2015)
# --------------------------------------------------------------------------------------------


def uci_like(name: str, seed: Any = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A stand-in for a UCI regression set: :func:`synthetic_regression` with the set's number of
    rows and inputs, split 90/10 like its standard splits: ``(X_train, y_train, X_test, y_test)``."""
    if name not in UCI_SHAPES:
        raise ValueError(f"name must be one of {sorted(UCI_SHAPES)}, got {name!r}")
    rows, inputs = UCI_SHAPES[name]
    X, y = synthetic_regression(rows, inputs, noise=0.05, seed=seed)
    train = rows - int(np.ceil(0.1 * rows))
    return X[:train], y[:train], X[train:], y[train:]
