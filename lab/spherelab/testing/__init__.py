"""Tools for testing models and gradients, shipped for the library's users as for its own tests
(GPy's habit: every hand-written gradient against finite differences; GPyTorch's: a test case to
subclass): :func:`checkgrad`, :func:`check_model_gradient`, :func:`check_named_gradients`,
:func:`check_jacobian` and :class:`ModelContract`, the test case every model subclasses."""

from .._listing import own_names
from .contract import ModelContract
from .gradients import GradientCheck, check_jacobian, check_model_gradient, check_named_gradients, checkgrad

__all__ = ["GradientCheck", "checkgrad", "check_jacobian", "check_model_gradient", "check_named_gradients",
           "ModelContract"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
