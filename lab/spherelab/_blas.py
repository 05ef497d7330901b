"""How many threads BLAS may use inside the optimisation loops of the inducing-point models.

Measured on a 2-core machine (``benchmarks/RESULTS.md``, "BLAS threads"): one step of
:class:`~spherelab.OrthogonalSVGP` with M = 64 inducing points on a minibatch of 256 takes 7 ms
with single-threaded OpenBLAS and 35 ms with two threads, and full-batch steps on 7 000 rows are
also faster single-threaded up to M = 256: the matrices are too small for the threads' start-up
and synchronisation to pay, and our element-wise kernel work does not use them. Large problems
(M in the thousands) do profit, so the default limits threads only below a size threshold.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - threadpoolctl is a dependency; keep working without it
    threadpool_limits = None

__all__ = ["blas_threads", "resolve_threads"]

#: below this many inducing variables the loops run with single-threaded BLAS by default
SMALL_MODEL = 1024


def resolve_threads(setting: Any, num_inducing: int) -> int | None:
    """``"auto"``: 1 for models with at most :data:`SMALL_MODEL` inducing variables, else
    ``None`` (BLAS's own default); an int is used as given; ``None`` leaves BLAS alone."""
    if setting == "auto":
        return 1 if num_inducing <= SMALL_MODEL else None
    if setting is None:
        return None
    n = int(setting)
    if n < 1:
        raise ValueError(f"blas_threads must be 'auto', None or a positive int, got {setting!r}")
    return n


def blas_threads(n: int | None):
    """Context manager limiting BLAS to ``n`` threads (no-op for ``None``)."""
    if n is None or threadpool_limits is None:
        return nullcontext()
    return threadpool_limits(limits=n, user_api="blas")
