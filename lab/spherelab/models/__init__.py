r"""Models, one module each, on one base (:mod:`.base`): VISH (Dutordoir et al. 2020), the orthogonally-decoupled
SVGP with inter-domain features and the activated SVGP (Tiao, thesis), and HVGP (Sun et al. 2021);
:func:`fit_hybrid` sizes and fits harmonics with orthogonal inducing points; :func:`entry` is the one
decorator of a model's public methods (for writing a model of your own)."""

from .._listing import own_names
from .additive import fit_additive
from .base import entry
from .budget import fit_budget
from .decoupled import ActivatedSVGP, OrthogonalSVGP
from .exact import ExactGP
from .hvgp import HarmonicSVGP
from .hybrid import fit_hybrid
from .local import NeighbourResidual
from .report import ConvergenceWarning, capped
from .scale import ScaleWarning
from .vish import VISH

__all__ = ["VISH", "OrthogonalSVGP", "ActivatedSVGP", "HarmonicSVGP", "ExactGP", "NeighbourResidual", "fit_hybrid",
           "fit_budget", "fit_additive", "ConvergenceWarning", "ScaleWarning", "capped", "entry"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
