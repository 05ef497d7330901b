"""Processes and threads around the compiled kernels: the Numba threading layer.

Numba runs the parallel kernels on one of three layers: ``omp`` (GNU OpenMP: thread-safe, but a
``fork()`` after its pool started makes every child abort — "fork() called from a process
already using GNU OpenMP" — so a ``multiprocessing`` pool with Linux's default start method
never returns), ``workqueue`` (fork-safe, but two threads running kernels at once abort the
process) and ``tbb`` (both fork- and thread-safe). spherelab asks for ``tbb`` (installed with
it on Linux x86-64; pip puts ``libtbb`` outside the loader's path, so it is loaded here first)
unless ``NUMBA_THREADING_LAYER`` says otherwise. Without it the OpenMP layer stays and a
``fork()`` after a parallel kernel ran warns with what to do instead (``spawn``/``forkserver``
start methods, or installing ``tbb``). :func:`threading_layer` says which one is in use.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings

import numba

__all__ = ["threading_layer", "fork_safe"]

_state = {"chosen": None}


def _load_pip_tbb() -> bool:
    """Make pip's ``libtbb.so.12`` (in ``<prefix>/lib``) loadable for Numba's TBB pool."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


def _choose() -> str:
    if sys.platform.startswith("linux"):
        _load_pip_tbb()  # also when the user asks for tbb themselves
    if os.environ.get("NUMBA_THREADING_LAYER") or numba.config.THREADING_LAYER != "default":
        return "user"  # the user's choice stands
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401  (the layer's library loads)
    except ImportError:
        return "default"
    numba.config.THREADING_LAYER = "tbb"
    try:
        numba.get_num_threads()  # launch now: a TBB too old for this Numba fails here, not in a fit
    except (ValueError, RuntimeError, ImportError):  # pragma: no cover - depends on the install
        numba.config.THREADING_LAYER = "default"
        return "default"
    return "tbb"


def threading_layer() -> str:
    """The Numba threading layer the kernels run on (launching the pool if needed)."""
    numba.get_num_threads()
    return numba.threading_layer()


def fork_safe() -> bool:
    """Whether a ``fork()`` now leaves children able to run the parallel kernels."""
    try:
        return numba.threading_layer() != "omp"
    except ValueError:  # no parallel kernel has run: nothing to break yet
        return True


def _before_fork() -> None:
    if not fork_safe():
        warnings.warn(
            "fork() after spherelab ran parallel kernels on Numba's OpenMP layer: the child will abort "
            "if it runs one (a fork-started multiprocessing pool then never returns). Use "
            "multiprocessing.get_context('spawn') or 'forkserver', or install tbb "
            "(pip install tbb) so that spherelab uses Numba's fork-safe TBB layer.",
            RuntimeWarning,
            stacklevel=2,
        )


if _state["chosen"] is None:
    _state["chosen"] = _choose()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork)
