r"""The device seam: the operations whose implementation depends on the device, declared once
(GeometricKernels' habit) and implemented per backend.

A model resolves its :class:`Operations` once, in ``__init__`` (``device="cpu" | "gpu" |
"auto"``), and calls ``self.ops.<name>`` without ever branching on the device. The CPU
implementations are the package's NumPy/Numba code (:mod:`spherelab.devices.cpu`, registered
with :func:`register` when spherelab is imported); the CUDA ones come from the loader
:mod:`spherelab.devices` sets (:func:`set_cuda_loader`), and a GPU is usable once every operation has
one. This module imports nothing of the package. The operations take and
return host (NumPy) arrays, except ``device_harmonics``, ``harmonic_columns``, the rows of ``stream_rows``,
``zonal_columns``, ``zonal_columns_backward``, ``series_columns``, ``series_columns_backward``,
``device_harmonics_vjp``, ``device_solve`` and ``factor_inverse``, which see the device's arrays
(``to_device`` / ``to_host`` convert; both are the identity on the CPU, and ``array_namespace``
names the arrays' module): the data stay on the device inside a pass over the rows and, for the
models on the rows floor, between evaluations (:mod:`spherelab.rows.device`).
"""

from __future__ import annotations

import logging
from typing import Callable

__all__ = ["OPERATIONS", "Operations", "register", "set_cuda_loader", "resolve", "as_operations", "implemented",
           "simulator_enabled", "as_operations"]

#: every device-specific operation: name -> what it computes (shapes; the CPU docstrings say more)
OPERATIONS: dict[str, str] = {
    "harmonics": "harmonics(X (N, d) unit rows, plan, out (N, M)) -> out: every harmonic of the plan",
    "harmonics_vjp": "harmonics_vjp(X (N, d), W (N, M), plan) -> (N, d): VJP of the solid harmonics",
    "gegenbauer_table": "gegenbauer_table(L, alpha, t (N,)) -> (N, L + 1): normalised P_0..P_L",
    "gegenbauer_derivative_table": "gegenbauer_derivative_table(L, alpha, t (N,)) -> (N, L + 1): their t-derivatives",
    "clenshaw": "clenshaw(coeffs, alpha, t (N,), derivative) -> sum_n c_n P_n(t) (and its t-derivative)",
    "matern_values": "matern_values(T, r1, r2, code, lengthscale, variance, same) -> Gram matrix",
    "matern_backward": "matern_backward(T, G, r1, r2, code, lengthscale, variance, same) -> (A, B, dvar, dlen)",
    "gram_update": "gram_update(G (P, P), c (P,), A (P, n), y (n,)) -> None: G += A A^T, c += A y in place",
    "cholesky": "cholesky(A, name, hint) -> lower factor, or NumericalFailure naming the matrix",
    "solve_triangular": "solve_triangular(L, B, trans) -> L^-1 B (trans=0) or L^-T B (trans=1), L lower",
    "device_harmonics": "device_harmonics(X (N, d) device array, plan) -> (N, M) device array",
    "device_harmonics_vjp": ("device_harmonics_vjp(X (N, d) device array, W (N, M) device array, plan) -> (N, d) "
                             "device array: harmonics_vjp left on the device"),
    "harmonic_columns": ("harmonic_columns(X (N, d) device array, plan, scale (N,)) -> (M, N) device array: "
                         "column n is scale[n] times every harmonic at X[n] (the statistics pass's layout)"),
    "stream_rows": ("stream_rows(X (N, D), y (N,), pieces) -> an iterator of each piece's (X[a:b], y[a:b]) as "
                    "device arrays, in order, for a pass over host rows (a GPU copies piece k + 1 while k computes)"),
    "pass_rows": ("pass_rows(width) -> rows per chunk of a streamed statistics pass whose columns have width "
                  "entries per row (the CPU's from its cache, a GPU's from the product's efficiency)"),
    "zonal_columns": ("zonal_columns(T (n, P), r1 (n,), r2 (P,), code, lengthscale, variance) -> (n, P): the fused "
                      "Matern cross-covariance from device arrays, left on the device"),
    "zonal_columns_backward": ("zonal_columns_backward(T, G, r1, r2, code, lengthscale, variance) -> (A, B, dvar, "
                               "dlen): matern_backward's A, B left on the device, the two sums as floats"),
    "series_columns": ("series_columns(T (n, P), r1 (n,), r2 (P,), coeffs (L + 1,), alpha) -> (n, P): r1_i r2_j "
                       "sum_l coeffs_l P_l(clip(T_ij)) from device arrays (normalised Gegenbauer), left on the device"),
    "series_columns_backward": ("series_columns_backward(T, G, coeffs, alpha) -> (A, B): G (s - t s') and G s' "
                                "(s' dropped at |t| = 1), left on the device"),
    "device_solve": "device_solve(L, B, trans) -> L^-1 B or L^-T B, L lower, device arrays in and out",
    "factor_inverse": "factor_inverse(L (n, n) device array, lower triangular) -> (L L^T)^-1, a device array",
    "array_namespace": "array_namespace() -> the array module of the device's arrays (numpy, or cupy)",
    "to_device": "to_device(a) -> the device's array of a host array (the identity on the CPU)",
    "device_constant": ("device_constant(a) -> the device's array of a small host array, copied once while a "
                        "lives when it is read-only (a plan's constants, kept indices), else to_device(a)"),
    "to_host": "to_host(a) -> a NumPy array of a device array (the identity on the CPU)",
}


_IMPLEMENTATIONS: dict[str, dict[str, Callable]] = {"cpu": {}, "gpu": {}}
_cuda_loaded: set[str] = set()
_warned: set[str] = set()


def register(device: str, name: str) -> Callable[[Callable], Callable]:
    """Decorator: register ``func`` as the ``device`` implementation of operation ``name``."""
    if device not in _IMPLEMENTATIONS:
        raise ValueError(f'device must be "cpu" or "gpu", got {device!r}')
    if name not in OPERATIONS:
        raise ValueError(f"unknown operation {name!r}; the table declares {sorted(OPERATIONS)}")

    def decorate(func: Callable) -> Callable:
        _IMPLEMENTATIONS[device][name] = func
        return func

    return decorate


_cuda_loader: list[Callable] = []


def set_cuda_loader(load: Callable) -> None:
    """Where the CUDA implementations come from: ``load()`` returns their class (``CudaOperations``,
    built per device; :mod:`spherelab.devices` sets it, so that this table imports nothing above it)."""
    _cuda_loader[:] = [load]


def _load_cuda(device: str) -> str | None:
    """Register the CUDA kernels for ``device`` ("gpu" or "sim"); the reason when they cannot be."""
    if device in _cuda_loaded:
        return None
    if not _cuda_loader:
        return "no CUDA implementations are registered (spherelab.devices sets them when spherelab is imported)"
    try:
        CudaOperations = _cuda_loader[0]()
    except Exception as exc:  # numba-cuda missing or broken
        return f"numba-cuda is not importable ({type(exc).__name__}: {exc})"
    table = CudaOperations(device).table()
    if device == "gpu":
        _IMPLEMENTATIONS["gpu"].update(table)
    _cuda_loaded.add(device)
    _SIM.update(table if device == "sim" else {})
    return None


_SIM: dict[str, Callable] = {}


def simulator_enabled() -> bool:
    """Whether numba-cuda's simulator is on (``NUMBA_ENABLE_CUDASIM=1`` before Numba's import)."""
    from numba.core import config

    return bool(getattr(config, "ENABLE_CUDASIM", 0))


def implemented(device: str) -> set[str]:
    """The operations that ``device`` implements (``"sim"``: those with a CUDA kernel)."""
    if device == "cpu" and not _IMPLEMENTATIONS["cpu"]:
        raise RuntimeError("no CPU implementations are registered: spherelab.devices registers them when spherelab "
                           "is imported")
    if device == "sim":
        return set(_SIM)
    return set(_IMPLEMENTATIONS[device])


class Operations:
    """The resolved table of one device: an attribute per operation of :data:`OPERATIONS`."""

    def __init__(self, device: str, table: dict[str, Callable]) -> None:
        self.device = device
        for name, func in table.items():
            setattr(self, name, func)

    def __repr__(self) -> str:
        return f"Operations(device={self.device!r})"


def as_operations(ops: "Operations | str") -> Operations:
    """``ops`` itself, or the operations of the device it names (:func:`resolve`): the functions
    that take a device take either, and name the CPU explicitly where they default to it."""
    if isinstance(ops, Operations):
        return ops
    if ops == "cpu":  # the default of every maths function: resolved once
        if not _cpu:
            _cpu.append(resolve("cpu"))
        return _cpu[0]
    return resolve(ops)


def resolve(device: str = "cpu") -> Operations:
    """The operations of ``device``: ``"cpu"``; ``"gpu"`` (a usable GPU and a complete GPU table, or
    a ``RuntimeError`` that says which is missing); ``"auto"`` (the GPU when it is usable and
    complete, else the CPU — saying why once per process, an INFO record of the ``spherelab``
    logger); ``"sim"`` (the CUDA kernels in numba-cuda's simulator on host arrays, the CPU's
    implementation for operations without a CUDA kernel yet: for tests)."""
    from . import gpu_available, gpu_unavailable_reason

    if device not in ("cpu", "gpu", "auto", "sim"):
        raise ValueError(f'device must be "cpu", "gpu", "auto" or "sim", got {device!r}')
    if device == "sim":
        if not simulator_enabled():
            raise RuntimeError('device="sim" runs the CUDA kernels in numba-cuda\'s simulator: set '
                               "NUMBA_ENABLE_CUDASIM=1 in the environment before Python starts")
        why = _load_cuda("sim")
        if why:
            raise RuntimeError(f'device="sim" is not available: {why}')
        implemented("cpu")
        return Operations("sim", {**_IMPLEMENTATIONS["cpu"], **_SIM})
    if device in ("gpu", "auto"):
        why = None
        if not gpu_available():
            why = f"no usable GPU: {gpu_unavailable_reason()}"
        else:
            why = _load_cuda("gpu")
            missing = sorted(set(OPERATIONS) - implemented("gpu"))
            if why is None and missing:
                why = f"the GPU backend lacks {', '.join(missing)}"
        if why is None:
            return Operations("gpu", dict(_IMPLEMENTATIONS["gpu"]))
        if device == "gpu":
            raise RuntimeError(f'device="gpu" is not available: {why}')
        if why not in _warned:  # said once per process and reason: a log line, not a warning
            _warned.add(why)
            logging.getLogger("spherelab").info('device="auto" runs on the CPU: %s', why)
    implemented("cpu")
    return Operations("cpu", dict(_IMPLEMENTATIONS["cpu"]))


_cpu: list[Operations] = []  # the CPU's table, resolved once (as_operations("cpu"))
