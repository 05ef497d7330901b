r"""Models, one module each, on one base (:mod:`.base`): VISH (seed 001), the orthogonally-decoupled
SVGP with inter-domain features and the activated SVGP (seed 003), and HVGP (seed 002)."""

from .decoupled import ActivatedSVGP, OrthogonalSVGP
from .hvgp import HarmonicSVGP
from .vish import VISH

__all__ = ["VISH", "OrthogonalSVGP", "ActivatedSVGP", "HarmonicSVGP"]
