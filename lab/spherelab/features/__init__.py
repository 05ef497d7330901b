r"""Inducing features: one protocol (:class:`Features`: :math:`K_{uu}` (M, M), :math:`K_{uf}`
(M, N), their gradients, parameter access) and its implementations — spherical harmonics,
phase-truncated harmonics (Eleftheriadis et al.), the harmonics of an additive kernel's components,
activated units (Tiao, thesis) and inducing points. A new feature set subclasses :class:`Features`."""

from .._listing import own_names
from .activated import ActivatedFeatures
from .additive import AdditiveHarmonics
from .base import Features
from .harmonic import Evaluation, HarmonicFeatures, SphericalFeatures
from .phases import PhaseTruncatedHarmonics, greedy_directions
from .points import InducingPoints
from .selection import greedy_variance, kmeans_centres
from .zonal import zonal_pair, zonal_pair_gradients

__all__ = [
    "Features",
    "HarmonicFeatures",
    "AdditiveHarmonics",
    "SphericalFeatures",
    "Evaluation",
    "PhaseTruncatedHarmonics",
    "greedy_directions",
    "ActivatedFeatures",
    "InducingPoints",
    "greedy_variance",
    "kmeans_centres",
    "zonal_pair",
    "zonal_pair_gradients",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
