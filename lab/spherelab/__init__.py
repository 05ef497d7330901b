r"""spherelab: sparse variational Gaussian processes with features on the hypersphere.

Subpackages, one concept each: :mod:`~spherelab.sphere` (geometry: harmonics, Gegenbauer,
quadrature, Funk–Hecke), :mod:`~spherelab.kernels`, :mod:`~spherelab.features`,
:mod:`~spherelab.bounds`, :mod:`~spherelab.models`, :mod:`~spherelab.selection` (fits that choose
a model's structure or size), :mod:`~spherelab.likelihoods`,
:mod:`~spherelab.linalg`, :mod:`~spherelab.optim`, :mod:`~spherelab.threads`,
:mod:`~spherelab.backend`, :mod:`~spherelab.persistence` (:func:`save`, :func:`load`),
:mod:`~spherelab.processes` (the fork- and thread-safe threading layer). Conventions
(``docs/design.md``): inputs are lifted to :math:`S^{d-1}`, harmonics are orthonormal for the
normalised surface measure, :math:`\alpha = (d-2)/2`.
"""

from . import processes  # noqa: F401, I001  (first: the threading layer is chosen before any kernel runs)
from . import (
    activations,
    backend,
    bounds,
    chunks,
    datasets,
    devices,
    explore,
    features,
    groups,
    kernels,
    likelihoods,
    linalg,
    metrics,
    models,
    optim,
    persistence,
    selection,
    sphere,
    testing,
    threads,
    widgets,
)
from .features import ActivatedFeatures, HarmonicFeatures, InducingPoints, PhaseTruncatedHarmonics
from .groups import harmonic_decomposition
from .models import VISH, ActivatedSVGP, ConvergenceWarning, HarmonicSVGP, OrthogonalSVGP, ScaleWarning
from .selection import fit_budget as fit
from .sphere import (
    SphericalHarmonics,
    cumulative_num_harmonics,
    funk_hecke,
    gegenbauer,
    gegenbauer_series,
    gegenbauer_table,
    log_gegenbauer_at_one,
    log_num_harmonics,
    log_omega,
    log_sphere_area,
    lonlat_grid,
    mismatch_report,
    normalized_gegenbauer_derivative_table,
    normalized_gegenbauer_table,
    num_harmonics,
    orthographic_grid,
    product_quadrature,
    rkhs_norm_truncated,
    sample_sphere,
    truncated_shape,
    zonal_series,
    zonal_series_vjp,
    zonal_table,
)
from .persistence import FormatError, load, save
from .threads import get_threads, set_threads, thread_limit

__version__ = "0.1.0"


def warmup() -> None:
    """Compile (or load from the on-disk cache) every Numba kernel on tiny inputs.

    Kernels compile lazily on first use; call this before showing widgets so that the first
    slider move does not pay the compilation. It also fits each of :func:`fit`'s candidates once
    on a few rows (:func:`spherelab.selection.warm`), so that a budget's seconds are spent
    fitting.
    """
    import numpy as np

    from .selection import warm

    t = np.linspace(-1.0, 1.0, 3)
    normalized_gegenbauer_table(2, 0.5, t)
    normalized_gegenbauer_derivative_table(2, 0.5, t)
    gegenbauer_series(np.ones(3), 0.5, t, normalized=True, derivative=True)
    gegenbauer(2, 0.5, t)
    Y = SphericalHarmonics(3, 2)
    Y(np.eye(3))
    Y.solid_vjp(np.eye(3), np.ones((3, Y.num_features)))
    warm()


__all__ = [
    "activations",
    "backend",
    "bounds",
    "chunks",
    "datasets",
    "devices",
    "explore",
    "features",
    "groups",
    "kernels",
    "likelihoods",
    "linalg",
    "metrics",
    "models",
    "optim",
    "selection",
    "sphere",
    "testing",
    "threads",
    "widgets",
    "fit",
    "VISH",
    "ConvergenceWarning",
    "ScaleWarning",
    "OrthogonalSVGP",
    "ActivatedSVGP",
    "HarmonicSVGP",
    "ActivatedFeatures",
    "HarmonicFeatures",
    "InducingPoints",
    "PhaseTruncatedHarmonics",
    "SphericalHarmonics",
    "harmonic_decomposition",
    "funk_hecke",
    "truncated_shape",
    "rkhs_norm_truncated",
    "mismatch_report",
    "sample_sphere",
    "product_quadrature",
    "lonlat_grid",
    "orthographic_grid",
    "gegenbauer",
    "gegenbauer_series",
    "gegenbauer_table",
    "normalized_gegenbauer_table",
    "normalized_gegenbauer_derivative_table",
    "zonal_table",
    "zonal_series",
    "zonal_series_vjp",
    "num_harmonics",
    "cumulative_num_harmonics",
    "log_num_harmonics",
    "log_omega",
    "log_sphere_area",
    "log_gegenbauer_at_one",
    "set_threads",
    "get_threads",
    "thread_limit",
    "warmup",
    "save",
    "FormatError",
    "load",
    "persistence",
    "processes",
]
