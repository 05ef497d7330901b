r"""Zonal kernels on :math:`S^{d-1}`, one module per family (GPflow's ``kernels/``).

:class:`ZonalKernel` is the base (shape, spectrum, their derivatives, the data-space Gram matrix
and its gradients); the families are the arc-cosine kernels, the Matérn kernels restricted to the
sphere, the kernels defined by their spectrum, wrappers (truncation, parity), and sums of kernels on
sub-spheres of the inputs (:class:`Additive`). A new kernel subclasses :class:`ZonalKernel` (or
:class:`QuadratureSpectrum`, whose spectrum is its shape's quadrature); it works with every model,
feature set and device from its own file (``tests/test_a_kernel_in_one_file.py``).
"""

from .._listing import own_names
from .additive import Additive
from .arccos import NTK, ArcCosine, DeepArcCosine
from .base import ZonalKernel
from .matern import Matern
from .quadrature import QuadratureSpectrum
from .spectral import IntrinsicMatern, PolynomialDecay, SpectralKernel
from .wrapped import Parity, Truncated, WrappedKernel

__all__ = [
    "ZonalKernel",
    "QuadratureSpectrum",
    "SpectralKernel",
    "WrappedKernel",
    "ArcCosine",
    "DeepArcCosine",
    "NTK",
    "Matern",
    "IntrinsicMatern",
    "PolynomialDecay",
    "Truncated",
    "Parity",
    "Additive",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports
