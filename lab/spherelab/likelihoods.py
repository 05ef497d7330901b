r"""Likelihoods p(y | f), with the variational expectations the uncollapsed bound consumes:
``variational_expectations(y, mu, var)`` returns :math:`E_{N(f; \mu, v)}[\log p(y|f)]` and its
derivatives with respect to :math:`\mu` and :math:`v` (GPy's contract), and
``parameter_gradients(y, mu, var)`` the derivatives of their sum with respect to the likelihood's
own parameters (GPy's ``dF_dtheta``): the bounds chain nothing into a likelihood."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtr

from ._listing import own_names
from ._state import Fields, Saveable
from ._validation import check_int, check_nonnegative, check_variance
from .concurrency import publish

__all__ = ["Likelihood", "Gaussian", "Bernoulli", "NOISE_FLOOR"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports

#: default lower bound of a Gaussian likelihood's variance
NOISE_FLOOR = 1e-6


class Likelihood(Saveable):
    r"""What every likelihood provides to the models and bounds (GPy's contract).

    Subclasses implement ``variational_expectations(y, mu, var)`` ->
    :math:`(E[\log p(y|f)], \partial/\partial\mu, \partial/\partial v)` elementwise, ``predict_y(mean, var)``
    and ``log_predictive_density(y, mean, var)``; they may override :meth:`parameter_gradients`
    (with :attr:`parameters`), :meth:`prepare_targets` and :meth:`check_targets`."""

    #: trainable parameters: the name models' registries use -> the attribute holding it (positive)
    parameters: dict[str, str] = {}

    def floor_of(self, name: str) -> float:
        """The least value the parameter ``name`` may take (an optimiser's lower bound)."""
        return 0.0

    def parameter_gradients(self, y, mu, var) -> dict[str, float]:
        r"""The derivatives of :math:`\sum_n E[\log p(y_n \mid f_n)]` with respect to :attr:`parameters`."""
        return {}

    def prepare_targets(self, y: Any) -> Any:
        """Targets as this likelihood reads them, before the models' validation (default: as given)."""
        return y

    def check_targets(self, y: np.ndarray) -> None:
        """Raise a ``ValueError`` naming the values this likelihood cannot take (default: any)."""

    def variational_expectations(self, y, mu, var):  # pragma: no cover - abstract
        raise NotImplementedError

    def predict_y(self, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def log_predictive_density(self, y: Any, mean: Any, var: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Gaussian(Likelihood):
    r"""Homoscedastic Gaussian noise, :math:`y = f(x) + \epsilon`,
    :math:`\epsilon \sim N(0, \sigma^2)` with ``variance`` :math:`\sigma^2 \ge` ``floor``.

    The floor (default :data:`NOISE_FLOOR` = 1e-6, GPflow's habit) keeps every fit away from
    noise-free data's optimum at :math:`\sigma^2 \to 0`, where the bounds lose all their digits
    (:math:`1/\sigma^2` multiplies the data) and eventually divide by zero: optimisers see
    :math:`\sigma^2 = \text{floor} + \text{softplus}(u)`, and a fit that ends within 1 % of the
    floor warns. Lower it (``floor=0`` allows any positive value) for data known to be this
    precise; every assignment of ``variance`` is checked against it."""

    parameters = {"noise": "variance"}
    fields = Fields(config=("variance=_variance", "floor=_floor"))

    def __init__(self, variance: float = 1.0, floor: float | None = None) -> None:
        self._floor = NOISE_FLOOR if floor is None else check_nonnegative(floor, "floor")
        self.variance = variance

    def floor_of(self, name: str) -> float:
        return self.floor

    @property
    def floor(self) -> float:
        """The least noise variance allowed (validated on assignment: >= 0 and <= ``variance``)."""
        return self._floor

    @floor.setter
    def floor(self, value: Any) -> None:
        v = check_nonnegative(value, "floor")
        if v > self.variance:
            raise ValueError(f"floor must be <= the noise variance {self.variance:g}, got {value!r}; lower "
                             "the floor or raise the variance first")
        publish(self, "_floor", v)

    @property
    def variance(self) -> float:
        return self._variance

    @variance.setter
    def variance(self, value: Any) -> None:
        v = check_variance(value, "variance (the noise variance)")
        if v < self.floor:
            raise ValueError(f"variance (the noise variance) must be >= floor = {self.floor:g}, got {value!r}; "
                             "pass Gaussian(..., floor=smaller) if the data really are this precise")
        publish(self, "_variance", v)

    def predict_y(self, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y given those of f."""
        return np.asarray(mean), np.asarray(var) + self.variance

    def variational_expectations(self, y, mu, var):
        """(E[log p], dE/dmu, dE/dvar) elementwise, in closed form."""
        r = y - mu
        e = -0.5 * np.log(2 * np.pi * self.variance) - 0.5 * (r * r + var) / self.variance
        return e, r / self.variance, np.full_like(mu, -0.5 / self.variance)

    def parameter_gradients(self, y, mu, var) -> dict[str, float]:
        r""":math:`\partial/\partial\sigma^2` of :math:`\sum_n E[\log p(y_n \mid f_n)]`, as ``noise``:
        :math:`\sum_n -\tfrac1{2\sigma^2} + \tfrac{(y_n - \mu_n)^2 + v_n}{2\sigma^4}`."""
        s2 = self.variance
        return {"noise": float(np.sum(-0.5 / s2 + 0.5 * ((y - mu) ** 2 + var) / s2**2))}

    def log_predictive_density(self, y: Any, mean: Any, var: Any) -> np.ndarray:
        r""":math:`\log N(y \mid \mu, v + \sigma^2)` elementwise."""
        s2 = np.asarray(var) + self.variance
        return -0.5 * (np.log(2 * np.pi * s2) + (np.asarray(y) - mean) ** 2 / s2)

    def __repr__(self) -> str:
        floor = "" if self.floor == NOISE_FLOOR else f", floor={self.floor!r}"
        return f"Gaussian(variance={self.variance!r}{floor})"


class Bernoulli(Likelihood):
    r"""Binary classification with the probit link, :math:`p(y = 1 \mid f) = \Phi(f)`,
    :math:`y \in \{0, 1\}`. Predictions in closed form, :math:`p(y = 1) = \Phi(\mu / \sqrt{1 + v})`.

    The variational expectations :math:`E[\log\Phi(sf)]`, :math:`f \sim N(\mu, v)`, by default
    (``num_points=None``) to full precision: the trapezoid rule in :math:`\xi = (f - \mu)/\sqrt v` on
    [-9, 9], whose error falls as :math:`e^{-2\pi d/h}` for a step h and an integrand analytic within d
    of the real axis (Trefethen & Weideman 2014, Thm 5.1). :math:`\log\Phi` is singular at the zeros
    of :math:`\Phi`, the nearest 2.8 from the real axis, i.e. :math:`d = 2.8/\sqrt v` in :math:`\xi`, so
    the step is chosen per row from its variance: 37 nodes up to :math:`v = 0.85`, 49 at
    :math:`v = 1`, more as :math:`\sqrt v` grows. Gauss–Hermite, which converges only as
    :math:`e^{-d\sqrt{2n}}`, is 6e-11 off with 20 nodes at the prior (:math:`\mu = 0, v = 1`) and 7e-4
    at v = 30; an integer ``num_points`` selects it with that many nodes.
    """

    #: NumPy's Gauss-Hermite rule overflows to NaN from 375 nodes on (measured with NumPy 1.26)
    max_points = 300
    #: the trapezoid's half-width in standard deviations, and its steps' singularity margin
    #: (2 pi d / h = 38: e^-38 = 3e-17)
    HALF_WIDTH, MARGIN, SINGULARITY = 9.0, 38.0, 2.8

    fields = Fields(config=("num_points",), transient=("nodes=_nodes", "weights=_weights"))

    def __init__(self, num_points: int | None = None) -> None:
        if num_points is None:
            self.num_points = None
            return
        self.num_points = check_int(num_points, "num_points", minimum=1)
        if self.num_points > self.max_points:
            raise ValueError(f"num_points must be at most {self.max_points}, got {num_points!r}")
        t, w = np.polynomial.hermite.hermgauss(self.num_points)
        self._nodes = np.sqrt(2.0) * t  # for N(0, 1): E[g] = sum w g(sqrt2 t) / sqrt(pi)
        self._weights = w / np.sqrt(np.pi)

    def _rules(self, var: np.ndarray):
        """``(rows, nodes, weights)`` per group of rows sharing a rule (for N(0, 1) in xi)."""
        if self.num_points is not None:
            yield slice(None), self._nodes, self._weights
            return
        step = np.minimum(0.5, 2.0 * np.pi * self.SINGULARITY / (self.MARGIN * np.sqrt(np.maximum(var, 1e-300))))
        # nodes per half rounded up to a multiple of 6: few distinct rules, each at least as fine as asked
        halves = 6 * np.ceil(self.HALF_WIDTH / (6.0 * step)).astype(np.int64)
        for k in np.unique(halves):
            h = self.HALF_WIDTH / k
            xi = h * np.arange(-k, k + 1, dtype=np.float64)
            yield halves == k, xi, h * np.exp(-0.5 * xi * xi) / np.sqrt(2.0 * np.pi)

    def prepare_targets(self, y: Any) -> Any:
        """Booleans as {0., 1.}."""
        y = y if hasattr(y, "dtype") else np.asarray(y)
        return y.astype(np.float64) if y.dtype == bool else y

    def check_targets(self, y: np.ndarray) -> None:
        """Targets must be 0 or 1."""
        if not np.all((y == 0) | (y == 1)):
            bad = np.unique(y[(y != 0) & (y != 1)])[:5]
            raise ValueError(f"Bernoulli likelihood needs y in {{0, 1}}; got values such as {bad.tolist()}")

    def variational_expectations(self, y, mu, var):
        r"""(E[log Phi(s f)], dE/dmu, dE/dvar) with s = 2y - 1, by the rule of the class docstring.

        With :math:`f = \mu + \sqrt v\,\xi`: :math:`dE/d\mu = E[g'(f)]`,
        :math:`dE/dv = E[g'(f)\,\xi] / (2\sqrt v)`, :math:`g = \log\Phi(s f)`."""
        sgn = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
        mu = np.asarray(mu, dtype=np.float64)
        var = np.broadcast_to(np.asarray(var, dtype=np.float64), mu.shape)
        sd = np.sqrt(np.maximum(var, 1e-300))
        e, de_dmu, de_dvar = np.empty_like(mu), np.empty_like(mu), np.empty_like(mu)
        for rows, nodes, weights in self._rules(var):
            f = mu[rows, None] + sd[rows, None] * nodes[None, :]
            z = sgn[rows, None] * f
            logp = log_ndtr(z)
            # d/df log Phi(s f) = s phi(z) / Phi(z) = s exp(log phi(z) - log Phi(z))
            g1 = sgn[rows, None] * np.exp(-0.5 * z * z - 0.5 * np.log(2 * np.pi) - logp)
            e[rows] = logp @ weights
            de_dmu[rows] = g1 @ weights
            de_dvar[rows] = (g1 * nodes[None, :]) @ weights / (2.0 * sd[rows])
        return e, de_dmu, de_dvar

    def predict_y(self, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:
        """:math:`p(y = 1)` and the Bernoulli variance :math:`p(1 - p)`."""
        p = ndtr(np.asarray(mean) / np.sqrt(1.0 + np.asarray(var)))
        return p, p * (1.0 - p)

    def log_predictive_density(self, y: Any, mean: Any, var: Any) -> np.ndarray:
        sgn = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
        return log_ndtr(sgn * np.asarray(mean) / np.sqrt(1.0 + np.asarray(var)))

    def __repr__(self) -> str:
        return "Bernoulli()" if self.num_points is None else f"Bernoulli(num_points={self.num_points})"
