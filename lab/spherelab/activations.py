r"""Neural-network activations as shape functions on the sphere, with their Funk–Hecke
coefficients :math:`\sigma_\ell`.

An activated unit with weight :math:`w` is :math:`x \mapsto \sigma(w^\top x)`; restricted to the
sphere its expansion is :math:`\sigma(\hat w^\top \hat x) = \sum_\ell \sigma_\ell
Z_\ell(\hat w^\top \hat x)` (Dutordoir, PhD report §4, Tiao, thesis §3.2), with :math:`\sigma_\ell` given by
:func:`spherelab.funk_hecke`. ReLU has a closed form (Dutordoir, PhD report App. B.2, eqs. B.19–B.20), computed
in log space; the others use the exact quadrature of :mod:`spherelab.funk_hecke` with their kinks
and parities declared.

Every activation has ``shape(t)``, ``coefficients(dim, max_degree)`` and, where it has
parameters, ``coefficient_gradients(dim, max_degree)`` (a dict parameter -> array).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import erf, expit, gammaln

from ._listing import own_names
from ._state import Hyper, Saveable
from ._validation import check_degree, check_dim, check_positive
from .sphere.funk_hecke import funk_hecke_with_rule

__all__ = ["Activation", "ReLU", "Step", "SquaredReLU", "Softplus", "Swish", "Erf"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


class Activation(Saveable):
    """Base class: a shape :math:`\\sigma(t)` with declared kinks and parity."""

    kinks: tuple[float, ...] = ()
    parity: str | None = None
    params: tuple[str, ...] = ()

    def shape(self, t: Any) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _save_state(self) -> dict[str, Any]:
        return {p: getattr(self, p) for p in self.params}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("shape", "shape_gradients"):  # every activation refuses NaN, inf and complex t
            if name in cls.__dict__:
                setattr(cls, name, _checked_t(cls.__dict__[name]))

    def shape_gradients(self, t: Any) -> dict[str, np.ndarray]:
        """Derivatives of ``shape(t)`` with respect to each parameter."""
        return {}

    def cache_key(self) -> tuple:
        return (type(self).__name__,) + tuple(getattr(self, p) for p in self.params)

    def coefficients(self, dim: int, max_degree: int) -> np.ndarray:
        r"""Funk–Hecke coefficients :math:`\sigma_0..\sigma_L` on :math:`S^{d-1}`, shape
        ``(L + 1,)`` (structural zeros exact)."""
        return _coefficients_cached(self, check_dim(dim), check_degree(max_degree))[0].copy()

    def coefficients_floor(self, dim: int, max_degree: int) -> np.ndarray:
        r"""Per level, the size below which :meth:`coefficients` is numerical noise (the
        quadrature's convergence estimate and the rounding of its weighted sum; 0 for closed forms
        and structural zeros), ``(L + 1,)``. Show or analyse only levels above it."""
        from .sphere.funk_hecke import apply_parity

        coeffs, rule, err = _coefficients_cached(self, check_dim(dim), check_degree(max_degree))
        if err is None:  # a closed form
            return np.zeros(coeffs.shape)
        rounding = 8.0 * np.finfo(np.float64).eps * (np.abs(self.shape(rule.nodes)) @ np.abs(rule.matrix))
        return apply_parity(err + rounding, self.parity)

    def coefficient_gradients(self, dim: int, max_degree: int) -> dict[str, np.ndarray]:
        """Derivatives of :meth:`coefficients` with respect to each parameter."""
        _, rule, _ = _coefficients_cached(self, check_dim(dim), check_degree(max_degree))
        grads = self.shape_gradients(rule.nodes)
        from .sphere.funk_hecke import apply_parity

        return {k: apply_parity(rule.apply(v), self.parity) for k, v in grads.items()}

    def __call__(self, t: Any) -> np.ndarray:
        return self.shape(t)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Activation) and self.cache_key() == other.cache_key()

    def __hash__(self) -> int:
        return hash(self.cache_key())

    def __repr__(self) -> str:
        args = ", ".join(f"{p}={getattr(self, p)!r}" for p in self.params)
        return f"{type(self).__name__}({args})"


def _checked_t(method):
    import functools

    from ._validation import check_finite_array

    @functools.wraps(method)
    def run(self, t, *args, **kwargs):
        return method(self, check_finite_array(t, "t"), *args, **kwargs)

    return run


@lru_cache(maxsize=512)
def _coefficients_cached(act: Activation, dim: int, L: int):
    coeffs, err, rule = funk_hecke_with_rule(
        act.shape, dim, L, kinks=act.kinks, parity=act.parity
    )
    override = act._closed_form(dim, L) if hasattr(act, "_closed_form") else None
    err = None if override is not None else np.asarray(err, dtype=np.float64)
    coeffs = override if override is not None else coeffs
    coeffs.setflags(write=False)
    return coeffs, rule, err  # the floor from err and the rule on demand (coefficients_floor); None: exact


class ReLU(Activation):
    r""":math:`\sigma(t) = \max(0, t)`; closed-form coefficients (Dutordoir, PhD report eqs. B.19–B.20):

    .. math:: \sigma_0 = \frac{\Gamma(d/2)}{2\sqrt\pi\,\Gamma((d+1)/2)},\quad
              \sigma_1 = \frac{1}{2d}\ \ (\text{equivalently B.20}),\quad
              \sigma_n = \frac{\Gamma(d/2)\,(-1)^{n/2-1}\,\Gamma(n-1)}
                               {\sqrt\pi\,2^n\,\Gamma(n/2)\,\Gamma(n/2 + (d+1)/2)}
              \ (n \ge 2 \text{ even}),

    and :math:`\sigma_n = 0` for odd :math:`n \ge 3`.
    """

    kinks = (0.0,)
    parity = "even_plus_linear"

    def shape(self, t: Any) -> np.ndarray:
        return np.maximum(np.asarray(t, dtype=np.float64), 0.0)

    @staticmethod
    def _closed_form(dim: int, L: int) -> np.ndarray:
        d = float(dim)
        c = np.zeros(L + 1)
        c[0] = math.exp(gammaln(d / 2) - 0.5 * math.log(math.pi) - gammaln((d + 1) / 2)) / 2
        if L >= 1:
            # (B.20): Gamma(d/2) Gamma((d+1)/2) / (2 (d-1) Gamma((d-1)/2) Gamma(d/2+1)) = 1/(2d)
            c[1] = 1.0 / (2.0 * d)
        for n in range(2, L + 1, 2):
            log_mag = (
                gammaln(d / 2)
                + gammaln(n - 1)
                - 0.5 * math.log(math.pi)
                - n * math.log(2.0)
                - gammaln(n / 2)
                - gammaln(n / 2 + (d + 1) / 2)
            )
            c[n] = (-1.0) ** (n // 2 - 1) * math.exp(log_mag)
        return c


class Step(Activation):
    r"""Heaviside step :math:`\sigma(t) = 1[t > 0]` (the order-0 arc-cosine kernel's unit)."""

    kinks = (0.0,)
    parity = None  # zeros handled in coefficients(): even levels >= 2

    def shape(self, t: Any) -> np.ndarray:
        return (np.asarray(t, dtype=np.float64) > 0).astype(np.float64)

    def coefficients(self, dim: int, max_degree: int) -> np.ndarray:
        c = super().coefficients(dim, max_degree)
        c[2::2] = 0.0  # structural: step(t) - 1/2 is odd
        return c


class SquaredReLU(Activation):
    r""":math:`\sigma(t) = \max(0, t)^2` (the order-2 arc-cosine kernel's unit)."""

    kinks = (0.0,)
    parity = None  # zeros handled in coefficients(): even levels >= 4

    def shape(self, t: Any) -> np.ndarray:
        return np.maximum(np.asarray(t, dtype=np.float64), 0.0) ** 2

    def coefficients(self, dim: int, max_degree: int) -> np.ndarray:
        c = super().coefficients(dim, max_degree)
        c[4::2] = 0.0  # structural: relu(t)^2 - t^2 / 2 is odd and t^2 spans levels 0, 2
        return c


class Softplus(Activation):
    r""":math:`\sigma(t) = \beta^{-1}\log(1 + e^{\beta t})` (the seeds use :math:`\beta = 3`).
    :math:`\sigma(t) - t/2` is even, so odd levels :math:`\ge 3` vanish."""

    parity = "even_plus_linear"
    params = ("beta",)

    beta = Hyper(check_positive, "sharpness, > 0")

    def __init__(self, beta: float = 3.0) -> None:
        self.beta = beta

    def shape(self, t: Any) -> np.ndarray:
        bt = self.beta * np.asarray(t, dtype=np.float64)
        return np.logaddexp(0.0, bt) / self.beta

    def shape_gradients(self, t: Any) -> dict[str, np.ndarray]:
        t = np.asarray(t, dtype=np.float64)
        bt = self.beta * t
        return {"beta": t * expit(bt) / self.beta - np.logaddexp(0.0, bt) / self.beta**2}


class Swish(Activation):
    r""":math:`\sigma(t) = t\,\mathrm{sigmoid}(\beta t)` (SiLU at :math:`\beta = 1`);
    :math:`\sigma(t) - t/2` is even."""

    parity = "even_plus_linear"
    params = ("beta",)

    beta = Hyper(check_positive, "sharpness, > 0")

    def __init__(self, beta: float = 1.0) -> None:
        self.beta = beta

    def shape(self, t: Any) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        return t * expit(self.beta * t)

    def shape_gradients(self, t: Any) -> dict[str, np.ndarray]:
        t = np.asarray(t, dtype=np.float64)
        s = expit(self.beta * t)
        return {"beta": t * t * s * (1.0 - s)}


class Erf(Activation):
    r""":math:`\sigma(t) = \mathrm{erf}(a t)` with ``scale`` :math:`a`; odd, so even levels
    vanish."""

    parity = "odd"
    params = ("scale",)

    scale = Hyper(check_positive, "input scale, > 0")

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def shape(self, t: Any) -> np.ndarray:
        return erf(self.scale * np.asarray(t, dtype=np.float64))

    def shape_gradients(self, t: Any) -> dict[str, np.ndarray]:
        t = np.asarray(t, dtype=np.float64)
        return {"scale": 2.0 / math.sqrt(math.pi) * t * np.exp(-((self.scale * t) ** 2))}
