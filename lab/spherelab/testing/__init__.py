"""Tools for testing models and gradients, shipped for the library's users as for its own tests:
:func:`checkgrad` / :func:`check_model_gradient` (GPy's habit: a hand-written gradient against
finite differences) and :class:`ModelContract`, the test case every model subclasses."""

from .contract import ModelContract
from .gradients import GradientCheck, check_model_gradient, check_named_gradients, checkgrad

__all__ = ["GradientCheck", "checkgrad", "check_model_gradient", "check_named_gradients", "ModelContract"]
