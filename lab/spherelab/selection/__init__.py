r"""Model selection: fits that choose a model's structure or size from the data, built on the
models (:mod:`spherelab.models`) and never inside them.

* :func:`fit_budget` (``spherelab.fit``): the best model for the seconds a user has, chosen by the
  validation NLPD of candidates of growing size on held-out training rows;
* :func:`fit_hybrid`: spherical harmonics with orthogonal inducing points (Tiao, thesis §3.4), the
  pair (L, K) given or sized from a number of seconds;
* :func:`fit_additive`: an additive VISH whose interactions are kept by their bound gain and whose
  degrees come from a budget of features (Duvenaud, Nickisch & Rasmussen 2011).
"""

from .._listing import own_names
from .additive import fit_additive
from .budget import fit_budget, warm
from .hybrid import fit_hybrid

__all__ = ["fit_budget", "fit_hybrid", "fit_additive", "warm"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
