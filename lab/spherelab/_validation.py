"""Input checks with messages that name the argument and say what was expected."""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any

import numba
import numpy as np

from .backend.jit import jit
from .threads import policy

__all__ = [
    "check_int",
    "check_positive",
    "check_dim",
    "check_degree",
    "check_finite_array",
    "check_cosines",
    "check_points_on_sphere",
    "match_targets",
    "check_nonnegative",
    "check_scale",
    "check_length",
    "check_variance",
    "MAX_MAGNITUDE",
    "memory_budget",
    "check_allocation",
    "check_bool",
    "check_seed",
    "check_size",
    "fit_options",
    "scale_of",
]


_WARNED_MEMORY: set[str] = set()
_MAX_BUDGET = 1 << 60


def memory_budget() -> int:
    """Bytes one allocation may take: ``SPHERELAB_MAX_MEMORY`` (e.g. ``"8G"``, ``"500M"``, or
    bytes) when set, else the machine's physical memory."""
    import os
    import re

    text = os.environ.get("SPHERELAB_MAX_MEMORY", "").strip()
    if text:
        # digits with an optional fraction and unit: "inf", "-8G", "1e400" or "8 GB of RAM" are refused,
        # and so is a size beyond 1 EiB (400 digits would overflow a float)
        match = re.fullmatch(r"(\d{1,30}(?:\.\d{1,30})?)\s*([KMGTkmgt]?)[iI]?[bB]?", text)
        units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        budget = int(Decimal(match[1]) * units[match[2].upper()]) if match else 0
        if 0 < budget <= _MAX_BUDGET:
            return budget
        if text not in _WARNED_MEMORY:  # once per value, not at every allocation check
            import warnings

            _WARNED_MEMORY.add(text)
            warnings.warn(f"SPHERELAB_MAX_MEMORY={text[:40]!r} is not a positive size like '8G' or '500M' (at most "
                          "1 EiB): ignored (the "
                          "machine's physical memory is the limit)", RuntimeWarning, stacklevel=2)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


def check_allocation(nbytes: float, what: str, hint: str) -> None:
    """Refuse, with the estimate and ``hint``, an allocation of ``nbytes`` beyond
    :func:`memory_budget` (a ``MemoryError`` before any memory is taken)."""
    budget = memory_budget()
    if nbytes > budget:
        raise MemoryError(f"{what} would need about {nbytes / 2**30:,.1f} GiB, more than the "
                          f"{budget / 2**30:,.1f} GiB available (SPHERELAB_MAX_MEMORY or physical memory); {hint}")


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise ``ValueError``/``TypeError`` naming ``name``: an
    integer (Python's or NumPy's) — not a bool, not a float even if whole (``2.0`` or ``True``
    where a count is meant is a mistake worth naming), within ``[minimum, maximum]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        hint = " (use an int, e.g. int(x))" if isinstance(value, numbers.Real) and not isinstance(
            value, (bool, np.bool_)) and float(value).is_integer() else ""
        raise TypeError(f"{name} must be an integer, got {value!r}{hint}")
    value = int(value)
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum:,}, got {value:,}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (NumPy's too), or a ``TypeError`` naming ``name``: a string like
    ``"no"`` or a number would otherwise count as true."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def check_seed(value: Any, name: str = "seed"):
    """A seed for ``numpy.random.default_rng``: ``None``, an integer >= 0 (not a bool, not a float)
    or a ``numpy.random.Generator`` (returned as is), or an error naming ``name``."""
    if value is None or isinstance(value, (np.random.Generator, np.random.SeedSequence)):
        return value
    return check_int(value, name, minimum=0)


def fit_options(**values: Any) -> tuple:
    """The options of a fit, each checked by its name (the same names mean the same thing in every
    model): flags ``optimize``, ``train_lift``, ``train_directions``, ``collapsed`` (or None);
    counts ``maxiter``, ``lift_maxiter``, ``iterations`` (>= 0), ``lift_subsample``, ``batch_size``
    (>= 1); ``seed``; ``lr``, ``gamma`` (> 0), ``max_time`` (> 0 seconds, or None) and ``lift_ftol``
    (>= 0, or None). Returned in the order given."""
    checks = {"optimize": check_bool, "train_lift": check_bool, "train_directions": check_bool,
              "collapsed": lambda v, n: None if v is None else check_bool(v, n),
              "maxiter": lambda v, n: check_int(v, n, minimum=0),
              "lift_maxiter": lambda v, n: check_int(v, n, minimum=0),
              "iterations": lambda v, n: check_int(v, n, minimum=0),
              "lift_subsample": lambda v, n: check_int(v, n, minimum=1),
              "batch_size": lambda v, n: check_int(v, n, minimum=1), "seed": check_seed, "lr": check_positive,
              "gamma": check_positive, "lift_ftol": lambda v, n: None if v is None else check_nonnegative(v, n),
              "max_time": lambda v, n: None if v is None else check_positive(v, n)}
    return tuple(checks[name](value, name) for name, value in values.items())


def check_size(value: Any, name: str, minimum: int = 0, row_bytes: float = 8.0, what: str = "rows") -> int:
    """A count of ``what`` whose allocation is about ``row_bytes`` per unit: an integer >= ``minimum``
    whose memory fits :func:`memory_budget` (a ``MemoryError`` naming ``name`` before NumPy sees it)."""
    n = check_int(value, name, minimum=minimum)
    check_allocation(row_bytes * float(n), f"{name} = {n:,} {what}", f"ask for fewer {what}")
    return n


def _real_number(value: Any, name: str) -> float:
    """``value`` as a Python float, or a ``TypeError`` naming ``name`` (complex, text and bools
    refused: ``True`` is never a variance)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if isinstance(value, (str, bytes)):  # float("1e3") would parse it: text is not a number here
        raise TypeError(f"{name} must be a number, got the text {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None


def check_positive(value: Any, name: str) -> float:
    """A finite number > 0 as a Python float, or a ``TypeError``/``ValueError`` naming ``name``."""
    v = _real_number(value, name)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_nonnegative(value: Any, name: str) -> float:
    """A finite number >= 0 as a Python float, or a ``TypeError``/``ValueError`` naming ``name``."""
    v = _real_number(value, name)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


#: the range of a length-like hyper-parameter (lengthscale, input scale): its square and its
#: inverse square enter the kernels, and both must stay far inside float64
MIN_LENGTH, MAX_LENGTH = 1e-100, 1e100


def check_length(value: Any, name: str) -> float:
    """A lengthscale: a finite number in [1e-100, 1e100], or an error naming ``name``."""
    v = check_positive(value, name)
    if not MIN_LENGTH <= v <= MAX_LENGTH:
        raise ValueError(f"{name} must lie between {MIN_LENGTH:g} and {MAX_LENGTH:g} (its square enters the "
                         f"kernel), got {value!r}; standardise the inputs if the data need such a scale")
    return v


def check_variance(value: Any, name: str) -> float:
    """A variance: a finite number in [1e-150, 1e150] (its inverse and its products with the data
    stay inside float64), or an error naming ``name``."""
    v = check_positive(value, name)
    if not 1e-150 <= v <= MAX_MAGNITUDE:
        raise ValueError(f"{name} must lie between 1e-150 and {MAX_MAGNITUDE:g}, got {value!r}; standardise the "
                         "targets if the data need such a scale")
    return v


def check_scale(value: Any, name: str) -> float | np.ndarray:
    """A positive scalar, or a non-empty 1-d array of finite positives (returned read-only, so
    that an in-place change cannot bypass this check)."""
    arr = check_finite_array(value, name)
    if arr.ndim > 1 or arr.size == 0 or np.any(arr <= 0):
        raise ValueError(f"{name} must be a positive scalar or a non-empty 1-d array of positives, got {value!r}")
    if np.any(arr < MIN_LENGTH) or np.any(arr > MAX_LENGTH):
        raise ValueError(f"{name} must lie between {MIN_LENGTH:g} and {MAX_LENGTH:g}, got {value!r}; "
                         "standardise the inputs if the data need such a scale")
    if arr.ndim == 0:
        return float(arr)
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


def check_dim(dim: Any, name: str = "dim") -> int:
    """Ambient dimension d of the sphere S^{d-1}: an integer >= 2."""
    return check_int(dim, name, minimum=2)


def check_degree(degree: Any, name: str = "max_degree") -> int:
    """A polynomial degree: an integer >= 0."""
    return check_int(degree, name, minimum=0)


def check_finite_array(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """Convert to a float64 array and reject NaN/inf (and a wrong number of axes)."""
    if hasattr(x, "__cuda_array_interface__") or type(x).__module__.startswith("cupy"):
        raise TypeError(
            f"{name} is a GPU array; this function runs on the CPU: pass a NumPy array "
            "(e.g. cupy.asnumpy(x))"
        )
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if isinstance(x, bool):
        kind = "b"
    elif kind is None and not isinstance(x, (numbers.Real, np.ndarray)):
        try:
            kind = np.asarray(x).dtype.kind  # lists, tuples: what NumPy makes of them
        except (TypeError, ValueError) as err:  # ragged nesting, objects NumPy cannot hold
            raise TypeError(f"{name} must be a real numeric array, got {type(x).__name__} NumPy cannot read as "
                            f"one: {err}") from None
    if kind in ("c", "b", "O", "U", "S", "M", "m", "V"):
        what = {"c": "complex", "b": "boolean", "O": "object", "U": "string", "S": "bytes",
                "M": "datetime", "m": "timedelta", "V": "structured"}[kind]
        raise TypeError(f"{name} must be a real numeric array (int or float), got a {what} array"
                        + ("; convert it with .astype(float) if that is what you mean" if kind in "bO" else ""))
    if isinstance(x, (complex, np.complexfloating)):
        raise TypeError(f"{name} must be real, got the complex number {x!r}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a real numeric array: {err}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    if not _all_finite(arr):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s)")
    return arr



def check_cosines(t: Any, name: str = "t") -> np.ndarray:
    """``t`` as the cosines a zonal kernel takes: finite and in [-1, 1] (1e-9 of rounding allowed)."""
    t = check_finite_array(t, name)
    if t.size and np.max(np.abs(t)) > 1.0 + 1e-9:
        raise ValueError(f"{name} must lie in [-1, 1] (the cosine of the angle between two unit vectors), got "
                         f"values up to {float(np.max(np.abs(t))):.6g} in magnitude")
    return t

def _all_finite(arr: np.ndarray, rows: int = 65536) -> bool:
    if arr.size >= _COMPILED_FROM and arr.flags.c_contiguous:
        # one compiled pass, every core for large arrays (through the thread policy), allocating
        # nothing (NumPy's blocks allocate a boolean temporary each)
        with policy(float(arr.size)):
            return _count_nonfinite(arr.reshape(-1), max(1, 4 * numba.get_num_threads())) == 0
    # by blocks of rows: the check's memory stays bounded whatever N (a whole-array isfinite
    # would allocate N x D booleans)
    if arr.ndim < 1 or arr.shape[0] <= rows:
        return bool(np.all(np.isfinite(arr)))
    return all(bool(np.all(np.isfinite(arr[i:i + rows]))) for i in range(0, arr.shape[0], rows))


#: arrays from this many entries are checked by the compiled pass (below, NumPy's own is as fast)
_COMPILED_FROM = 1 << 20


@jit(parallel=True)
def _count_nonfinite(flat, blocks):  # pragma: no cover - compiled
    n = flat.shape[0]
    step = (n + blocks - 1) // blocks
    bad = 0
    for b in numba.prange(blocks):
        for i in range(b * step, min(n, (b + 1) * step)):
            if not math.isfinite(flat[i]):
                bad += 1
    return bad


#: largest magnitude accepted where values are squared (targets, lifted inputs): its square
#: stays far below float64's 1.8e308
MAX_MAGNITUDE = 1e150


def check_points_on_sphere(
    x: Any, dim: int, name: str = "X", atol: float = 1e-6
) -> np.ndarray:
    """Validate an (N, dim) array of unit vectors and return it renormalised, C-contiguous.

    Rows whose norm differs from 1 by more than ``atol`` (including zero rows) are rejected,
    because silently projecting them would hide a missing normalisation in the caller.
    """
    atol = check_nonnegative(atol, "atol")
    arr = check_finite_array(x, name)
    if arr.ndim == 1 and arr.shape[0] == dim:
        raise ValueError(
            f"{name} must be a 2-d array of shape (N, {dim}); got a single point of shape "
            f"{arr.shape}: use {name}[None, :]"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array of shape (N, {dim}), got shape {arr.shape}")
    if arr.shape[1] != dim:
        raise ValueError(
            f"{name} must have {dim} columns (points on S^{dim - 1} in R^{dim}), "
            f"got shape {arr.shape}"
        )
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    off = np.abs(norms - 1.0) > atol
    if np.any(off):
        i = int(np.flatnonzero(off)[0])
        raise ValueError(
            f"{name} must contain unit vectors (|norm - 1| <= {atol}); row {i} has norm "
            f"{norms[i]:.6g} ({int(off.sum())} row(s) off the sphere). Normalise the rows, "
            "e.g. X / np.linalg.norm(X, axis=1, keepdims=True)"
        )
    return np.ascontiguousarray(arr / norms[:, None])


def match_targets(y, n_rows: int):
    """``y`` ``(N,)`` or ``(N, 1)`` (NumPy or Dask) as 1-d, checked against the ``n_rows`` of X
    and for emptiness (the shape rules of every fit, in memory or on Dask)."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-d (or a single column), got shape {y.shape}")
    if n_rows != y.shape[0]:
        raise ValueError(f"X has {n_rows} rows but y has {y.shape[0]} values")
    if n_rows == 0:
        raise ValueError("X and y are empty: need at least one observation")
    return y


def check_data(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Training inputs ``(N, D)`` and targets ``(N,)`` (or ``(N, 1)``): finite, matching,
    non-empty; returns them as float64 with ``y`` 1-d."""
    X = check_finite_array(X, "X", ndim=2)
    if X.shape[1] == 0:
        raise ValueError(f"X must have at least one input column, got shape {X.shape}")
    y = match_targets(check_finite_array(y, "y"), X.shape[0])
    top = max(float(y.max()), -float(y.min()))  # no N-sized temporary
    if top > MAX_MAGNITUDE:
        raise ValueError(f"y has values up to {top:.3g}: their squares overflow float64 (limit "
                         f"{MAX_MAGNITUDE:g}); standardise the targets (spherelab.datasets.Standardizer)")
    return X, y


def scale_of(A: np.ndarray, axis=None) -> tuple[Any, Any]:
    """Mean and standard deviation of ``A`` computed without overflow: ``A`` divided by its
    largest magnitude first (values near 1e200 square to infinity). A spread within rounding of
    one constant (at most n eps of the largest magnitude, n the values averaged: what summing n
    equal values can leave, and what ``0.1 * 3`` against ``0.3`` gives) is reported as 0, so a
    constant column is not divided by its rounding (that made predictive deviations of 1e15)."""
    big = np.max(np.abs(A), axis=axis)
    big = np.where(big > 0, big, 1.0)
    unit = A / big
    n = A.size if axis is None else A.shape[axis]
    sd = unit.std(axis=axis)
    return big * unit.mean(axis=axis), big * np.where(sd > n * np.finfo(np.float64).eps, sd, 0.0)
