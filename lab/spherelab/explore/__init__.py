"""Interactive explorers behind the notebooks: each builds its widgets and figure once, updates
artists in place on every change, keeps results it has computed (moving back to a value is
instant) and shows a "computing…" state while a recompute runs. Notebooks call them in one line.

* :class:`MismatchExplorer` — kernel spectra against activation coefficients (notebook 02);
* :class:`DecompositionExplorer` — samples of the components of a harmonic kernel
  decomposition (notebook 07).
"""

from .decomposition import ComponentSampler, DecompositionExplorer, component_title
from .mismatch import MismatchExplorer

__all__ = ["MismatchExplorer", "DecompositionExplorer", "ComponentSampler", "component_title"]
