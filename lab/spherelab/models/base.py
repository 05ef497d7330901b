r"""The base of every model: the objective over any subset of its parameter registry, and the
fitting loops (L-BFGS-B, Adam).

A model lists its trainable parameters once (:meth:`Model._registry`, entries of
:mod:`spherelab.parameters`): a name, how to read and write the value, and a transform — ``"free"`` (as is),
``"positive"`` (optimised as :math:`u` with value :math:`\mathrm{softplus}(u)`) or ``"tril"`` (a
lower-triangular square matrix stored by its ``tril_indices`` entries). Its ``elbo_and_gradient(X, y, num_data)``
returns the ELBO and a dict of derivatives with the same names (GPy's contract: the bound gives
matrix derivatives, features and kernels chain them); everything else — the flat vector, the
transforms' chain rule, the reject guard, the optimisers, the thread policy — is here.

Models share the kernel and likelihood they are given (GPflow's habit, no copy): fitting
changes them, and changing them changes the model (every cached posterior notices). Pass
``copy.deepcopy(kernel)`` to keep an original.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

import numpy as np

from .._state import Fields, Saveable
from .._validation import check_finite_array
from ..concurrency import reading, writing
from ..critical import critical, enter_region, leave_region
from ..distributed import InMemory, lazy_rows
from ..likelihoods import Gaussian, Likelihood
from ..linalg import NumericalFailure, add_jitter, jitter_backward
from ..optim import minimize_lbfgsb
from ..parameters import Param
from ..threads import entry_point, policy
from ..transaction import transactional

__all__ = ["Model", "threaded", "threaded_objective"]


def _work(model, X=None, *args, **kwargs) -> float:
    # flops of one pass over X's rows with P inducing variables: O(N P^2 + P^3)
    rows = getattr(X, "shape", (0,))[0] if X is not None else getattr(getattr(model, "_X", None), "shape", (0,))[0]
    P = model._num_inducing() if model._initialised() else 1
    return 2.0 * rows * P * P + float(P) ** 3


def _dim(model, *args, **kwargs) -> int:
    return model._num_inducing() if model._initialised() else 1


def threaded(method):
    """Decorator of the models' public methods taking (X, ...): the thread policy for their size
    (the device needs no context: a model passes its operations, ``self.ops``, to what it calls)."""
    return entry_point(_work, _dim)(method)


def threaded_objective(method):
    """The same for methods taking (theta, X, ...)."""
    return entry_point(lambda model, theta, X, *args, **kwargs: _work(model, X), _dim)(method)


_GUARDS = {None: None, "read": reading, "predict": reading, "write": writing, "fit": transactional}
_POLICIES = {None: None, "rows": threaded, "theta": threaded_objective}


def entry(kind: str | None = None, *, threads: str | None = None) -> Callable:
    """The one decorator of a model's public method, naming its kind. From the outside in it
    applies, always in this order:

    1. ``kind="predict"``: Dask rows mapped over their blocks, the outputs lazy Dask arrays
       (:func:`spherelab.distributed.lazy_rows`);
    2. the model's locks (:mod:`spherelab.concurrency`): the read side for ``"read"`` and
       ``"predict"``, the write side for ``"write"``; ``"fit"``: the transaction
       (:func:`~spherelab.transaction.transactional`: the write side, and the model put
       back as it was if the method raises);
    3. the thread policy for the size of the work (:mod:`spherelab.threads`): ``threads="rows"``
       for a method of ``(X, ...)``, ``"theta"`` for one of ``(theta, X, ...)``; None: the
       method sets its own (fits) or has no rows.
    """
    if kind not in _GUARDS or threads not in _POLICIES:
        raise ValueError(f"entry: kind must be one of {list(_GUARDS)} and threads one of {list(_POLICIES)}, "
                         f"got {kind!r}, {threads!r}")

    def decorate(method: Callable) -> Callable:
        wrapped = method
        for layer in (_POLICIES[threads], _GUARDS[kind], lazy_rows if kind == "predict" else None):
            wrapped = layer(wrapped) if layer is not None else wrapped
        wrapped.entry_kind = (kind, threads)
        return wrapped

    return decorate


@critical
def _write_all(entries: list[Param], values: list, old: list) -> None:
    """Write ``values`` to ``entries`` as one step: a Ctrl-C meanwhile is raised once all are
    written; a setter that refuses its value (a check stricter than the registry's) puts back the
    entries written before it, from ``old`` (their values read before: getters return copies or
    objects their setters replace, never write in place, so the old values are kept by reference)."""
    enter_region()
    try:
        done = 0
        try:
            for p, v in zip(entries, values):
                p.set(v)
                done += 1
        except BaseException:
            for p, v in zip(entries[:done], old[:done]):
                p.set(v)
            raise
    finally:
        leave_region()


class Model(Saveable):
    """Base of the models: the registry and the objective (module docstring).

    Public methods carry one decorator naming their kind, :func:`entry` (``predict_f`` and
    ``predict_y``: ``@entry("predict")``, so they accept a Dask array and return Dask arrays).

    Subclasses provide ``_registry()`` (a list of :class:`Param`), ``elbo_and_gradient``,
    ``initialise(X, seed)``, ``_initialised()``, ``_num_inducing()`` and ``_check_data``.
    """

    kernel: Any
    likelihood: Any
    jitter: float = 0.0
    #: the likelihoods the model supports
    likelihoods: tuple = (Likelihood,)

    #: every model's fields besides its own (:class:`~spherelab._state.Fields`): the fit report,
    #: the training data (saved only with ``include_data=True``), the device's operations and the
    #: optimiser's result (never saved); each model adds its own with ``Model.fields + Fields(...)``
    fields = Fields(report=("fit_report=fit_report_",), data=("X=_X", "y=_y"),
                    transient=("ops", "device", "optimizer_result", "trace"))

    def save(self, path, *, include_data: bool = False) -> None:
        """Save the model to ``path`` (``.npz`` + JSON metadata, no pickle; see
        :mod:`spherelab.persistence`): hyper-parameters and posterior, and the training data
        only with ``include_data``. ``spherelab.load(path)`` restores it."""
        from ..persistence import save

        save(self, path, include_data=include_data)

    def _pickled(self, state: dict) -> dict:
        """A pickle holds what :meth:`save` writes by default: no training data (absent as None,
        as after :func:`spherelab.load`), so a pickled model weighs its parameters and posterior,
        not its rows. ``copy.deepcopy`` keeps everything."""
        names = {self.fields.attribute(entry) for entry in self.fields.entries("data")}
        return {k: (None if k in names else v) for k, v in state.items()}

    def _restore(self, device: str) -> None:
        """After :func:`spherelab.load`: the device's operations, absent training data as None."""
        self._set_device(device)
        for entry in self.fields.entries("data"):
            self.__dict__.setdefault(self.fields.attribute(entry), None)

    def _training_data(self, X: Any, y: Any) -> tuple[Any, Any]:
        """``(X, y)``, defaulting to the training data (a clear error when a loaded model has none)."""
        if X is None or y is None:
            if getattr(self, "_X", None) is None:
                raise ValueError(f"{type(self).__name__} has no training data (loaded from a file saved without "
                                 "include_data=True): pass X and y")
            X = self._X if X is None else X
            y = self._y if y is None else y
        return X, y

    def _set_device(self, device: str) -> None:
        """Resolve the device's operations once (:func:`spherelab.backend.resolve`)."""
        from ..backend import resolve

        self.ops = resolve(device)
        self.device = self.ops.device

    def _set_likelihood(self, likelihood) -> None:
        likelihood = likelihood if likelihood is not None else Gaussian(1.0)
        if not isinstance(likelihood, self.likelihoods):
            names = " or ".join(t.__name__ for t in self.likelihoods)
            raise TypeError(f"likelihood must be a spherelab {names} (Gaussian, Bernoulli), got {likelihood!r}")
        self.likelihood = likelihood

    # ---- registry -------------------------------------------------------------------------
    def _registry(self) -> list[Param]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _entries(self, names: Sequence[str] | None) -> list[Param]:
        if not self._initialised():
            raise RuntimeError(f"{type(self).__name__} has no parameters yet: call fit(X, y) first")
        reg = self._registry()
        if names is None:
            return reg
        known = {p.name: p for p in reg}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown parameter name(s) {unknown}; this model has {list(known)}")
        return [known[n] for n in names]

    @property
    def num_inducing(self) -> int:
        """The number of inducing variables (all blocks, all sets)."""
        return self._num_inducing()

    @property
    def param_names(self) -> list[str]:
        """Names of the trainable parameters, in the order of the flat vector."""
        return [p.name for p in self._entries(None)]

    @entry("read")
    def get_params(self) -> dict[str, Any]:
        """Every trainable parameter's current value by name (copies)."""
        def copy(v):
            if isinstance(v, list):  # one array per block
                return [np.array(a, dtype=np.float64) for a in v]
            return np.array(v, dtype=np.float64) if np.ndim(v) else float(v)

        return {p.name: copy(p.get()) for p in self._entries(None)}

    @entry("write")
    def set_params(self, **values: Any) -> "Model":
        """Set parameters by name; shapes must match, positive ones must be finite and > 0.

        Returns
        -------
        self
        """
        entries = {p.name: p for p in self._entries(list(values))}
        checked = {name: entries[name].validate(v) for name, v in values.items()}  # all or nothing
        for name, v in checked.items():
            entries[name].set(v)
        return self

    def parameter_vector(self, names: Sequence[str] | None = None) -> np.ndarray:
        """The optimiser's flat vector (positive parameters as softplus-inverse, triangular
        matrices by their lower triangle) of ``names`` (default: all), in registry order."""
        entries = self._entries(names)
        return np.concatenate([p.pack() for p in entries]) if entries else np.zeros(0)

    @entry("write")
    def set_parameter_vector(self, theta: np.ndarray, names: Sequence[str] | None = None) -> None:
        """Inverse of :meth:`parameter_vector`: every value is computed and validated first, then
        all are written — or, if one is refused, none (the ones written are put back)."""
        entries = self._entries(names)
        theta = check_finite_array(theta, "theta")
        current = [p.get() for p in entries]
        shapes = [p.shape(v) for p, v in zip(entries, current)]
        sizes = [p.size(shape) for p, shape in zip(entries, shapes)]
        if theta.ndim != 1 or theta.size != sum(sizes):
            raise ValueError(f"theta must be a 1-d vector of {sum(sizes)} parameters, got shape {theta.shape}")
        bounds = np.cumsum([0] + sizes)
        values = [p.value_of(theta[a:b], shape) for p, shape, a, b in zip(entries, shapes, bounds[:-1], bounds[1:])]
        _write_all(entries, values, current)

    def _chain(self, g: dict[str, Any], theta: np.ndarray, entries: list[Param]) -> np.ndarray:
        out, i = [], 0
        for p in entries:
            n = p.size()
            out.append(p.chain(g[p.name], theta[i:i + n]))
            i += n
        return np.concatenate(out) if out else np.zeros(0)

    # ---- objective ------------------------------------------------------------------------
    def set_trial_point(self, theta: np.ndarray, names: Sequence[str] | None = None) -> None:
        """:meth:`set_parameter_vector` for an optimiser's trial point: a value that a setter refuses
        (a lengthscale of 1e-269 after a long line-search step, beyond the kernel's 1e-100 .. 1e100)
        raises :class:`~spherelab.linalg.NumericalFailure`, which the objectives turn into a
        rejected point, as for a failed Cholesky. A ``theta`` of the wrong length stays a
        ``ValueError`` (a caller's mistake, not a trial point)."""
        size = sum(p.size() for p in self._entries(names))  # counted, not packed: this runs per evaluation
        if np.ndim(theta) != 1 or np.size(theta) != size:
            raise ValueError(f"theta must be a 1-d vector of {size} parameters, got shape {np.shape(theta)}")
        try:
            self.set_parameter_vector(theta, names)
        except NumericalFailure:
            raise
        except ValueError as err:
            raise NumericalFailure(f"trial point outside a parameter's range: {err}") from err

    @staticmethod
    def negated(evaluate: Callable[[], tuple[float, np.ndarray]], size: int):
        """(-value, -gradient) of ``evaluate()``, or (1e300, 0) where it raises
        :class:`~spherelab.linalg.NumericalFailure` or gives a non-finite result, so that
        L-BFGS-B steps back instead of into NaN. Any other exception is a bug and propagates."""
        try:
            with np.errstate(all="ignore"):  # judged by the finiteness check below
                value, grad = evaluate()
        except (NumericalFailure, FloatingPointError):
            return 1e300, np.zeros(size)
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            return 1e300, np.zeros(size)
        return -value, -grad

    @entry(threads="theta")
    def objective(self, theta: np.ndarray, X: Any, y: Any, *, names: Sequence[str] | None = None,
                  num_data: int | None = None) -> tuple[float, np.ndarray]:
        """The negated ELBO and its gradient over the flat vector ``theta`` of ``names``
        (default: every parameter; the model is left at ``theta``). ``num_data`` > len(y) makes
        it a minibatch estimate. Rejected trial points give (1e300, 0)."""
        entries = self._entries(names)
        theta = np.asarray(theta, dtype=np.float64)

        def evaluate():
            self.set_trial_point(theta, names)
            value, g = self._objective_terms(X, y, num_data, names)
            return value, self._chain(g, theta, entries)

        return self.negated(evaluate, theta.size)

    def _objective_terms(self, X: Any, y: Any, num_data: int | None, names: Sequence[str] | None):
        """The ELBO and the gradient dict behind :meth:`objective`; a model whose derivatives cost
        differently by name may skip those not in ``names`` (default: :meth:`elbo_and_gradient`)."""
        return self.elbo_and_gradient(X, y, num_data)

    def _minimize(self, names: Sequence[str] | None, evaluate: Callable[[], tuple[float, dict]],
                  maxiter: int, ftol: float | None = None, x0: np.ndarray | None = None, progress=None,
                  max_time: float | None = None):
        """L-BFGS-B over the parameters ``names`` of ``evaluate() -> (value, gradient dict)``
        (the registry's transforms applied) from ``x0`` (default: the current parameters); the
        model is left at the optimum. ``progress``: a :class:`~spherelab.progress.FitProgress`
        told the bound of each iterate; ``max_time``: stop at the first iterate after so many seconds."""
        entries = self._entries(names)

        def fun(theta):
            def ev():
                self.set_trial_point(theta, names)
                value, g = evaluate()
                return value, self._chain(g, theta, entries)

            return self.negated(ev, theta.size)

        told = None if progress is None else (lambda value: progress(-value))  # L-BFGS-B minimises -bound
        result = minimize_lbfgsb(fun, self.parameter_vector(names) if x0 is None else x0, maxiter, ftol=ftol,
                                 progress=told, max_time=max_time)
        self.set_parameter_vector(result.x, names)
        return result

    def _report_fit(self, results: dict[str, Any]) -> list[str]:
        """Record how each optimisation stage ended in ``fit_report_`` and warn about abnormal
        ends (:func:`spherelab.models.report.report_fit`). Returns the warnings."""
        from .report import report_fit

        return report_fit(self, results)

    # ---- helpers shared by the inducing-point models --------------------------------------
    def _with_jitter(self, A: np.ndarray) -> np.ndarray:
        return add_jitter(A, self.jitter)

    def _jitter_backward(self, G: np.ndarray) -> np.ndarray:
        return jitter_backward(G, self.jitter)

    @contextlib.contextmanager
    def _threads(self, rows: int):
        """The thread policy for passes over ``rows`` rows (their work: :meth:`_pass_work`), entered
        once around a fit, the same way by every model."""
        with policy(self._pass_work(rows), self._num_inducing()):
            yield

    def _pass_work(self, rows: int) -> float:
        """Flops of one objective evaluation over ``rows`` rows: O(rows P^2 + P^3) for P inducing
        variables."""
        P = self._num_inducing()
        return 2.0 * rows * P * P + float(P) ** 3

    def _check_fitted(self) -> None:
        if not self._initialised():
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(X, y) first")

    def _check_inputs(self, X: Any) -> np.ndarray:
        """Prediction inputs: a finite 2-d float array with the training inputs' column count."""
        X = check_finite_array(X, "X", ndim=2)
        D = getattr(self, "_input_dim", None)
        if D is not None and X.shape[1] != D:
            raise ValueError(f"X must have {D} columns (as the training inputs), got shape {X.shape}")
        check_lift = getattr(getattr(self, "kernel", None), "check_lift", None)
        if check_lift is not None:  # named as the user's X, not as the kernel's second argument
            check_lift(X, "X")
        return X

    def _check_data(self, X, y):
        return InMemory(X, y).checked(self.likelihood)  # (the values, and the targets as the likelihood reads them)

    @entry("predict")
    def predict_y(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (for Bernoulli: the probability of 1 and its
        Bernoulli variance); a Dask ``X`` gives Dask arrays, lazily."""
        return self.likelihood.predict_y(*self.predict_f(X))
