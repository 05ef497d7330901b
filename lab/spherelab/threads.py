"""The one thread policy of the package: how many BLAS and Numba threads a call may use.

Small work runs with one BLAS thread and one Numba thread, large work with every core. Waking a
thread pool costs microseconds on an idle machine and milliseconds when other processes keep the
cores busy, and OpenBLAS's threads spin while they wait for each other. Measured on a 2-core
machine (``benchmarks/speed/threads.py``, RESULTS.md "Threads"), median times:

* idle, two threads win from the smallest sizes: the harmonics of d = 9, L = 4 (660 features)
  1.9x at 250 to 32 000 points, a Gram product :math:`AA^\top` with M = 210 1.3-1.8x;
* with a second process running multi-threaded BLAS on both cores, the same Gram product on two
  BLAS threads took 12-1 016 ms against 0.24-55 ms on one (20x slower at 32 000 rows), and the
  harmonics on two Numba threads were erratic below ~8 000 points (4-16 ms where one thread
  takes 1.4-9 ms) and 1.2-1.5x faster above.

A model's step mixes many BLAS calls on P x P and P x chunk blocks (Cholesky, triangular
solves, products), and those lose from threads at the sizes of these models: a full-batch ELBO
evaluation of 128 + 128 inducing variables on 7 373 rows was 2.4x slower with two BLAS threads,
a minibatch step at M = 64 5x slower. So:

* Numba kernels (harmonics, Gegenbauer tables and series) decide for themselves at every call:
  every core from :data:`NUMBA_MIN_WORK` flops (an estimate given by the caller);
* BLAS is decided once, by the outermost entry point: every core only for a model with more than
  :data:`BLAS_MIN_DIM` inducing variables, or (:func:`gram_policy`) for one large Gram product
  of at least :data:`BLAS_MIN_WORK` flops in a streamed pass — and never while the machine is
  busy (1-minute load average above the core count + 1/4: other processes occupy the cores;
  read at most once a second).

* a streamed statistics pass (every Gaussian bound's data pass) deals its chunks to one thread
  per core (:func:`pass_workers`), each with one BLAS and one Numba thread and its own sums,
  chunks sized from the cache (:func:`spherelab.chunks.chunk_rows`): at 10^6 rows, M = 210, 0.71 s against 1.80 s
  with the harmonics on one core beside a single-threaded product (RESULTS.md); on a busy
  machine, or under a fixed count of one, the pass is sequential.

Everything small — every tiny model, every slider redraw, every test — is single-threaded, which
costs at most 2x on an idle machine and avoids 20x on a busy one. Every public entry point
(model ``fit``/``elbo``/``predict_f``/``objective``, the statistics pass, kernel Gram matrices,
the harmonics and their VJP, the Gegenbauer tables and series) runs inside :func:`policy`.
Users override it with :func:`set_threads` (process-wide, also via the environment variable
``SPHERELAB_THREADS``) or :func:`thread_limit` (a ``with`` block). ``SPHERELAB_CHUNK_ROWS`` fixes
the rows per chunk of every host pass (:func:`spherelab.chunks.fixed_chunk_rows`): the test suite runs its equality
tests under two values, so that no tolerance depends on one machine's cache.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from typing import Any, Callable, Iterator

import numba

from ._listing import own_names

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - threadpoolctl is a dependency
    ThreadpoolController = None

__all__ = [
    "NUMBA_MIN_WORK",
    "BLAS_MIN_WORK",
    "BLAS_MIN_DIM",
    "machine_busy",
    "set_threads",
    "get_threads",
    "thread_limit",
    "policy",
    "gram_policy",
    "pass_workers",
    "pass_worker",
    "numba_threads_for",
    "blas_threads_for",
    "entry_point",
]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports

#: Numba kernels use every core from this much work (flops, the caller's estimate): the
#: harmonics of 660 features at ~3 800 points; measured, see the module docstring
NUMBA_MIN_WORK = 1e7
#: one large BLAS product (the Gram product of a streamed pass) uses every core from this much
#: work, and only on a machine that is not busy. Measured inside the streamed pass, where the
#: product alternates with the parallel harmonics (OpenBLAS threads spin after each call and take
#: the cores from Numba's): 16 384-row chunks at M = 660 (1.4e10 flops) 3.4 s against 4.2 s on
#: one thread for 4e5 rows, at M = 210 (1.4e9) 0.80 s against 0.66 s, and 8 192-row chunks of a
#: 256-inducing decoupled model (1.1e9) 133 ms against 117 ms per ELBO evaluation
BLAS_MIN_WORK = 5e9
#: a model's dense algebra (Cholesky, triangular solves, products of P x P and P x chunk blocks)
#: uses every core only above this inducing count: measured 5x slower minibatch steps at M = 64
#: and 2.4x slower full-batch ELBO evaluations at M + K = 256 with two threads
BLAS_MIN_DIM = 1024
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


def _busy() -> bool:
    """:func:`machine_busy` as read when the outermost :func:`policy` of this thread was entered:
    every decision inside one call (a fit, an evaluation, a prediction) follows one reading of the
    load, so a load that changes mid-call changes neither the chunking nor the threads between its
    passes, and the call's result is that of one steady load, bit for bit."""
    reading = getattr(_state, "busy", None)
    return machine_busy() if reading is None else reading


def _fixed() -> int | None:
    f = getattr(_state, "fixed", None)
    return f if f is not None else _override


def numba_threads_for(work: float) -> int:
    """Numba threads for a compiled kernel doing about ``work`` flops."""
    f = _fixed()
    if f is not None:
        return f
    return 1 if work < NUMBA_MIN_WORK else _max_threads()


def blas_threads_for(work: float = 0.0, dim: int | None = None) -> int:
    """BLAS threads for dense algebra on matrices of dimension ``dim`` (the inducing count of a
    model: threads pay only above :data:`BLAS_MIN_DIM`), or, without ``dim``, for one large
    product of about ``work`` flops; always one on a busy machine."""
    f = _fixed()
    if f is not None:
        return f
    big = dim > BLAS_MIN_DIM if dim is not None else work >= BLAS_MIN_WORK
    return _max_threads() if big and not _busy() else 1


def pass_workers(chunks: int, work: float | None = None) -> int:
    """Threads for a pass over ``chunks`` chunks (:func:`spherelab.bounds.statistics.pass_sums`),
    each single-threaded with its own sums: every core on an idle machine (or the count of
    :func:`set_threads` / :func:`thread_limit`), one on a busy machine, never more than the chunks;
    one for a pass of less than :data:`NUMBA_MIN_WORK` flops (``work``; measured, RESULTS.md
    "Threads": a decoupled collapsed ELBO with 8 inducing points dealt to both cores took 1.2-1.9x
    one thread's time up to 16 000 rows, and 0.71x at 64 000); one outside the main
    thread (OpenBLAS honours a thread count set from the main thread only). Measured (RESULTS.md,
    "VISH at scale"): the Gram product at M = 210 runs at 88-95 GFLOP/s as one single-threaded
    syrk per core against 65-85 with OpenBLAS's own threads, at M = 660 at 110 against 91."""
    if threading.current_thread() is not threading.main_thread():
        return 1
    f = _fixed()
    if f is None and work is not None and work < NUMBA_MIN_WORK:
        return 1
    n = f if f is not None else (1 if _busy() else _max_threads())
    return max(1, min(n, chunks))


@contextlib.contextmanager
def pass_worker() -> Iterator[None]:
    """Inside a worker thread of a split pass (its caller holds :func:`thread_limit` ``(1)``,
    which fixes BLAS to one thread process-wide): one Numba thread, and every nested
    :func:`policy` leaves the process-wide BLAS setting alone."""
    previous = getattr(_state, "fixed", None), getattr(_state, "blas", None)
    _state.fixed, _state.blas = 1, 1
    try:
        with _numba(1):
            yield
    finally:
        _state.fixed, _state.blas = previous


@contextlib.contextmanager
def _blas(n: int) -> Iterator[None]:
    previous = getattr(_state, "blas", None)
    ctl = _blas_controller()
    limiter = ctl.limit(limits=n, user_api="blas") if ctl is not None and previous != n else None
    _state.blas = n
    try:
        yield
    finally:
        _state.blas = previous
        if limiter is not None:
            limiter.restore_original_limits()


@contextlib.contextmanager
def _numba(n: int) -> Iterator[None]:
    previous = numba.get_num_threads()
    if previous != n:
        numba.set_num_threads(n)
    try:
        yield
    finally:
        if previous != n:
            numba.set_num_threads(previous)


class _Policy:
    """The context of :func:`policy`: a plain class (no generator, no exit stack), entered around
    every compiled kernel, so its own cost stays at a few attribute reads; Numba's count is set
    only when it changes."""

    __slots__ = ("work", "dim", "blas", "numba")

    def __init__(self, work: float, dim: int | None) -> None:
        self.work, self.dim = work, dim

    def __enter__(self) -> None:
        active = getattr(_state, "active", 0)
        self.blas = None
        if not active:  # the outermost call reads the load once for everything inside it (_busy)
            try:
                _state.busy = machine_busy() if _fixed() is None else False
                self.blas = _blas(blas_threads_for(self.work, self.dim))
                self.blas.__enter__()
            except BaseException:
                _state.busy = None
                raise
        _state.active = active + 1
        try:
            n = numba_threads_for(self.work)
            previous = numba.get_num_threads()
            self.numba = previous if previous != n else None
            if self.numba is not None:
                numba.set_num_threads(n)
        except BaseException:
            self._leave(None, None, None)
            raise

    def __exit__(self, *exc) -> bool:
        if self.numba is not None:
            numba.set_num_threads(self.numba)
        self._leave(*exc)
        return False

    def _leave(self, *exc) -> None:
        _state.active -= 1
        if not _state.active:
            _state.busy = None
        if self.blas is not None:
            self.blas.__exit__(*exc)


def policy(work: float, dim: int | None = None) -> _Policy:
    """Run the enclosed code under the policy for about ``work`` flops on matrices of dimension
    ``dim`` (``with policy(work): ...``). Numba is set for ``work`` at every level (a compiled
    kernel knows its own size best); BLAS is decided by the outermost :func:`policy` only
    (:func:`blas_threads_for`) and inherited inside it, except by :func:`gram_policy`."""
    return _Policy(work, dim)


@contextlib.contextmanager
def gram_policy(work: float) -> Iterator[None]:
    """BLAS threads for one large matrix product of about ``work`` flops (a Gram product
    :math:`AA^\top` of a streamed pass), decided here even inside another :func:`policy`:
    dgemm is the one BLAS call measured to gain from threads on an idle machine."""
    with _blas(blas_threads_for(work)):
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
        with _blas(n), _numba(n):
            yield
    finally:
        _state.fixed = previous


def entry_point(work: Callable[..., float], dim: Callable[..., int | None] | None = None):
    """Decorator: run the function under :func:`policy` with the work ``work(*args, **kwargs)``
    and matrix dimension ``dim(*args, **kwargs)`` estimate (called with the function's own
    arguments; they must be cheap; if they fail, the function reports the bad arguments itself
    and the call runs single-threaded)."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                w = float(work(*args, **kwargs))
                d = None if dim is None else dim(*args, **kwargs)
            except Exception:  # the function validates its arguments itself
                w, d = 0.0, None
            with policy(w, d):
                return func(*args, **kwargs)

        return wrapper

    return decorate


def _from_environment() -> None:
    value = os.environ.get("SPHERELAB_THREADS", "").strip()
    if not value:
        return
    try:
        set_threads("auto" if value == "auto" else int(value))
    except (TypeError, ValueError):
        import warnings

        warnings.warn(f"SPHERELAB_THREADS={value!r} is not 'auto' or a positive int: ignored", RuntimeWarning,
                      stacklevel=2)


_from_environment()
