"""The one thread policy of the package: how many BLAS and Numba threads a call may use.

Small work runs with one BLAS thread and one Numba thread, large work with every core. Waking a
thread pool costs tens of microseconds idle and milliseconds when the other cores are busy: on a
2-core machine with a second process keeping both cores busy, one ``OrthogonalSVGP`` objective on
12 rows took 71-151 ms with the default pools and 1.1 ms with both pinned to one thread, and the
test suite took 687-936 s against 53-91 s. Pinning only one of the two pools helps only partly,
so the policy always sets both.

The decision is by the amount of floating-point work a call will do, estimated by the caller
(rows x features, M^3 for a factorisation, ...): below :data:`PARALLEL_MIN_WORK` a call is
single-threaded. The threshold was measured on a 2-core machine (``benchmarks/threads.py``):
the harmonics of d = 9, L = 4 (660 features) become faster on two threads at about 2 000 points
(1.3e6 features x points) when the machine is idle and never when it is loaded; a dgemm
:math:`\\Phi^\\top\\Phi` with M = 210 at about 4 000 rows (1.8e8 flops). The threshold sits
where two threads still win on an idle machine, so small calls never pay the pool on a busy one.

Every public entry point (model ``fit``/``elbo``/``predict_f``, the bounds, the harmonics and
their VJP, the Gegenbauer tables, kernel Gram matrices) runs inside :func:`policy`; an inner
call inherits the decision of the outermost one. Users override it with :func:`set_threads`
(process-wide) or :func:`thread_limit` (a ``with`` block).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any, Callable, Iterator

import numba

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - threadpoolctl is a dependency
    ThreadpoolController = None

__all__ = ["PARALLEL_MIN_WORK", "set_threads", "get_threads", "thread_limit", "policy", "threads_for",
           "entry_point"]

#: below this many floating-point operations (an estimate given by the caller) a call runs on one
#: BLAS and one Numba thread; measured, see the module docstring
PARALLEL_MIN_WORK = 2_000_000

_state = threading.local()
_override: int | None = None  # set_threads(n): every call uses n threads
_controller = None
_lock = threading.Lock()


def _blas_controller():
    global _controller
    if _controller is None and ThreadpoolController is not None:
        with _lock:
            if _controller is None:
                _controller = ThreadpoolController()
    return _controller


def _max_threads() -> int:
    return int(numba.config.NUMBA_NUM_THREADS)


def _check_count(n: Any, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int,)) and not (hasattr(n, "__index__")):
        raise TypeError(f"{name} must be a positive int, 'auto' or None, got {n!r}")
    n = int(n)
    if n < 1:
        raise ValueError(f"{name} must be a positive int, 'auto' or None, got {n}")
    return n


def set_threads(n: int | str | None = "auto") -> None:
    """Set the process-wide thread count of every spherelab call.

    Parameters
    ----------
    n
        A positive int: every call uses ``n`` BLAS and ``n`` Numba threads (capped at the Numba
        pool size); ``"auto"`` or ``None``: the size-based policy (the default).

    Examples
    --------
    >>> import spherelab as sl
    >>> sl.set_threads(1)        # e.g. several processes share the machine
    >>> sl.set_threads("auto")   # back to the default policy
    """
    global _override
    if n is None or n == "auto":
        _override = None
        return
    _override = min(_check_count(n), _max_threads())
    ctl = _blas_controller()
    if ctl is not None:
        ctl.limit(limits=_override, user_api="blas")
    numba.set_num_threads(_override)


def get_threads() -> int | None:
    """The count set by :func:`set_threads` (``None``: the size-based policy)."""
    return _override


def threads_for(work: float) -> int:
    """The thread count the policy gives a call doing about ``work`` floating-point operations."""
    if getattr(_state, "fixed", None) is not None:
        return _state.fixed
    if _override is not None:
        return _override
    return 1 if work < PARALLEL_MIN_WORK else _max_threads()


@contextlib.contextmanager
def _apply(n: int) -> Iterator[None]:
    depth = getattr(_state, "active", 0)
    previous_numba = numba.get_num_threads()
    ctl = _blas_controller()
    blas = None
    if ctl is not None and getattr(_state, "blas", None) != n:
        blas = ctl.limit(limits=n, user_api="blas")
    previous_blas = getattr(_state, "blas", None)
    _state.active, _state.blas = depth + 1, n
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(previous_numba)
        _state.active, _state.blas = depth, previous_blas
        if blas is not None:
            blas.restore_original_limits()


@contextlib.contextmanager
def policy(work: float) -> Iterator[None]:
    """Run the enclosed code on :func:`threads_for` ``(work)`` threads of both pools; inside
    another :func:`policy` (or :func:`thread_limit`) block the outer decision stands."""
    if getattr(_state, "active", 0):
        yield
        return
    with _apply(threads_for(work)):
        yield


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[None]:
    """Run the enclosed spherelab calls on exactly ``n`` BLAS and Numba threads.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> with sl.thread_limit(1):
    ...     Phi = sl.SphericalHarmonics(3, 4)(sl.sample_sphere(10, 3, rng=0))
    """
    n = min(_check_count(n), _max_threads())
    previous = getattr(_state, "fixed", None)
    _state.fixed = n
    try:
        with _apply(n):
            yield
    finally:
        _state.fixed = previous


def entry_point(work: Callable[..., float]) -> Callable[[Callable], Callable]:
    """Decorator: run the function under :func:`policy` with the work ``work(*args, **kwargs)``
    estimates (called with the function's own arguments; it must be cheap and must not fail:
    errors in it count as large work, and the function then reports them itself)."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if getattr(_state, "active", 0):
                return func(*args, **kwargs)
            try:
                w = float(work(*args, **kwargs))
            except Exception:  # the function validates its arguments itself
                w = float("inf")
            with _apply(threads_for(w)):
                return func(*args, **kwargs)

        return wrapper

    return decorate


def rows_times(n_rows: Any, per_row: float) -> float:
    """Work of a pass over ``n_rows`` rows (an array's first axis, or a count) at ``per_row``."""
    n = n_rows if isinstance(n_rows, (int, float)) else getattr(n_rows, "shape", (len(n_rows),))[0]
    return float(n) * float(per_row)


if os.environ.get("SPHERELAB_THREADS"):
    set_threads(os.environ["SPHERELAB_THREADS"] if os.environ["SPHERELAB_THREADS"] == "auto"
                else int(os.environ["SPHERELAB_THREADS"]))
