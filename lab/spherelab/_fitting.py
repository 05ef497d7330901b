"""The optimisation loops shared by the inducing-point models (:class:`~spherelab.OrthogonalSVGP`,
:class:`~spherelab.HarmonicSVGP`): full-batch L-BFGS-B and minibatch Adam over one flat
parameter vector.

A model provides ``jitter``, ``_check_data(X, y)``, ``initialise(X, seed)``, ``_initialised()``,
``_num_inducing()``, ``_pack()``, ``_unpack(theta)``, ``elbo_and_gradient(X, y, num_data)``,
``_grad_vector(g, theta)`` and a ``blas_threads`` attribute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from ._blas import blas_threads, resolve_threads
from ._validation import check_int
from .likelihoods import Gaussian
from .optimizers import Adam

__all__ = ["FitMixin"]


def _softplus(u):
    return np.logaddexp(0.0, u)


def _softplus_inverse(x):
    # a parameter at exactly 0 (bias = 0) maps to softplus(-690) = 1e-300, i.e. stays ~0
    x = np.maximum(np.asarray(x, dtype=np.float64), 1e-300)
    return np.where(x > 30, x, np.log(np.expm1(np.minimum(x, 30))))


def add_jitter(A: np.ndarray, jitter: float) -> np.ndarray:
    r""":math:`A + j\,\mathrm{mean}(\mathrm{diag}A)\,I` (relative jitter; ``A`` unchanged for j = 0)."""
    if jitter == 0.0 or A.shape[0] == 0:
        return A
    return A + jitter * float(np.mean(np.diag(A))) * np.eye(A.shape[0])


def jitter_backward(G: np.ndarray, jitter: float) -> np.ndarray:
    r"""Reverse mode of :func:`add_jitter`: :math:`G + (j/n)\,\mathrm{tr}(G)\,I`."""
    if jitter == 0.0 or G.shape[0] == 0:
        return G
    return G + jitter * np.trace(G) / G.shape[0] * np.eye(G.shape[0])


class FlatReader:
    """Reads consecutive pieces of a flat parameter vector (the inverse of ``_pack``): vectors,
    lower-triangular matrices stored as their ``tril_indices`` entries, and the remainder."""

    def __init__(self, theta: np.ndarray):
        self.theta = theta
        self.i = 0

    def vector(self, n: int) -> np.ndarray:
        out = self.theta[self.i : self.i + n].copy()
        self.i += n
        return out

    def tril(self, m: int) -> np.ndarray:
        L = np.zeros((m, m))
        L[np.tril_indices(m)] = self.vector(m * (m + 1) // 2)
        return L

    def rest(self) -> np.ndarray:
        return self.theta[self.i :]


class FitMixin:
    """``fit`` (L-BFGS-B) and ``fit_adam`` (minibatches) on the negated ELBO, and the positive
    hyper-parameters' part of the flat vector (kernel variance, shape parameters, bias, input
    scales, Gaussian noise; softplus-parameterised) at its end."""

    def _with_jitter(self, A: np.ndarray) -> np.ndarray:
        return add_jitter(A, self.jitter)

    def _jitter_backward(self, G: np.ndarray) -> np.ndarray:
        return jitter_backward(G, self.jitter)

    def _hyper_names(self) -> list[str]:
        return ["variance", *self.kernel.shape_params, "bias"]

    def _pack_hypers(self) -> np.ndarray:
        hyp = [getattr(self.kernel, k) for k in self._hyper_names()] + list(np.atleast_1d(self.kernel.input_scale))
        if isinstance(self.likelihood, Gaussian):
            hyp.append(self.likelihood.variance)
        return _softplus_inverse(np.array(hyp, dtype=np.float64))

    def _unpack_hypers(self, u: np.ndarray) -> None:
        hyp = _softplus(u)
        names = self._hyper_names()
        for k, v in zip(names, hyp):
            setattr(self.kernel, k, float(v))
        n_scale = np.atleast_1d(self.kernel.input_scale).size
        sc = hyp[len(names) : len(names) + n_scale]
        self.kernel.input_scale = float(sc[0]) if np.ndim(self.kernel.input_scale) == 0 else sc.copy()
        if isinstance(self.likelihood, Gaussian):
            self.likelihood.variance = float(hyp[-1])

    def _hyper_gradient(self, g: dict[str, Any], theta: np.ndarray) -> np.ndarray:
        hyp = [g[k] for k in self._hyper_names()] + list(np.atleast_1d(g["input_scale"]))
        if isinstance(self.likelihood, Gaussian):
            hyp.append(g["noise"])
        return np.array(hyp) * expit(theta[len(theta) - len(hyp):])

    @staticmethod
    def _negated(evaluate, size: int):
        """(-value, -gradient) of ``evaluate()``, or (1e300, 0) where it fails or is not finite,
        so that L-BFGS-B backs off instead of stepping into NaN."""
        try:
            with np.errstate(all="ignore"):  # judged by the finiteness check below
                value, grad = evaluate()
        except (np.linalg.LinAlgError, ValueError, FloatingPointError):
            return 1e300, np.zeros(size)
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            return 1e300, np.zeros(size)
        return -value, -grad

    def _objective(self, theta, X, y, num_data):
        self._unpack(theta)

        def evaluate():
            value, g = self.elbo_and_gradient(X, y, num_data)
            return value, self._grad_vector(g, theta)

        return self._negated(evaluate, theta.size)

    def _collapsed_elbo_and_gradient(self, X, y):
        """The ELBO at the optimal q for the current other parameters, with its gradient (generic:
        :meth:`optimal_q`, then the bound; a model may fuse the two passes)."""
        self.optimal_q(X, y)
        return self.elbo_and_gradient(X, y)

    def _collapsed_objective(self, rest, X, y):
        # envelope theorem: at the optimal q the gradient in q vanishes, so the partial gradient
        # in the other parameters is the gradient of the collapsed bound max_q ELBO
        nq = self._q_size()
        theta = np.concatenate([self._pack()[:nq], rest])
        self._unpack(theta)

        def evaluate():
            value, g = self._collapsed_elbo_and_gradient(X, y)
            return value, self._grad_vector(g, theta)[nq:]

        return self._negated(evaluate, rest.size)

    def _threads(self):
        return blas_threads(resolve_threads(self.blas_threads, self._num_inducing()))

    def _start(self, X, y, seed: int, init_q: str) -> None:
        # q at the prior (m = 0) lets the first steps shrink the kernel variance before the mean
        # has learnt anything, a basin where all signal is noise (measured: 2 of 5 kin8nm splits,
        # SE kernel, ReLU units); the optimal q for the initial hyper-parameters avoids it
        if init_q not in ("optimal", "prior"):
            raise ValueError(f"init_q must be 'optimal' or 'prior', got {init_q!r}")
        if self._initialised():
            return
        self.initialise(X, seed)
        if init_q == "optimal" and isinstance(self.likelihood, Gaussian) and hasattr(self, "optimal_q"):
            self.optimal_q(X, y)

    def fit(self, X: Any, y: Any, optimize: bool = True, *, maxiter: int = 1000, seed: int = 0,
            init_q: str = "optimal", collapsed: bool = False):
        """Full-batch fit of every parameter by L-BFGS-B (``optimize=False``: initialise only).

        A model not yet initialised is initialised first (``seed``), with q at its optimum for
        the initial hyper-parameters when the likelihood is Gaussian (``init_q="optimal"``, one
        streamed pass over the rows) or at the prior (``init_q="prior"``; always for Bernoulli).

        ``collapsed=True`` (Gaussian likelihood only) optimises the collapsed bound
        (the ELBO maximised over q) over the other parameters (features, inducing or orthogonal
        inputs, kernel, noise) instead, q being re-solved in closed form at every evaluation
        (:meth:`optimal_q`): L-BFGS-B then works in far fewer dimensions, and no step can leave
        q stale while the hyper-parameters move. Same cost per evaluation on the
        sufficient-statistics path of :class:`OrthogonalSVGP`.

        Returns
        -------
        self
        """
        X, y = self._check_data(X, y)
        if collapsed and not isinstance(self.likelihood, Gaussian):
            raise ValueError(f"collapsed=True needs a Gaussian likelihood, got {type(self.likelihood).__name__}")
        self._start(X, y, seed, init_q)
        if optimize:
            with self._threads():
                if collapsed:
                    nq = self._q_size()
                    res = minimize(self._collapsed_objective, self._pack()[nq:], args=(X, y), jac=True,
                                   method="L-BFGS-B", options={"maxiter": int(maxiter)})
                    self._unpack(np.concatenate([self._pack()[:nq], res.x]))
                    self.optimal_q(X, y)
                else:
                    res = minimize(self._objective, self._pack(), args=(X, y, X.shape[0]), jac=True,
                                   method="L-BFGS-B", options={"maxiter": int(maxiter)})
                    self._unpack(res.x)
            self.optimizer_result = res
        self._X, self._y = X, y
        return self

    def fit_adam(self, X: Any, y: Any, *, batch_size: int = 256, iterations: int = 1000, lr: float = 0.01,
                 seed: int = 0, init_q: str = "optimal"):
        """Minibatch fit of every parameter by Adam on the unbiased ELBO estimate; the ELBO
        estimate of every step is kept in ``trace``. Initialisation as in :meth:`fit`.

        Returns
        -------
        self
        """
        X, y = self._check_data(X, y)
        self._start(X, y, seed, init_q)
        rng = np.random.default_rng(seed)
        B = min(check_int(batch_size, "batch_size", minimum=1), X.shape[0])
        theta = self._pack()
        opt = Adam(theta, lr)
        self.trace = []
        with self._threads():
            for _ in range(int(iterations)):
                idx = rng.choice(X.shape[0], B, replace=False)
                value, grad = self._objective(theta, X[idx], y[idx], X.shape[0])
                if value >= 1e300:
                    raise np.linalg.LinAlgError("a minibatch step left the usable range (Cholesky failed); lower lr")
                theta = opt.step(-grad)  # _objective returns the negated ELBO gradient
                self.trace.append(-value)
        self._unpack(theta)
        self._X, self._y = X, y
        return self
