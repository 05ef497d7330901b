"""The one thread policy of the package: how many BLAS and Numba threads a call may use.

Small work runs with one BLAS thread and one Numba thread, large work with every core. Waking a
thread pool costs microseconds on an idle machine and milliseconds when other processes keep the
cores busy, and OpenBLAS's threads spin while they wait for each other. Measured on a 2-core
machine (``benchmarks/threads.py``, RESULTS.md "Threads"), median times:

* idle, two threads win from the smallest sizes: the harmonics of d = 9, L = 4 (660 features)
  1.9x at 250 to 32 000 points, a Gram product :math:`AA^\top` with M = 210 1.3-1.8x;
* with a second process running multi-threaded BLAS on both cores, the same Gram product on two
  BLAS threads took 12-1 016 ms against 0.24-55 ms on one (20x slower at 32 000 rows), and the
  harmonics on two Numba threads were erratic below ~8 000 points (4-16 ms where one thread
  takes 1.4-9 ms) and 1.2-1.5x faster above.

So the policy decides per call from an estimate of its floating-point work given by the caller:
Numba kernels run on every core from :data:`NUMBA_MIN_WORK`, BLAS from :data:`BLAS_MIN_WORK`
and only while the machine is not busy (1-minute load average above the core count + 1/4,
i.e. other processes occupy the cores: read at most once a second). Everything smaller —
every tiny model, every slider redraw, every test — is single-threaded, which is never more than
2x slower and never 20x.

Every public entry point (model ``fit``/``elbo``/``predict_f``, the statistics pass, the
harmonics and their VJP, the Gegenbauer tables and series) runs inside :func:`policy`; an inner
call inherits the decision of the outermost one. Users override it with :func:`set_threads`
(process-wide, also via the environment variable ``SPHERELAB_THREADS``) or :func:`thread_limit`
(a ``with`` block).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from typing import Any, Callable, Iterator

import numba

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - threadpoolctl is a dependency
    ThreadpoolController = None

__all__ = [
    "NUMBA_MIN_WORK",
    "BLAS_MIN_WORK",
    "machine_busy",
    "set_threads",
    "get_threads",
    "thread_limit",
    "policy",
    "threads_for",
    "entry_point",
]

#: Numba kernels use every core from this much work (flops, the caller's estimate): the
#: harmonics of 660 features at ~19 000 points; measured, see the module docstring
NUMBA_MIN_WORK = 5e7
#: BLAS uses every core from this much work, and only on a machine that is not busy
BLAS_MIN_WORK = 5e8
#: seconds a load-average reading is reused
_LOAD_TTL = 1.0

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


_load = [0.0, False]  # time of the last reading, busy


def machine_busy() -> bool:
    """Whether other processes keep every core busy: the 1-minute load average exceeds the
    number of cores by more than 1/4 (read at most once a second; False where unavailable)."""
    now = time.monotonic()
    if now - _load[0] > _LOAD_TTL:
        try:
            _load[1] = os.getloadavg()[0] > (os.cpu_count() or 1) + 0.25
        except (OSError, AttributeError):
            _load[1] = False
        _load[0] = now
    return _load[1]


def threads_for(work: float) -> tuple[int, int]:
    """``(blas, numba)`` thread counts the policy gives a call of about ``work`` flops."""
    if getattr(_state, "fixed", None) is not None:
        return _state.fixed, _state.fixed
    if _override is not None:
        return _override, _override
    numba_n = 1 if work < NUMBA_MIN_WORK else _max_threads()
    blas_n = 1 if work < BLAS_MIN_WORK or machine_busy() else _max_threads()
    return blas_n, numba_n


@contextlib.contextmanager
def _apply(counts: tuple[int, int]) -> Iterator[None]:
    n_blas, n_numba = counts
    depth = getattr(_state, "active", 0)
    previous_numba = numba.get_num_threads()
    ctl = _blas_controller()
    blas = None
    if ctl is not None and getattr(_state, "blas", None) != n_blas:
        blas = ctl.limit(limits=n_blas, user_api="blas")
    previous_blas = getattr(_state, "blas", None)
    _state.active, _state.blas = depth + 1, n_blas
    numba.set_num_threads(n_numba)
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
        with _apply((n, n)):
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


if os.environ.get("SPHERELAB_THREADS"):
    set_threads(os.environ["SPHERELAB_THREADS"] if os.environ["SPHERELAB_THREADS"] == "auto"
                else int(os.environ["SPHERELAB_THREADS"]))
