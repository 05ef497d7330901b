"""Numba compilation policy shared by every jitted kernel of the package.

Kernels are compiled lazily (no signatures, so importing :mod:`spherelab` compiles nothing) and
cached on disk when a writable cache location exists. Numba refuses ``cache=True`` outright when it
finds no writable location (read-only site-packages, no writable ``$HOME``, a read-only
``NUMBA_CACHE_DIR``); we then fall back to in-memory compilation instead of failing at import.

No kernel uses ``fastmath``: it removes NaN checks, and several kernels detect invalid values.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numba

__all__ = ["jit", "caching_enabled"]

_cache_ok: dict[str, bool] = {}


def caching_enabled(module: str) -> bool:
    """Whether kernels of ``module`` were compiled with an on-disk cache."""
    return _cache_ok.get(module, False)


def jit(parallel: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: ``numba.njit`` with an on-disk cache when possible.

    Parameters
    ----------
    parallel
        Compile with ``parallel=True`` (``numba.prange`` loops run on threads).
    """

    def decorate(func: Callable) -> Callable:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", numba.NumbaWarning)
                dispatcher = numba.njit(cache=True, parallel=parallel, error_model="numpy")(func)
            _cache_ok[func.__module__] = True
        except RuntimeError:
            # Numba found no writable cache location: compile in memory only.
            dispatcher = numba.njit(cache=False, parallel=parallel, error_model="numpy")(func)
            _cache_ok[func.__module__] = False
        return dispatcher

    return decorate
