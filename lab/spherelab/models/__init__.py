r"""Models, one module each, on one base (:mod:`.base`): VISH (Dutordoir et al. 2020), the orthogonally-decoupled
SVGP with inter-domain features and the activated SVGP (Tiao, thesis), and HVGP (Sun et al. 2021)."""

from .decoupled import ActivatedSVGP, OrthogonalSVGP
from .exact import ExactGP
from .hvgp import HarmonicSVGP
from .vish import VISH

__all__ = ["VISH", "OrthogonalSVGP", "ActivatedSVGP", "HarmonicSVGP", "ExactGP"]
