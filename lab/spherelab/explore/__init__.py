"""Interactive explorers behind the notebooks: each builds its widgets and figure once, updates
artists in place on every change, keeps results it has computed (moving back to a value is
instant) and shows a progress bar (a fit) or a "computing…" state while a recompute runs.
Notebooks call them in one line.

* :class:`HarmonicsGallery`, :class:`AdditionTheorem` — the harmonics of S² and the addition
  theorem (notebook 01);
* :class:`MismatchExplorer` — kernel spectra against activation coefficients (notebook 02);
* :class:`TruncationExplorer` — an activation's truncated series and its RKHS norm (notebook 03);
* :class:`DegreeExplorer` — VISH's fit and bound degree by degree on 1-D data (notebook 04);
* :class:`OrthogonalExplorer` — activated features in the orthogonally decoupled posterior and
  its variance terms (notebook 05);
* :class:`DepthExplorer`, :class:`PhaseViewer` — continuous depth and learned phases (notebook 06);
* :class:`DecompositionExplorer` — samples of the components of a harmonic kernel
  decomposition (notebook 07);
* :func:`sphere_posterior` — a model of two inputs in data space, on a map of the sphere and on
  a globe; :func:`degree_sweep` / :func:`plot_sweep` — test NLPD and ELBO against M and against
  wall time (notebook 04);
* :class:`FrontierExplorer`, :func:`frontier_curves` — test NLPD against fit time for VISH, the
  hybrid and inducing points on a chosen data set and budget; :func:`recorded_figure` — the
  benchmark's recorded frontier (notebook 05);
* :class:`AdditiveView`, :func:`component_curves`, :func:`pair_gains` — what an additive model's
  components learned and which pairs it chose; :class:`BudgetExplorer` — ``spherelab.fit``'s
  candidates and choice as the budget moves (notebook 08);
* :class:`Precomputer` — the background computation behind the explorers that refit;
  :class:`FitBar` — their progress bar, following the fit of the configuration shown.
"""

from .._listing import own_names
from .background import Precomputer
from .decomposition import ComponentSampler, DecompositionExplorer, component_title
from .depth import DepthExplorer, PhaseViewer
from .fitbar import FitBar
from .frontier import FrontierExplorer, frontier_curves, recorded_figure
from .harmonics import AdditionTheorem, HarmonicsGallery
from .mismatch import MismatchExplorer
from .orthogonal import OrthogonalExplorer
from .sphere import on_sphere, sphere_posterior
from .structure import AdditiveView, BudgetExplorer, component_curves, pair_gains
from .sweep import degree_sweep, plot_sweep
from .truncation import TruncationExplorer
from .vish import DegreeExplorer

__all__ = [
    "HarmonicsGallery",
    "AdditionTheorem",
    "MismatchExplorer",
    "TruncationExplorer",
    "DegreeExplorer",
    "OrthogonalExplorer",
    "DepthExplorer",
    "PhaseViewer",
    "DecompositionExplorer",
    "FrontierExplorer",
    "frontier_curves",
    "recorded_figure",
    "ComponentSampler",
    "component_title",
    "Precomputer",
    "FitBar",
    "sphere_posterior",
    "on_sphere",
    "degree_sweep",
    "plot_sweep",
    "AdditiveView",
    "BudgetExplorer",
    "component_curves",
    "pair_gains",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
