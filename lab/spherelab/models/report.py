"""How a fit ended: each optimisation stage's outcome recorded on the model (``fit_report_``)
and a warning, with what to try, when it ended abnormally or degenerate (``RuntimeWarning``) or
stopped at its iteration limit before converging (:class:`ConvergenceWarning`)."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import re
import sys
import warnings
from typing import Any

import numpy as np

__all__ = ["ConvergenceWarning", "caller_level", "capped", "report_fit"]

#: an additive kernel's component variances (spherelab.kernels.Additive: c<index>_variance)
_COMPONENT_VARIANCE = re.compile(r"^c\d+_variance$")

#: the argument that sets each stage's iteration limit (VISH's lift stage has its own)
LIMIT_ARGUMENT = {"lift": "lift_maxiter"}


class ConvergenceWarning(UserWarning):
    """A fit stopped at its iteration limit while the objective was still improving: the
    result is usable but not the optimum. Raise the limit named in the message, or silence it
    with ``warnings.filterwarnings("ignore", category=spherelab.ConvergenceWarning)`` where a
    capped fit is meant (a warm start, a demonstration)."""


# per thread and task (a context variable, unlike the warnings filters): an explorer's background
# fits and a probe inside a fit say they are capped without touching anyone else's warnings
_CAPPED = contextvars.ContextVar("spherelab_capped", default=False)


@contextlib.contextmanager
def capped():
    """Fits inside stop at their iteration limit by design (a probe, an explorer's quick fit): the
    limit is recorded in ``fit_report_`` and not warned (:class:`ConvergenceWarning`)."""
    token = _CAPPED.set(True)
    try:
        yield
    finally:
        _CAPPED.reset(token)


def report_fit(model, results: dict[str, Any]) -> list[str]:
    """Record how each optimisation stage ended in ``fit_report_`` and warn, with what to
    try, when one stopped abnormally early, ended on a rejected point, or left a
    hyper-parameter degenerate (the noise on its floor, a positive parameter beyond
    1e-8 .. 1e8); a :class:`ConvergenceWarning` when a stage reached its iteration limit (SciPy's
    status 1). Returns the warnings."""
    problems, report, limits = [], {}, []
    for stage, res in results.items():
        nit, message = int(getattr(res, "nit", 0)), str(getattr(res, "message", ""))
        report[stage] = {"iterations": nit, "evaluations": int(getattr(res, "nfev", 0)),
                         "status": int(getattr(res, "status", 0)), "message": message,
                         "objective": float(getattr(res, "fun", np.nan))}
        if not np.isfinite(report[stage]["objective"]) or report[stage]["objective"] >= 1e300:
            problems.append(f"{stage}: the optimiser ended on a rejected point (every trial failed); "
                            "check the data scale (standardise X and y) and the initial hyper-parameters")
        elif report[stage]["status"] == 2 and nit < 5 and not _stationary(res):
            why = message.split(":", 1)[-1].strip() or "the line search found no decrease"
            advice = ("try other initial hyper-parameters or standardised data" +
                      (", or spread the inducing inputs (near-duplicates make the bound ill-conditioned)"
                       if hasattr(getattr(model, "features", None), "Z") else ""))
            problems.append(f"{stage}: L-BFGS-B stopped after {nit} iteration(s) ({why}) far from a "
                            f"stationary point: the fit may not have moved; {advice}")
        elif report[stage]["status"] == 1:
            argument = LIMIT_ARGUMENT.get(stage, "maxiter")
            timed = "max_time" in inspect.signature(type(model).fit).parameters
            limits.append(f"{stage}: stopped at the iteration limit ({argument} = {nit}) before converging; "
                          f"the result is usable but not the optimum: raise {argument}"
                          + (", with max_time=... as the limit if time is what you have" if timed else ""))
    noise = next((p for p in model._registry() if p.name == "noise"), None)
    if noise is not None and noise.get() <= noise.lower * 1.01 and noise.lower > 0:
        problems.append(f"the noise variance ended at its floor {noise.lower:g}: the data look noise-free to "
                        "this model; lower Gaussian(floor=...) to go further, or expect overconfident predictions")
    for p in model._registry():
        if p.kind == "positive" and p.name != "noise":
            v = np.asarray(p.get(), dtype=np.float64)
            # a bias at 0 is a lift through the origin, and an additive component's variance at 0 is
            # that component switched off by the data: both are fitted values, not degenerate ones
            small_ok = p.name == "bias" or _COMPONENT_VARIANCE.match(p.name) is not None
            if v.size and (v.max() > 1e8 or v.min() < 1e-8) and not (small_ok and v.max() <= 1e8):
                problems.append(f"{p.name} ended degenerate ({v.min():.3g} .. {v.max():.3g}); standardise the "
                                "inputs or start from other hyper-parameters")
    report["warnings"] = problems + limits
    model.fit_report_ = report
    for text in problems:
        warnings.warn(f"{type(model).__name__}.fit: {text}", RuntimeWarning, stacklevel=caller_level())
    for text in limits if not _CAPPED.get() else ():
        warnings.warn(f"{type(model).__name__}.fit: {text}", ConvergenceWarning, stacklevel=caller_level())
    return problems + limits


def _stationary(res) -> bool:
    """Whether an abnormal stop happened at a point already stationary to round-off: a stage that
    starts at the previous stage's optimum (VISH's spectrum refinement after the lift stage) finds
    no decrease because there is none, which is not a failure. Stationary here: a 1 % change of any
    one parameter moves the objective by at most 1e-5 of its size (to first order)."""
    jac, x, fun = getattr(res, "jac", None), getattr(res, "x", None), float(getattr(res, "fun", np.nan))
    if jac is None or x is None or not np.isfinite(fun):
        return False
    scaled = np.abs(np.asarray(jac, dtype=np.float64)) * np.maximum(1.0, np.abs(np.asarray(x, dtype=np.float64)))
    return 0.01 * float(np.max(scaled, initial=0.0)) <= 1e-5 * max(1.0, abs(fun))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caller_level() -> int:
    """The ``stacklevel`` of the first frame outside spherelab, so that a warning names the user's
    line (``model.fit(...)``), not a file of the installed package."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level

