"""Numba compilation policy shared by every jitted kernel of the package.

Kernels are compiled lazily (no signatures, so importing :mod:`spherelab` compiles nothing) and
cached on disk. Numba refuses ``cache=True`` outright when it finds no writable location
(read-only site-packages and no writable ``$HOME``, a read-only ``NUMBA_CACHE_DIR``); we then
point Numba's cache at a private directory of this user under the system's temporary directory
(created mode 0700 and used only if this user owns it and nobody else may write to it), so the
kernels compile once per machine instead of once per process (7-10 s), and only when even that
is impossible compile in memory (one warning says so; importing never fails for it). The private
directory is refused, with the reason in that warning, when it is a symbolic link, not a
directory, not this user's, or writable by others (``lstat``: a link planted there is not
followed).

Every kernel releases the GIL (``nogil``), so Dask's threaded scheduler and the statistics pass's
second thread run them in parallel. No kernel uses ``fastmath``: it removes NaN checks, and
several kernels detect invalid values. A kernel may allow LLVM to reassociate its floating-point
sums (``reassociate=True``, the ``reassoc`` flag alone), so that a reduction over a row runs in
vector lanes; NaN and infinity keep their meaning.
"""

from __future__ import annotations

import os
import stat
import tempfile
import warnings
from typing import Callable

import numba

__all__ = ["jit", "caching_enabled"]

_cache_ok: dict[str, bool] = {}
_warned: list[str] = []


def caching_enabled(module: str) -> bool:
    """Whether kernels of ``module`` were compiled with an on-disk cache."""
    return _cache_ok.get(module, False)


def jit(parallel: bool = False, reassociate: bool = False, inline: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: ``numba.njit`` with an on-disk cache when possible.

    Parameters
    ----------
    parallel
        Compile with ``parallel=True`` (``numba.prange`` loops run on threads).
    reassociate
        Let sums be reordered (``fastmath={"reassoc"}``): reductions vectorise, their rounding
        changes within the sum's own error bound.
    inline
        Inline the function into its callers in Numba's IR (``inline="always"``): a small function
        called in a loop's body, so that the loop can vectorise.
    """
    options = {"parallel": parallel, "error_model": "numpy", "nogil": True, "inline": "always" if inline else "never"}
    if reassociate:
        options["fastmath"] = {"reassoc"}

    def decorate(func: Callable) -> Callable:
        for attempt in range(2):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", numba.NumbaWarning)
                    dispatcher = numba.njit(cache=True, **options)(func)
                _cache_ok[func.__module__] = True
                return dispatcher
            except RuntimeError:
                # no writable cache location: once, try this user's private directory
                if attempt or not _use_private_cache_dir():
                    break
        _cache_ok[func.__module__] = False
        if not _warned:
            _warned.append(func.__module__)
            warnings.warn("spherelab compiles its kernels in memory (once per process, several seconds): no "
                          f"writable cache directory ({_refusal[0] if _refusal else 'none found'}); set "
                          "NUMBA_CACHE_DIR to a directory of yours to keep them", RuntimeWarning, stacklevel=2)
        return numba.njit(cache=False, **options)(func)

    return decorate


def private_cache_dir() -> str:
    """This user's fallback Numba cache directory (``<tmp>/spherelab-numba-<uid>``); raises
    ``OSError`` when the system has no usable temporary directory."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"spherelab-numba-{uid}")


_refusal: list[str] = []  # why the private directory was not used (for the warning)


def _use_private_cache_dir() -> bool:
    """Point ``numba.config.CACHE_DIR`` at :func:`private_cache_dir` when it is safe to (a real
    directory of ours that nobody else may write to); True when it was set."""
    try:
        path = private_cache_dir()
        if numba.config.CACHE_DIR and numba.config.CACHE_DIR == path:
            return False  # already tried
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(path)  # a symbolic link is judged as itself, not followed
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            _refusal[:] = [f"{path} is a symbolic link or not a directory"]
            return False
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
            _refusal[:] = [f"{path} is not this user's or others may write to it"]
            return False  # compiled code from it would not be ours
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        _refusal[:] = [f"{type(err).__name__}: {err}"]
        return False
    numba.config.CACHE_DIR = path
    return True
