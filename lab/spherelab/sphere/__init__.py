r"""The geometry of :math:`S^{d-1}`, free of GP concepts (like GeometricKernels' ``spaces/``):
special functions and harmonic counts, the Gegenbauer engine, spherical harmonics in any
dimension, sampling and exact quadrature, Funk–Hecke coefficients and the truncation analysis.

Conventions: normalised surface measure, :math:`\alpha = (d - 2)/2`,
:math:`Z_\ell(t) = (\ell + \alpha)/\alpha\, C_\ell^\alpha(t)` (``docs/design.md``).
"""

from .._listing import own_names
from .analysis import mismatch_report, rkhs_norm_truncated, truncated_shape
from .funk_hecke import funk_hecke
from .gegenbauer import (
    gegenbauer,
    gegenbauer_series,
    gegenbauer_table,
    normalized_gegenbauer_derivative_table,
    normalized_gegenbauer_table,
    zonal_series,
    zonal_series_vjp,
    zonal_table,
)
from .harmonics import SphericalHarmonics
from .quadrature import lonlat_grid, orthographic_grid, product_quadrature, sample_sphere
from .special import (
    alpha_of_dim,
    cumulative_num_harmonics,
    log_gegenbauer_at_one,
    log_num_harmonics,
    log_omega,
    log_sphere_area,
    num_harmonics,
)

__all__ = [
    "SphericalHarmonics",
    "funk_hecke",
    "gegenbauer",
    "gegenbauer_series",
    "gegenbauer_table",
    "normalized_gegenbauer_table",
    "normalized_gegenbauer_derivative_table",
    "zonal_series",
    "zonal_series_vjp",
    "zonal_table",
    "sample_sphere",
    "product_quadrature",
    "lonlat_grid",
    "orthographic_grid",
    "alpha_of_dim",
    "num_harmonics",
    "cumulative_num_harmonics",
    "log_num_harmonics",
    "log_omega",
    "log_sphere_area",
    "log_gegenbauer_at_one",
    "truncated_shape",
    "rkhs_norm_truncated",
    "mismatch_report",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
