r"""Whether single-precision statistics can support a bound: :func:`check_precision` judges a
:class:`~spherelab.bounds.vish.CollapsedBound` computed on
:class:`~spherelab.bounds.Statistics` with a nonzero ``rounding`` by its first-order error
estimate and the condition of B, and raises :class:`InsufficientPrecision` where they cannot
(measured: ``benchmarks/RESULTS.md``, "float32 bound against the condition of B")."""

from __future__ import annotations

from typing import Any

__all__ = ["FLOAT32_TOLERANCE", "CONDITION_LIMIT", "InsufficientPrecision", "check_precision"]

#: float32 statistics serve a bound while its estimated error (CollapsedBound.error) stays below
#: this fraction of the bound's magnitude (at least 1) ...
FLOAT32_TOLERANCE = 1e-4
#: ... and the condition number of B times the statistics' rounding below this (past it the
#: first-order estimate fails: measured, RESULTS.md "float32 bound against the condition of B")
CONDITION_LIMIT = 10.0


class InsufficientPrecision(ArithmeticError):
    """Single-precision statistics cannot support the bound to :data:`FLOAT32_TOLERANCE`: the
    caller recomputes them in float64 (a fit does) or refuses with the reason. Not a
    :class:`~spherelab.linalg.NumericalFailure`: an optimiser must not step back from it."""


def check_precision(res: Any, stats: Any) -> None:
    """Raise :class:`InsufficientPrecision` when ``stats``' rounding leaves ``res`` uncertain beyond
    :data:`FLOAT32_TOLERANCE`."""
    if not stats.rounding:
        return
    if not res.condition * stats.rounding <= CONDITION_LIMIT:
        raise InsufficientPrecision(
            f"B = I + Lambda^1/2 G Lambda^1/2 / noise has condition number {res.condition:.3g}: float32 statistics "
            f"(relative rounding {stats.rounding:.2g}) cannot support the bound there")
    if not res.error <= FLOAT32_TOLERANCE * max(1.0, abs(res.value)):
        raise InsufficientPrecision(
            f"the float32 statistics leave the bound ({res.value:.6g}) uncertain by about {res.error:.3g}, more "
            f"than {FLOAT32_TOLERANCE:g} of it")
