"""scikit-learn estimators over the models: ``BudgetRegressor`` (start here), ``VISHRegressor``,
``InducingPointRegressor``, ``HybridRegressor``, ``VISHClassifier`` and ``OrthogonalRegressor``, for
pipelines, grid searches and cross-validation.

Thin wrappers with scikit-learn's conventions: the constructor only stores its arguments,
``fit`` standardises the inputs (and, for regression, the targets: ``normalize_y``) — the lift
:math:`[x / s, b]` assumes unit-scale inputs — fits the model and returns ``self``; the fitted
state ends in ``_`` (``model_``, ``n_features_in_``, ...); ``predict`` (with ``return_std``),
``predict_proba`` and ``score`` (R² / accuracy) follow the usual meanings. scikit-learn is
needed only to use these classes (``pip install scikit-learn``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import kernels as K
from ._estimator_state import all_or_nothing, scale_of, seed_of, serving
from ._listing import own_names
from ._validation import check_int
from .features import InducingPoints, greedy_variance, kmeans_centres
from .likelihoods import Bernoulli, Gaussian
from .models import VISH, OrthogonalSVGP
from .selection import fit_budget, fit_hybrid

__all__ = ["BudgetRegressor", "VISHRegressor", "InducingPointRegressor", "HybridRegressor", "VISHClassifier",
           "OrthogonalRegressor"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def _kernel(kernel: Any):
    import copy

    return K.Matern(1.5, 1.0) if kernel is None else copy.deepcopy(kernel)  # the estimator's own copy


class _Standardised(BaseEstimator):
    """Input standardisation shared by the estimators (constant columns keep scale 1)."""

    def _fit_inputs(self, X, y, **kwargs):
        # two rows at least: one cannot separate signal from noise (the fit would end on the noise floor)
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=kwargs.pop("y_numeric", True),
                             ensure_min_samples=2, **kwargs)
        self.X_mean_, scale = scale_of(X, axis=0)
        self.X_scale_ = np.where(scale > 0, scale, 1.0)
        # a column constant up to rounding: 0 exactly, not its rounding around the mean
        return np.where(scale > 0, (X - self.X_mean_) / self.X_scale_, 0.0), y

    def _inputs(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return (X - self.X_mean_) / self.X_scale_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


class _Regressor(RegressorMixin, _Standardised):
    def _fit_targets(self, y):
        y = np.asarray(y, dtype=np.float64)
        if self.normalize_y:
            mean, sd = scale_of(y)
            self.y_mean_, sd = float(mean), float(sd)
            self.y_scale_ = sd if sd > 0 else 1.0
        else:
            self.y_mean_, self.y_scale_ = 0.0, 1.0
        return (y - self.y_mean_) / self.y_scale_

    @serving
    def predict(self, X, return_std: bool = False):
        """Predictive mean of y ``(N,)`` (and its standard deviation, noise included, with
        ``return_std``), in the targets' units."""
        X = self._inputs(X)
        try:
            mean, var = self.model_.predict_y(X)
        except ValueError as err:
            if str(err).startswith("the lift"):  # the user never saw the scaled X the message is about
                raise ValueError(f"X, scaled by the training inputs' means and scales, lies too far out for the "
                                 f"model: {err}") from None
            raise
        mean = self.y_mean_ + self.y_scale_ * mean
        if return_std:
            return mean, self.y_scale_ * np.sqrt(var)
        return mean


class BudgetRegressor(_Regressor):
    """The model with the best validation NLPD that fits in ``seconds``
    (:func:`spherelab.fit`): VISH and inducing points of growing size, each with and without a
    nearest-neighbour correction of its residual (:class:`~spherelab.models.NeighbourResidual`),
    chosen on held-out training rows and refitted on every row. ``choice_`` names the model and
    ``model_.fit_report_["budget"]`` lists what was tried and why it was chosen.

    Parameters
    ----------
    seconds
        The time budget of ``fit`` (it ends within about 10 % of it, or sooner when larger models
        stop helping).
    validation
        The fraction of the rows held out to choose.
    normalize_y, random_state, progress
        Target standardisation, the seed, a progress bar (None: after a few seconds, interactively).
    """

    def __init__(self, seconds: float = 60.0, validation: float = 0.1, normalize_y: bool = True,
                 random_state: int = 0, progress: bool | None = None):
        self.seconds = seconds
        self.validation = validation
        self.normalize_y = normalize_y
        self.random_state = random_state
        self.progress = progress

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and ``y`` ``(N,)``; returns ``self``."""
        X, y = self._fit_inputs(X, y)
        self.model_ = fit_budget(X, self._fit_targets(y), self.seconds, validation=self.validation,
                                 seed=seed_of(self.random_state), progress=self.progress)
        self.choice_ = self.model_.fit_report_["budget"]["chosen"]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True  # what fits in the seconds depends on the machine's speed
        return tags


class VISHRegressor(_Regressor):
    """Regression with VISH (Dutordoir, Durrande & Hensman 2020): spherical-harmonic features up to
    ``max_degree``, the collapsed bound, ``fit`` as :meth:`spherelab.VISH.fit`.

    Parameters
    ----------
    kernel
        A spherelab kernel (copied; default Matérn-3/2).
    max_degree
        Largest degree of the harmonics (M grows like the degree to the power of the inputs).
    noise
        Initial noise variance (of the standardised targets).
    prior
        ``"features"`` (default) or ``"kernel"`` (see :class:`spherelab.VISH`).
    normalize_y
        Standardise the targets before fitting (predictions are returned in their units).
    maxiter, lift_subsample, random_state, max_time
        Passed to :meth:`spherelab.VISH.fit` (``random_state`` as ``seed``); ``max_time`` (default
        60 s) bounds the fit.
    """

    def __init__(self, kernel=None, max_degree: int = 3, noise: float = 0.1, prior: str = "features",
                 normalize_y: bool = True, maxiter: int = 500, lift_subsample: int = 20_000,
                 random_state: int = 0, max_time: float | None = 60.0):
        self.kernel = kernel
        self.max_degree = max_degree
        self.noise = noise
        self.prior = prior
        self.normalize_y = normalize_y
        self.maxiter = maxiter
        self.lift_subsample = lift_subsample
        self.random_state = random_state
        self.max_time = max_time

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and ``y`` ``(N,)``; returns ``self``."""
        X, y = self._fit_inputs(X, y)
        model = VISH(_kernel(self.kernel), self.max_degree, Gaussian(self.noise), prior=self.prior)
        self.model_ = model.fit(X, self._fit_targets(y), maxiter=self.maxiter, lift_subsample=self.lift_subsample,
                                seed=seed_of(self.random_state), max_time=self.max_time)
        return self


class InducingPointRegressor(_Regressor):
    """Regression with ``num_inducing`` inducing points on the lifted sphere's kernel, their inputs
    started at k-means centres of the rows (``inputs="kmeans"``, :func:`~spherelab.features.kmeans_centres`)
    or at the rows where the prior's conditional variance is largest (``"greedy"``, Burt, Rasmussen
    & van der Wilk 2020, Alg. 1), among at most 20 000 rows, and then trained with every
    hyper-parameter on the collapsed bound (Titsias 2009): an SGPR. On the frontier's power and
    protein (``benchmarks/RESULTS.md``) it is the spherelab model with the best test NLPD per
    second, and k-means starts reach a given NLPD sooner there than the greedy rows; VISH leads on
    kin8nm.

    Parameters
    ----------
    kernel
        A spherelab kernel (copied); default Matérn-3/2 with ``input_scale`` sqrt(D), which keeps
        the standardised rows' norms near 1 after the lift.
    num_inducing
        P, the inducing points (at most the number of rows).
    inputs
        Where the inducing inputs start: ``"kmeans"`` (default) or ``"greedy"``.
    max_time
        Seconds for L-BFGS-B at most (default 60; None: ``maxiter`` alone stops it).
    noise, normalize_y, maxiter, random_state
        Initial noise variance (of the standardised targets), target standardisation, L-BFGS-B's
        iteration limit, the seed of the candidate rows.
    """

    def __init__(self, kernel=None, num_inducing: int = 256, inputs: str = "kmeans", noise: float = 0.1,
                 normalize_y: bool = True, maxiter: int = 1000, max_time: float | None = 60.0, random_state: int = 0):
        self.kernel = kernel
        self.num_inducing = num_inducing
        self.inputs = inputs
        self.noise = noise
        self.normalize_y = normalize_y
        self.maxiter = maxiter
        self.max_time = max_time
        self.random_state = random_state

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and ``y`` ``(N,)``; returns ``self``."""
        X, y = self._fit_inputs(X, y)
        D = X.shape[1]
        kernel = (K.Matern(1.5, 1.0, bias=1.0, input_scale=np.full(D, np.sqrt(D))) if self.kernel is None
                  else _kernel(self.kernel))
        if self.inputs not in ("kmeans", "greedy"):
            raise ValueError(f"inputs must be 'kmeans' or 'greedy', got {self.inputs!r}")
        seed = seed_of(self.random_state)
        rng = np.random.default_rng(seed)
        candidates = X if X.shape[0] <= 20_000 else X[rng.choice(X.shape[0], 20_000, replace=False)]
        P = min(check_int(self.num_inducing, "num_inducing", minimum=1), candidates.shape[0])
        Z = (kmeans_centres(candidates, P, seed=seed) if self.inputs == "kmeans"
             else candidates[greedy_variance(kernel, candidates, P)])
        model = OrthogonalSVGP(kernel, InducingPoints(Z), 0, Gaussian(self.noise))
        self.model_ = model.fit(X, self._fit_targets(y), maxiter=self.maxiter, max_time=self.max_time,
                                seed=seed_of(self.random_state))
        return self


class HybridRegressor(_Regressor):
    """Regression with spherical harmonics for u and orthogonal inducing points for v (Tiao, thesis
    §3.4), fitted as :func:`spherelab.selection.fit_hybrid`: VISH at ``degree`` first, then
    ``num_orthogonal`` points where its posterior variance is largest, then every parameter on the
    collapsed bound.

    Parameters
    ----------
    kernel
        A spherelab kernel (copied; default Matérn-3/2).
    degree, num_orthogonal
        L and K, both or neither; neither (the default): chosen from ``time_budget``.
    time_budget
        Seconds for the whole fit; with an explicit pair, a limit only.
    noise, normalize_y, maxiter, random_state
        Initial noise variance (of the standardised targets), target standardisation, L-BFGS-B's
        limit per stage, the seed.

    The chosen pair is ``degree_`` and ``num_orthogonal_`` after ``fit``.
    """

    def __init__(self, kernel=None, degree: int | None = None, num_orthogonal: int | None = None,
                 time_budget: float | None = 60.0, noise: float = 0.1,
                 normalize_y: bool = True, maxiter: int = 1000, random_state: int = 0):
        self.kernel = kernel
        self.degree = degree
        self.num_orthogonal = num_orthogonal
        self.time_budget = time_budget
        self.noise = noise
        self.normalize_y = normalize_y
        self.maxiter = maxiter
        self.random_state = random_state

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and ``y`` ``(N,)``; returns ``self``."""
        X, y = self._fit_inputs(X, y)
        self.model_ = fit_hybrid(_kernel(self.kernel), X, self._fit_targets(y), degree=self.degree,
                                 num_orthogonal=self.num_orthogonal, time_budget=self.time_budget,
                                 likelihood=Gaussian(self.noise), maxiter=self.maxiter,
                                 seed=seed_of(self.random_state))
        self.degree_ = self.model_.features.max_degree
        self.num_orthogonal_ = self.model_.num_orthogonal
        return self


class OrthogonalRegressor(_Regressor):
    """Regression with the orthogonally decoupled SVGP (Shi, Titsias & Mnih 2020): ``num_inducing``
    inducing points and ``num_orthogonal`` more in the orthogonal complement, fitted by L-BFGS-B on
    the collapsed bound.

    ``inputs="kmeans"`` (default) starts the inducing points at k-means centres of the
    standardised rows (:func:`~spherelab.features.kmeans_centres`) and the orthogonal ones at the
    rows of largest conditional variance given them (``orthogonal_inputs="greedy"``);
    ``"random"`` starts both at rows drawn with ``random_state`` (the inducing points shifted by
    1e-3 so that none coincides with an orthogonal one). ``max_time`` (default 60 s) bounds the fit."""

    def __init__(self, kernel=None, num_inducing: int = 16, num_orthogonal: int = 16, noise: float = 0.1,
                 normalize_y: bool = True, maxiter: int = 200, random_state: int = 0, inputs: str = "kmeans",
                 max_time: float | None = 60.0):
        self.kernel = kernel
        self.num_inducing = num_inducing
        self.num_orthogonal = num_orthogonal
        self.noise = noise
        self.normalize_y = normalize_y
        self.maxiter = maxiter
        self.random_state = random_state
        self.inputs = inputs
        self.max_time = max_time

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and ``y`` ``(N,)``; returns ``self``."""
        X, y = self._fit_inputs(X, y)
        if self.inputs not in ("kmeans", "random"):
            raise ValueError(f"inputs must be 'kmeans' or 'random', got {self.inputs!r}")
        seed = seed_of(self.random_state)
        m = min(check_int(self.num_inducing, "num_inducing", minimum=1), X.shape[0])
        if self.inputs == "kmeans":
            Z, orthogonal = kmeans_centres(X, m, seed=seed), "greedy"
        else:
            Z, orthogonal = X[np.random.default_rng(seed).choice(X.shape[0], m, replace=False)] + 1e-3, "random"
        orthogonal_count = check_int(self.num_orthogonal, "num_orthogonal", minimum=1)
        model = OrthogonalSVGP(_kernel(self.kernel), InducingPoints(Z), orthogonal_count, Gaussian(self.noise),
                               orthogonal_inputs=orthogonal)
        self.model_ = model.fit(X, self._fit_targets(y), maxiter=self.maxiter, seed=seed, max_time=self.max_time)
        return self


class VISHClassifier(ClassifierMixin, _Standardised):
    """Binary classification with VISH and a probit likelihood, fitted by stochastic variational
    inference (:meth:`spherelab.VISH.fit_svi`). ``predict_proba`` gives the predictive
    probabilities of ``classes_``; ``prior`` as in :class:`spherelab.VISH`."""

    def __init__(self, kernel=None, max_degree: int = 3, iterations: int = 300, batch_size: int = 256,
                 lr: float = 0.05, random_state: int = 0, prior: str = "features"):
        self.kernel = kernel
        self.max_degree = max_degree
        self.prior = prior
        self.iterations = iterations
        self.batch_size = batch_size
        self.lr = lr
        self.random_state = random_state

    @all_or_nothing
    def fit(self, X, y):
        """Fit on ``X`` ``(N, D)`` and two-class labels ``y``; returns ``self``."""
        X, y = self._fit_inputs(X, y, y_numeric=False)
        check_classification_targets(y)
        self.classes_, labels = np.unique(y, return_inverse=True)
        if self.classes_.size != 2:
            raise ValueError(f"Only binary classification is supported. y has {self.classes_.size} classes "
                             f"({self.classes_[:5]}); use sklearn.multiclass.OneVsRestClassifier(VISHClassifier())")
        model = VISH(_kernel(self.kernel), self.max_degree, Bernoulli(), prior=self.prior)
        self.model_ = model.fit_svi(X, labels.astype(np.float64), batch_size=self.batch_size,
                                    iterations=self.iterations, lr=self.lr, seed=seed_of(self.random_state))
        return self

    @serving
    def predict_proba(self, X):
        """``(N, 2)``: the predictive probabilities of ``classes_[0]`` and ``classes_[1]``."""
        X = self._inputs(X)
        p1 = np.clip(self.model_.predict_y(X)[0], 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    @serving
    def predict(self, X):
        """The more probable class of each row."""
        upper = self.predict_proba(X)[:, 1] > 0.5
        return self.classes_[upper.astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
