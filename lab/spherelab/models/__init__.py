r"""Models, one module each, on one base (:mod:`.base`): VISH (Dutordoir et al. 2020), the orthogonally-decoupled
SVGP with inter-domain features and the activated SVGP (Tiao, thesis), HVGP (Sun et al. 2021), the exact GP
and a model with a nearest-neighbour correction of its residual; :func:`entry` is the one decorator of a
model's public methods (for writing a model of your own). The fits that choose among models, or size
one, are :mod:`spherelab.selection`'s."""

from .._listing import own_names
from .base import entry
from .decoupled import ActivatedSVGP, OrthogonalSVGP
from .exact import ExactGP
from .hvgp import HarmonicSVGP
from .local import NeighbourResidual
from .report import ConvergenceWarning, capped
from .scale import ScaleWarning
from .vish import VISH

__all__ = ["VISH", "OrthogonalSVGP", "ActivatedSVGP", "HarmonicSVGP", "ExactGP", "NeighbourResidual",
           "ConvergenceWarning", "ScaleWarning", "capped", "entry"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
