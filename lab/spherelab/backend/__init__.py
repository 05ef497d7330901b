"""Backend layer: which array module (NumPy or CuPy) a computation runs on.

Rules (``docs/design.md`` §7): arrays stay where they came from — CuPy in, CuPy computation, CuPy
out — and models take an explicit ``device="cpu" | "gpu"``. GPU availability is probed once,
lazily and safely: importing spherelab never imports CuPy, and a machine with CuPy but no usable
GPU (no driver, no device, a broken CUDA install) reports *why* instead of failing at import.

The probing and the dispatch live here; :mod:`.ops` declares the device-specific operations once
and resolves a device's table. The implementations sit above the maths they compile
(:mod:`spherelab.devices`: the CPU's Numba code, the CUDA kernels and their transfers) and
register into the table; :mod:`spherelab.testing.parity` holds the cases that prove a device
against the CPU.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

__all__ = [
    "gpu_available",
    "gpu_unavailable_reason",
    "array_module",
    "resolve_device",
    "to_numpy",
    "is_device_array",
    "OPERATIONS",
    "Operations",
    "as_operations",
    "register",
    "resolve",
]


def __dir__() -> list[str]:  # dir() and tab completion: the names above (the table imports nothing of the package)
    return sorted(__all__)


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    """(available, reason): import CuPy and ask the runtime for a device, catching everything
    (CuPy raises different exception types for a missing driver, library or device)."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA library raising at import
        return False, (f"CuPy is not importable ({type(exc).__name__}: {exc}); install the GPU extra for the "
                       "machine's CUDA major version (nvidia-smi tells): pip install \".[gpu-cuda12]\" or "
                       "\".[gpu-cuda13]\" in the repository")
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        return False, f"CuPy is installed but the CUDA runtime reports no usable device ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "CuPy is installed but no CUDA device is visible"
    try:
        import cupy

        float(cupy.arange(3, dtype=cupy.float64).sum())  # a real round trip
    except Exception as exc:
        return False, f"a CUDA device is visible but a float64 computation failed ({type(exc).__name__}: {exc})"
    return True, f"{count} CUDA device(s)"


def gpu_available() -> bool:
    """Whether a CuPy GPU backend can be used (probed once per process)."""
    return _probe()[0]


def gpu_unavailable_reason() -> str:
    """Why :func:`gpu_available` is False (or the device count when it is True)."""
    return _probe()[1]


def is_device_array(x: Any) -> bool:
    """True for a CuPy array — decided without importing CuPy (an array can only be a CuPy
    array if CuPy is already imported)."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def array_module(*arrays: Any):
    """``cupy`` if any argument is a CuPy array, else ``numpy`` (mixing raises: transfers are
    explicit)."""
    on_device = [is_device_array(a) for a in arrays if a is not None]
    if any(on_device):
        if not all(on_device):
            raise TypeError("arguments mix NumPy and CuPy arrays: move them to one device first "
                            "(spherelab.backend.to_numpy, or cupy.asarray)")
        return sys.modules["cupy"]
    return np


def resolve_device(device: str | None, *arrays: Any) -> str:
    """``"cpu"`` or ``"gpu"``: ``device`` if given (checked), else where the arrays live.

    Raises
    ------
    ValueError
        ``device`` is not "cpu", "gpu" or None.
    RuntimeError
        ``"gpu"`` was asked for but no GPU backend is usable (the message says why).
    """
    if device is None:
        return "gpu" if array_module(*arrays) is not np else "cpu"
    if device not in ("cpu", "gpu"):
        raise ValueError(f'device must be "cpu" or "gpu", got {device!r}')
    if device == "gpu" and not gpu_available():
        raise RuntimeError(f'device="gpu" requested but no GPU backend is usable: {gpu_unavailable_reason()}')
    return device


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy array from a NumPy or CuPy array (device to host copy when needed)."""
    if is_device_array(x):
        return x.get()
    return np.asarray(x)


from .ops import OPERATIONS, Operations, as_operations, register, resolve  # noqa: E402  (after the probe it uses)
