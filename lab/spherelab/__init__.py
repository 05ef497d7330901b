r"""spherelab: sparse variational Gaussian processes with features on the hypersphere.

Conventions follow ``shared/design.md``: inputs are lifted to :math:`S^{d-1}`, harmonics are
orthonormal for the normalised surface measure, :math:`\alpha = (d-2)/2`.
"""

from . import activations, backend, datasets, decoupled, features, groups, hvgp, kernels, likelihoods, widgets
from .analysis import mismatch_report, rkhs_norm_truncated, truncated_shape
from .funk_hecke import funk_hecke
from .gegenbauer import (
    gegenbauer,
    gegenbauer_series,
    gegenbauer_table,
    normalized_gegenbauer_derivative_table,
    normalized_gegenbauer_table,
    zonal_series,
    zonal_table,
)
from .decoupled import ActivatedSVGP, OrthogonalSVGP
from .features import ActivatedFeatures, HarmonicFeatures, InducingPoints
from .harmonics import SphericalHarmonics
from .phases import PhaseTruncatedHarmonics
from .groups import harmonic_decomposition
from .hvgp import HarmonicSVGP
from .models import VISH
from .sphere import lonlat_grid, orthographic_grid, product_quadrature, sample_sphere
from .special import (
    cumulative_num_harmonics,
    log_gegenbauer_at_one,
    log_num_harmonics,
    log_omega,
    log_sphere_area,
    num_harmonics,
)

__version__ = "0.1.0"


def warmup() -> None:
    """Compile (or load from the on-disk cache) every Numba kernel on tiny inputs.

    Kernels compile lazily on first use; call this before showing widgets so that the first
    slider move does not pay the compilation.
    """
    import numpy as np

    t = np.linspace(-1.0, 1.0, 3)
    normalized_gegenbauer_table(2, 0.5, t)
    normalized_gegenbauer_derivative_table(2, 0.5, t)
    gegenbauer_series(np.ones(3), 0.5, t, normalized=True, derivative=True)
    gegenbauer(2, 0.5, t)
    Y = SphericalHarmonics(3, 2)
    Y(np.eye(3))
    Y.solid_vjp(np.eye(3), np.ones((3, Y.num_features)))

__all__ = [
    "backend",
    "ActivatedSVGP",
    "OrthogonalSVGP",
    "ActivatedFeatures",
    "InducingPoints",
    "HarmonicFeatures",
    "decoupled",
    "features",
    "SphericalHarmonics",
    "PhaseTruncatedHarmonics",
    "groups",
    "harmonic_decomposition",
    "hvgp",
    "HarmonicSVGP",
    "VISH",
    "likelihoods",
    "datasets",
    "widgets",
    "funk_hecke",
    "kernels",
    "activations",
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
    "num_harmonics",
    "cumulative_num_harmonics",
    "log_num_harmonics",
    "log_omega",
    "log_sphere_area",
    "log_gegenbauer_at_one",
    "warmup",
]
