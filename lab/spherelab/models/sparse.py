r"""The fits of the inducing-point models (:class:`~spherelab.OrthogonalSVGP`,
:class:`~spherelab.HarmonicSVGP`): L-BFGS-B jointly or on the collapsed bound (q re-solved in
closed form at every evaluation, gradients by the envelope theorem), and Adam on minibatches."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np

from .._validation import fit_options
from ..distributed import rows
from ..likelihoods import Gaussian
from ..optim import minimize_lbfgsb
from ..progress import FitProgress, check_progress
from ..rows.steps import AdamSteps
from .base import Model, entry
from .scale import warn_off_scale

__all__ = ["SparseModel"]


class SparseModel(Model):
    """``fit`` (L-BFGS-B, jointly or on the collapsed bound) and ``fit_svi`` (Adam on minibatches)
    for the inducing-point models (:class:`~spherelab.OrthogonalSVGP`,
    :class:`~spherelab.HarmonicSVGP`), whose variational parameters are registered as
    ``q_*`` entries."""

    @property
    def collapsed_names(self) -> list[str]:
        """The parameters of the collapsed bound: every registered name but q's."""
        return [p.name for p in self._entries(None) if not p.name.startswith("q_")]

    def _collapsed_elbo_and_gradient(self, X, y):
        """The ELBO at the optimal q for the current other parameters, with its gradient (generic:
        :meth:`optimal_q`, then the bound; a model may fuse the two passes)."""
        self.optimal_q(X, y)
        return self.elbo_and_gradient(X, y)

    @entry(threads="theta")
    def collapsed_objective(self, theta: np.ndarray, X: Any, y: Any) -> tuple[float, np.ndarray]:
        """The negated collapsed bound :math:`\\max_q` ELBO and its gradient over every
        parameter except q (flat, registry order), with q re-solved in closed form."""
        names = self.collapsed_names
        entries = self._entries(names)
        theta = np.asarray(theta, dtype=np.float64)

        def evaluate():
            self.set_trial_point(theta, names)
            # envelope theorem: at the optimal q the gradient in q vanishes, so the partial
            # gradient in the other parameters is the gradient of the collapsed bound
            value, g = self._collapsed_elbo_and_gradient(X, y)
            return value, self._chain(g, theta, entries)

        return self.negated(evaluate, theta.size)

    @contextlib.contextmanager
    def holding_rows(self, X, y) -> Iterator[None]:
        """A context for repeated evaluations on the same rows (a fit's, or a user's timing loop):
        a model that keeps its rows on its device copies them there once on entry and reuses them
        until exit (default: nothing to hold)."""
        yield

    def _start(self, X, y, seed: int, init_q: str) -> None:
        # q at the prior (m = 0) lets the first steps shrink the kernel variance before the mean
        # has learnt anything, a basin where all signal is noise (measured: 2 of 5 kin8nm splits,
        # SE kernel, ReLU units); the optimal q for the initial hyper-parameters avoids it
        if init_q not in ("optimal", "prior"):
            raise ValueError(f"init_q must be 'optimal' or 'prior', got {init_q!r}")
        if self._initialised():
            return
        self.initialise(X, seed)
        if init_q == "optimal" and isinstance(self.likelihood, Gaussian):
            self.optimal_q(X, y)

    @entry("fit")
    def fit(self, X: Any, y: Any, *, optimize: bool = True, maxiter: int = 1000, seed: int = 0,
            init_q: str = "optimal", collapsed: bool | None = None, max_time: float | None = None,
            callback: Callable[[np.ndarray], Any] | None = None, progress: bool | None = None):
        """Full-batch fit of every parameter by L-BFGS-B (``optimize=False``: initialise only).

        A model not yet initialised is initialised first (``seed``), with q at its optimum for
        the initial hyper-parameters when the likelihood is Gaussian (``init_q="optimal"``, one
        streamed pass over the rows) or at the prior (``init_q="prior"``; always for Bernoulli).

        ``collapsed`` (default: True for a Gaussian likelihood) optimises the collapsed bound
        (the ELBO maximised over q) over the other parameters (features, inducing or orthogonal
        inputs, kernel, noise), q being re-solved in closed form at every evaluation
        (:meth:`optimal_q`): L-BFGS-B then works in far fewer dimensions, and no step can leave
        q stale while the hyper-parameters move (far better optima in a fixed budget:
        ``benchmarks/RESULTS.md``, "The collapsed bound"). ``collapsed=False`` optimises q
        jointly with the rest. ``progress``: a bar with the iteration, the bound and the elapsed
        time (True; None: once the fit has run a few seconds in an interactive session).

        Returns
        -------
        self
        """
        optimize, maxiter, seed, collapsed, max_time = fit_options(
            optimize=optimize, maxiter=maxiter, seed=seed, collapsed=collapsed, max_time=max_time)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be a function of the parameter vector (or None), got {callback!r}")
        check_progress(progress)
        X, y = self._check_data(X, y)
        gaussian = isinstance(self.likelihood, Gaussian)
        warn_off_scale(f"{type(self).__name__}.fit", X, y if gaussian else None)
        if collapsed is None:
            collapsed = gaussian
        if collapsed and not gaussian:
            raise TypeError(f"collapsed=True needs a Gaussian likelihood, got {type(self.likelihood).__name__}")
        self._start(X, y, seed, init_q)
        if optimize:
            bar = FitProgress(progress, f"{type(self).__name__}.fit", total=maxiter, max_time=max_time)
            told = lambda value: bar(-value)  # noqa: E731  (L-BFGS-B minimises the negated bound)
            with self._threads(X.shape[0]), self.holding_rows(X, y), contextlib.closing(bar):
                if collapsed:
                    names = self.collapsed_names
                    res = minimize_lbfgsb(self.collapsed_objective, self.parameter_vector(names), maxiter,
                                          args=(X, y), max_time=max_time, callback=callback, progress=told)
                    self.set_parameter_vector(res.x, names)
                    self.optimal_q(X, y)
                else:
                    res = minimize_lbfgsb(self.objective, self.parameter_vector(), maxiter, args=(X, y),
                                          max_time=max_time, callback=callback, progress=told)
                    self.set_parameter_vector(res.x)
            self.optimizer_result = res
            self._report_fit({"fit": res})
        self._X, self._y = X, y
        return self

    @entry("fit")
    def fit_svi(self, X: Any, y: Any, *, batch_size: int = 256, iterations: int = 1000, lr: float = 0.01,
                seed: int = 0, init_q: str = "optimal", progress: bool | None = None):
        """Minibatch fit of every parameter by Adam on the unbiased ELBO estimate; the ELBO
        estimate of every step is kept in ``trace``. Initialisation and ``progress`` as in :meth:`fit`.

        Returns
        -------
        self
        """
        rows(X, y).require(f"{type(self).__name__}.fit_svi draws minibatches from a NumPy array; for a Dask "
                           "array use fit (its passes run block by block) or compute a sample first")
        B, iterations, lr, seed = fit_options(batch_size=batch_size, iterations=iterations, lr=lr, seed=seed)
        check_progress(progress)
        X, y = self._check_data(X, y)
        warn_off_scale(f"{type(self).__name__}.fit_svi", X, y if isinstance(self.likelihood, Gaussian) else None)
        self._start(X, y, seed, init_q)
        rng = np.random.default_rng(seed)
        B = min(B, X.shape[0])
        steps = self._svi_steps(X, y, lr)
        self.trace = []
        bar = FitProgress(progress, f"{type(self).__name__}.fit_svi", total=iterations)
        with self._threads(B), contextlib.closing(bar):
            for _ in range(iterations):
                value = steps.step(rng.choice(X.shape[0], B, replace=False))
                self.trace.append(value)
                bar(value)
            steps.finish()
        self._X, self._y = X, y
        return self

    def _svi_steps(self, X: np.ndarray, y: np.ndarray, lr: float) -> "AdamSteps":
        """The stepper of :meth:`fit_svi` (a model with a faster one overrides this)."""
        return AdamSteps(self, X, y, lr)

    #: the name the inducing-point models had for :meth:`fit_svi`
    fit_adam = fit_svi
