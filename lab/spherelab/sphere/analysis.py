r"""Spectral analysis of activated features against a kernel (Dutordoir, PhD report §4.3, Tiao, thesis §3.4).

* :func:`truncated_shape` — a shape rebuilt from its first L + 1 Funk–Hecke levels,
  :math:`s_L(t) = \sum_{\ell \le L} c_\ell Z_\ell(t)`.
* :func:`rkhs_norm_truncated` — the squared RKHS norm of the truncated activated feature
  :math:`\sigma_L(\hat w^\top \cdot)` under a kernel, as a function of L:
  :math:`\|\sigma_L\|^2_{\mathcal H} = \sum_{\ell \le L,\ \lambda_\ell \ne 0}
  \sigma_\ell^2 N(\ell, d) / \lambda_\ell` (the diagonal of ``Kuu`` for a unit weight). For ReLU
  under the order-1 arc-cosine kernel each level adds the same amount (:math:`\sigma_\ell^2 /
  \lambda_\ell` is constant), so the norm grows without bound: the unit is not in the RKHS and
  truncation is part of the model; for softplus it converges.
* :func:`mismatch_report` — the levels where the kernel's spectrum vanishes but the activation's
  does not (the feature has a component the prior cannot represent) and vice versa.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_degree, check_dim, check_finite_array, check_nonnegative
from .gegenbauer import zonal_series
from .special import num_harmonics

__all__ = ["truncated_shape", "rkhs_norm_truncated", "mismatch_report"]


def _counts(L: int, dim: int) -> np.ndarray:
    return np.array([float(num_harmonics(e, dim)) for e in range(L + 1)])


def truncated_shape(coeffs: Any, dim: int, t: Any, max_degree: int | None = None) -> np.ndarray:
    r""":math:`\sum_{\ell \le L} c_\ell Z_\ell(t)` with L = ``max_degree`` (default: all)."""
    c = check_finite_array(coeffs, "coeffs", ndim=1)
    if max_degree is not None:
        L = check_degree(max_degree)
        if L >= c.shape[0]:
            raise ValueError(f"max_degree must be in [0, {c.shape[0] - 1}], got {max_degree}")
        c = c[: L + 1]
    return zonal_series(c, check_dim(dim), t)


def _nonzero(x: np.ndarray, rtol: float) -> np.ndarray:
    # The library returns structural zeros as exact zeros, so the default rtol = 0 separates
    # "vanishes" from "tiny": a fast-decaying spectrum in high d has genuine 1e-20 levels.
    return np.abs(x) > rtol * np.abs(x).max() if np.any(x) else np.zeros(x.shape, bool)


def rkhs_norm_truncated(
    activation_coeffs: Any, kernel_spectrum: Any, dim: int, rtol: float = 0.0
) -> np.ndarray:
    r"""Cumulative :math:`\|\sigma_L\|^2_{\mathcal H}` for L = 0..len - 1, shape ``(L + 1,)``.

    Levels with :math:`\lambda_\ell = 0` (or below ``rtol`` times the largest eigenvalue, for
    spectra computed elsewhere with quadrature noise) are dropped, as in the activated-feature
    ``Kuu`` (``docs/design.md`` §4).
    """
    s = check_finite_array(activation_coeffs, "activation_coeffs", ndim=1)
    lam = check_finite_array(kernel_spectrum, "kernel_spectrum", ndim=1)
    rtol = check_nonnegative(rtol, "rtol")
    if s.shape != lam.shape:
        raise ValueError(f"activation_coeffs {s.shape} and kernel_spectrum {lam.shape} differ")
    if np.any(lam < -max(rtol, 1e-12) * np.abs(lam).max()):
        raise ValueError("kernel_spectrum must be non-negative")
    keep = _nonzero(lam, rtol)
    terms = np.zeros_like(s)
    terms[keep] = s[keep] ** 2 * _counts(s.shape[0] - 1, check_dim(dim))[keep] / lam[keep]
    return np.cumsum(terms)


def mismatch_report(
    kernel_spectrum: Any, activation_coeffs: Any, rtol: float = 0.0
) -> dict[str, np.ndarray]:
    """Levels where exactly one of the two spectra vanishes (a value counts as zero when
    ``|x| <= rtol * max|x|``; the default 0 trusts the exact zeros the library returns).

    Returns
    -------
    dict
        ``"kernel_only_zero"``: levels with :math:`\\lambda_\\ell = 0 \\ne \\sigma_\\ell` (the
        unit has energy the prior gives no variance to; those levels are dropped from the
        features), ``"activation_only_zero"``: :math:`\\sigma_\\ell = 0 \\ne \\lambda_\\ell` (prior
        variance no feature can explain: it stays in the predictive variance), ``"both_zero"``.
    """
    lam = check_finite_array(kernel_spectrum, "kernel_spectrum", ndim=1)
    s = check_finite_array(activation_coeffs, "activation_coeffs", ndim=1)
    rtol = check_nonnegative(rtol, "rtol")
    if s.shape != lam.shape:
        raise ValueError(f"activation_coeffs {s.shape} and kernel_spectrum {lam.shape} differ")
    lk, sk = _nonzero(lam, rtol), _nonzero(s, rtol)
    levels = np.arange(lam.shape[0])
    return {
        "kernel_only_zero": levels[~lk & sk],
        "activation_only_zero": levels[lk & ~sk],
        "both_zero": levels[~lk & ~sk],
    }
