r"""VISH's collapsed bound (Dutordoir, Durrande & Hensman 2020, eq. 11; with ``prior="features"``
the finite-rank model's exact log marginal likelihood) on sufficient statistics, and the two
stages of :meth:`~spherelab.VISH.fit` (the staging is this library's):

1. :func:`fit_lift`: every hyper-parameter — spectrum, noise, the lift (``bias``,
   ``input_scale``) and trainable phase directions — on a subsample of the rows. The lift changes
   the features, so each evaluation is a pass over the subsample (kept on the device when one
   is in use, :mod:`spherelab.rows.vish`; its harmonics kept in memory between the bound and its lift
   gradient when they fit ``VISH.lift_cache_elements``).
2. :func:`fit_spectrum`: with the lift frozen and the statistics of every row computed once, the
   spectrum and noise at :math:`O(M^3)` per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..bounds.precision import InsufficientPrecision, check_precision
from ..bounds.statistics import Statistics
from ..bounds.vish import clamp_spectrum, collapsed_bound, harmonic_statistics, lift_gradient, lift_statistics
from ..distributed import rows
from ..likelihoods import Gaussian
from ..linalg import NumericalFailure
from ..optim import Deadline
from ..rows.vish import ResidentLift, host_rows

__all__ = ["spectrum", "spectral_names", "bound", "bound_on_rows", "statistics", "fit_stages", "fit_lift",
           "fit_spectrum"]


def spectral_names(model) -> list[str]:
    """What the spectrum stage trains: the kernel's spectral hyper-parameters and a Gaussian noise."""
    return [*model.kernel.spectral_parameter_names, *(["noise"] if isinstance(model.likelihood, Gaussian) else [])]


def spectrum(model) -> tuple[np.ndarray, np.ndarray]:
    """The features' prior variances, clamped (:func:`~spherelab.bounds.vish.clamp_spectrum`)."""
    return clamp_spectrum(model.features.Kuu_inverse_diag(model.kernel))


def bound(model, stats: Statistics | None, lift: Any = None, gradients: bool = True):
    r"""The collapsed bound of ``model`` on ``stats`` and its gradient dict (spectrum, noise; with
    ``lift = (X, y, evaluation or None)`` or a :class:`ResidentLift` also ``bias``,
    ``input_scale`` and the features' directions, through :math:`\partial L/\partial K_{uf} =
    2\,\partial_G K_{uf} + \partial_c\,y^\top` and one more pass over those rows). With a
    :class:`ResidentLift` ``stats`` may be None: the device computes them, and with ``gradients``
    the bound and the lift's chain too, in one copy back (:meth:`ResidentLift.evaluate`)."""
    if not isinstance(model.likelihood, Gaussian):
        raise TypeError("the collapsed bound needs a Gaussian likelihood; use fit_svi() / elbo() for Bernoulli")
    lam, clamped = spectrum(model)
    # v: kappa(1), an additive kernel's one per component
    noise, v = model.likelihood.variance, model.kernel.at_one()
    finite = np.isfinite(noise) and noise > 0 and np.all(np.isfinite(v))
    if not (finite and np.all(np.isfinite(lam)) and np.all(lam > 0)):
        # an optimiser's trial point under/overflowed a hyper-parameter: step back
        raise NumericalFailure(f"the spectrum or the noise variance ({noise!r}) left the floating-point range")
    resident = isinstance(lift, ResidentLift)
    if resident and gradients:
        res, lift_g = lift.evaluate(model, lam, v, noise, model.charges_residual)
    else:
        stats = lift.statistics(model) if stats is None and resident else stats
        full = gradients or bool(stats.rounding)  # float32 statistics: their error is judged first
        try:
            res = collapsed_bound(lam, v, noise, stats, gradients=full, residual=model.charges_residual)
        except NumericalFailure as err:
            if stats.rounding:  # B from float32 statistics that float32's rounding left indefinite
                raise InsufficientPrecision(f"float32 statistics: {err}") from None
            raise
        check_precision(res, stats) if stats.rounding else None
        if not gradients:
            return (res.value if full else res), None
        lift_g = None
    dlam = np.where(clamped, 0.0, res.dlam)
    g: dict[str, Any] = model.features.spectrum_vjp(model.kernel, dlam, res.dv)
    g["noise"] = res.dnoise
    if lift_g is not None:
        g.update(lift_g)
    elif lift is not None:
        ev = lift[2] if len(lift) > 2 else None  # kept columns come with an evaluation
        g.update(lift_gradient(model.features, model.kernel, res, *lift, chunk_size=host_rows(model), ops=model.ops,
                               chunks=stats.chunks if ev is not None else None))
    return res.value, g


def bound_on_rows(model, X: np.ndarray, y: np.ndarray):
    """:func:`bound` and its whole gradient on validated rows (X, y): on the rows floor where
    :meth:`ResidentLift.applies`, else a pass over the rows and the lift's chain after it."""
    if ResidentLift.applies(model):
        return bound(model, None, lift=ResidentLift(model, X, y))
    return bound(model, statistics(model, X, y), lift=(X, y))


def statistics(model, X, y, ev=None, final: bool = False) -> Statistics:
    """The bound's statistics on (X, y): a pass over the rows (``final``: the pass over every row,
    in ``model.gram_dtype``), or from an evaluation ``ev`` of the features kept in memory."""
    # gram_dtype applies to the pass over all rows only: the lift stage's subsample steers an
    # optimiser, where single-precision statistics were measured to lead it astray
    if ev is None:
        dtype = getattr(model, "gram_dtype", "float64") if final else "float64"
        return harmonic_statistics(model.kernel, model.features, X, y, chunk_size=model.chunk_size, ops=model.ops,
                                   gram_dtype=dtype)
    return lift_statistics(model.features, ev, y, chunk_size=host_rows(model), ops=model.ops)


def fit_stages(model, X, y, optimize: bool, train_lift: bool, lift_subsample: int, lift_maxiter: int, maxiter: int,
               seed: int, lift_ftol: float | None, bar, deadline: Deadline) -> None:
    """:meth:`~spherelab.VISH.fit`'s stages on validated rows (X, y), the options validated: (1)
    :func:`fit_lift` on a subsample (with ``optimize`` and ``train_lift``; 60 % of the deadline),
    the statistics of every row, then (2) :func:`fit_spectrum`. Under the features prior
    trainable directions are hundreds of hyper-parameters of the prior that fit their subsample's
    noise: they are trained on at most half the rows, the spectrum and noise on the others (under
    the kernel prior they are variational parameters, which the bound guards). ``lift_ftol``
    None: 2.2e-9 (SciPy's) for trainable directions, else 1e-4."""
    trains_lift = optimize and train_lift
    held_out = trains_lift and model.features.trainable and model.prior == "features" and X.shape[0] >= 4
    if lift_ftol is None:
        lift_ftol = 2.2e-9 if model.features.trainable else 1e-4
    Xs = ys = None
    if trains_lift:
        Xs, ys = rows(X, y).subsample(min(lift_subsample, X.shape[0] // 2) if held_out else lift_subsample, seed)
        fit_lift(model, Xs, ys, maxiter, lift_maxiter, lift_ftol, every_row=Xs is X, bar=bar,
                 max_time=deadline.share(0.6))
    model.stats = statistics(model, X, y, final=True)
    model.passes += 1
    if optimize:
        fit_spectrum(model, X, y, maxiter, train_lift, bar, held=(Xs, ys) if held_out else None,
                     max_time=deadline.left())


def fit_lift(model, Xs, ys, maxiter: int, lift_maxiter: int, lift_ftol: float, every_row: bool, bar,
             max_time: float | None = None) -> None:
    """Stage (1): every hyper-parameter of ``model`` on the subsample (Xs, ys), NumPy arrays;
    ``every_row``: the subsample is all the rows (its passes are counted in ``model.passes``);
    ``max_time``: seconds for the stage, its warm start included."""
    deadline = Deadline(max_time)
    held = ResidentLift(model, Xs, ys) if ResidentLift.applies(model) else None
    if not model.features.trainable:
        # warm start: the spectrum and noise at the initial lift (O(M^3) per step); a joint fit
        # from the defaults tends to run into degenerate lifts (input scales -> 0), worse optima
        stats = held.statistics(model) if held else statistics(model, Xs, ys)
        bar.stage = "warm start"
        model._minimize(spectral_names(model), lambda: bound(model, stats), maxiter, progress=bar,
                        max_time=deadline.share(0.25))
    cached = Xs.shape[0] * model.features.num_features <= model.lift_cache_elements

    def lift_stage():
        if held is not None:  # the subsample stays on the device (rows.vish)
            return bound(model, None, lift=held)
        ev = model.features.evaluate(model.kernel, Xs, ops=model.ops) if cached else None
        return bound(model, statistics(model, Xs, ys, ev), lift=(Xs, ys, ev))

    names = model.param_names
    bar.stage = "lift"
    model.lift_result = model._minimize(names, lift_stage, lift_maxiter, ftol=lift_ftol, progress=bar,
                                        max_time=deadline.left())
    if every_row:
        model.passes += (1 if cached else 2) * model.lift_result.nfev


def fit_spectrum(model, X, y, maxiter: int, train_lift: bool, bar, held: tuple | None = None,
                 max_time: float | None = None) -> None:
    """Stage (2): the spectrum and noise on the statistics of every row (float64 ones again, from
    the same start, where float32 ones prove too coarse); with ``held`` = (Xs, ys), the lift's
    subsample, on the other rows only (their statistics: all rows' less the subsample's), the
    posterior still on every row."""
    names, fallback = spectral_names(model), None
    start = model.parameter_vector(names)
    bar.stage = "spectrum"

    def fitted_on():
        return model.stats if held is None else model.stats.without(statistics(model, *held))

    try:
        stats = fitted_on()
        model.optimizer_result = model._minimize(names, lambda: bound(model, stats), maxiter, progress=bar,
                                                 max_time=max_time)
    except InsufficientPrecision as why:
        model.set_parameter_vector(start, names)
        model.stats, fallback = statistics(model, X, y), f"float32 statistics replaced by float64: {why}"
        model.passes += 1  # (from start itself: its values' round trip could move it by an ulp)
        stats = fitted_on()
        model.optimizer_result = model._minimize(names, lambda: bound(model, stats), maxiter, x0=start,
                                                 progress=bar, max_time=max_time)
    stages = {"lift": model.lift_result} if train_lift else {}
    model._report_fit({**stages, "spectrum": model.optimizer_result})
    if fallback:
        model.fit_report_["statistics"] = fallback
