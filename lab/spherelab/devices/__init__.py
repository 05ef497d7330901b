"""The implementations of the device seam, above the maths they compile: the operation table
(:mod:`spherelab.backend.ops`) declares the operations and imports nothing of the package; this
package registers the CPU's (:mod:`.cpu`, the package's NumPy and Numba code) when spherelab is
imported, and a loader for the CUDA devices' (:mod:`.cuda`: numba-cuda kernels compiled from the
same sources as the CPU's, on CuPy's arrays or, in numba-cuda's simulator, on the NumPy stand-in
of :mod:`.transfer`), which the table calls the first time a CUDA device is resolved — importing
spherelab never imports ``numba.cuda``."""

from .._listing import own_names
from ..backend import ops
from . import cpu  # noqa: F401  (registers the CPU implementations)

__all__: list[str] = []
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def _cuda_operations():
    from .cuda import CudaOperations  # imports numba.cuda: only when a CUDA device is asked for

    return CudaOperations


ops.set_cuda_loader(_cuda_operations)
