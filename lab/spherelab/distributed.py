r"""Dask arrays in and out: the statistics of VISH's bound as a map-reduce over blocks of rows,
predictions as lazy Dask arrays.

VISH's Gaussian bound sees the data only through additive statistics (:math:`G = K_{uf}K_{fu}`,
:math:`c = K_{uf}y`, :math:`y^\top y`, :math:`\sum r^2`, N — :mod:`spherelab.bounds.statistics`),
so a Dask array ``(N, D)`` (from memory, Zarr via ``dask.array.from_zarr``, Parquet via
``dask.dataframe``) is fitted by computing them per block of rows with the same function as an
in-memory array (:func:`~spherelab.bounds.harmonic_statistics`) and summing them pairwise
(a tree) on whatever scheduler is active: a ``dask.distributed`` client if one exists, Dask's
threaded scheduler otherwise (the compiled kernels release the GIL; each block runs
single-threaded, Dask supplies the parallelism). Only :math:`M \times M` results travel. The
decoupled models' Gaussian fits do the same with two passes per evaluation: the whitened
statistics (:func:`block_statistics`), then, with :math:`\partial\mathcal L/\partial\Phi` known,
the gradient's sums over the rows (:func:`block_sum`). The
lift stage's subsample is taken block by block (the same rows as in memory, so the fitted
hyper-parameters agree), never loading the data. ``predict_f``/``predict_y`` of every model map
over the blocks and return Dask arrays, lazily.

Dask is optional (``pip install spherelab[dask]``); nothing here is imported without it.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable

import numpy as np

from ._listing import own_names
from ._validation import check_data, match_targets

__all__ = ["is_dask", "prepare", "subsample_rows", "take_rows", "block_statistics", "block_sum", "without_data",
           "predict_blocks", "lazy_rows"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports


def is_dask(x: Any) -> bool:
    """Whether ``x`` is a Dask array (decided without importing Dask)."""
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks")


def prepare(X: Any, y: Any | None = None):
    """Dask inputs checked for shape (values are checked block by block when computed): ``X``
    ``(N, D)`` with one column chunk, ``y`` ``(N,)`` (a Dask or NumPy array, or ``(N, 1)``)
    chunked like X's rows."""
    import dask.array as da

    if not is_dask(X):
        raise TypeError(f"X must be a Dask array here, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array, got shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes (e.g. from a Dask DataFrame): call X.compute_chunk_sizes() "
                         "or to_dask_array(lengths=True) first")
    if X.dtype.kind not in "iuf":
        raise TypeError(f"X must be a real numeric array (int or float), got dtype {X.dtype}")
    X = X.rechunk({1: -1})
    if y is None:
        return X
    y = match_targets(y if is_dask(y) else da.from_array(np.asarray(y)), X.shape[0])
    return X, y.rechunk((X.chunks[0],))


def _offsets(chunks) -> list[int]:
    return list(np.cumsum((0,) + tuple(chunks))[:-1])


def _compute(obj, progress: bool):
    """Compute on the active scheduler, with a progress bar when asked."""
    import dask

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar():
                return dask.compute(obj)[0]
        return dask.compute(obj)[0]
    futures = client.compute(obj)  # one future, or a list of them for a list
    if progress:
        from distributed import progress as show

        show(futures)
    return client.gather(futures)


def subsample_rows(X: Any, y: Any, size: int, seed: int) -> tuple[Any, Any]:
    """At most ``size`` rows of (X, y), drawn without replacement from ``seed`` and kept in order,
    as NumPy arrays, for memory and Dask arrays alike: X and y themselves when an in-memory X has no
    more rows, gathered block by block (:func:`take_rows`) from a Dask one."""
    n = X.shape[0]
    if n > size:
        index = np.sort(np.random.default_rng(seed).choice(n, int(size), replace=False))
        return take_rows(X, y, index) if is_dask(X) else (X[index], y[index])
    return take_rows(X, y, np.arange(n)) if is_dask(X) else (X, y)


def take_rows(X: Any, y: Any, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``index`` (sorted) of Dask ``X``, ``y`` as NumPy arrays, gathered block by block."""
    import dask

    starts = _offsets(X.chunks[0])
    parts = []
    for k, (xb, yb) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed().ravel())):
        lo, hi = starts[k], starts[k] + X.chunks[0][k]
        local = index[(index >= lo) & (index < hi)] - lo
        if local.size:
            parts.append(dask.delayed(_rows)(xb, yb, local, k, lo))
    out = _compute(parts, progress=False)
    return np.concatenate([p[0] for p in out]), np.concatenate([p[1] for p in out])


def _block_data(Xb, yb, k: int, start: int):
    try:
        return check_data(Xb, yb)
    except (ValueError, TypeError) as err:
        raise type(err)(f"block {k} (rows {start}..{start + len(Xb) - 1}): {err}") from None


def _rows(Xb, yb, local, k, start):
    Xb, yb = _block_data(Xb, yb, k, start)
    return Xb[local], yb[local]


def _block_stats(stats_fn: Callable, Xb, yb, k: int, start: int):
    from .threads import thread_limit

    Xb, yb = _block_data(Xb, yb, k, start)
    with thread_limit(1):  # Dask runs the blocks in parallel
        try:
            return stats_fn(Xb, yb)
        except ValueError as err:
            raise ValueError(f"block {k} (rows {start}..{start + len(Xb) - 1}): {err}") from None


def _add_tree(a, b):
    """The sum of two results of the same structure: tuples, lists and dicts of arrays and numbers."""
    if isinstance(a, dict):
        return {k: _add_tree(a[k], b[k]) for k in a}
    if isinstance(a, (tuple, list)):
        return type(a)(_add_tree(x, z) for x, z in zip(a, b))
    return a + b


def _tree_sum(fn: Callable, X: Any, y: Any, add: Callable, progress: bool | None):
    import dask

    X, y = prepare(X, y)
    parts = [dask.delayed(_block_stats)(fn, xb, yb, k, s)
             for k, (xb, yb, s) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed().ravel(),
                                                  _offsets(X.chunks[0])))]
    while len(parts) > 1:  # pairwise: a tree of depth log2(blocks)
        parts = [dask.delayed(add)(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return _compute(parts[0], progress=X.shape[0] > 1_000_000 if progress is None else progress)


def block_sum(fn: Callable, X: Any, y: Any, progress: bool | None = None):
    """``fn(X_block, y_block)`` on every block of Dask ``X``, ``y`` (single-threaded, bad blocks
    named), summed pairwise on the active scheduler: for results of any structure of arrays and
    numbers (tuples, lists, dicts), such as a bound's gradient sums over rows."""
    return _tree_sum(fn, X, y, _add_tree, progress)


def _add(a, b):
    return a + b  # Statistics add themselves (rows of disjoint blocks)


def block_statistics(stats_fn: Callable, X: Any, y: Any, progress: bool | None = None):
    """``stats_fn(X_block, y_block)`` -> :class:`~spherelab.bounds.Statistics` on every block,
    summed pairwise (a tree of depth log2(blocks)) on the active scheduler."""
    return _tree_sum(stats_fn, X, y, _add, progress)


def without_data(model: Any) -> Any:
    """A shallow copy of ``model`` without its training data (``_X``, ``_y``): what a Dask task
    needs of it (the posterior, the parameters), so that no task carries the rows."""
    light = copy.copy(model)
    for name in ("_X", "_y", "_device_rows"):  # the last: a fit's rows on its device
        if name in light.__dict__:
            light.__dict__[name] = None
    return light


def predict_blocks(func: Callable, model: Any, X: Any, *args, **kwargs):
    """``func(model, X_block)`` -> (mean, var) mapped over Dask ``X``'s blocks: two lazy Dask
    arrays ``(N,)`` (computed together when computed together)."""
    X = prepare(X)
    light = without_data(model)

    func(light, np.empty((0, X.shape[1])), *args, **kwargs)  # a wrong column count fails now, not at compute
    starts = _offsets(X.chunks[0])

    def block(Xb, block_info=None):
        k = block_info[0]["chunk-location"][0] if block_info else 0
        try:
            mean, var = func(light, Xb, *args, **kwargs)
        except (ValueError, TypeError) as err:
            raise type(err)(f"block {k} (rows {starts[k]}..{starts[k] + len(Xb) - 1}): {err}") from None
        return np.stack([np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)], axis=1)

    out = X.map_blocks(block, chunks=(X.chunks[0], (2,)), dtype=np.float64, meta=np.empty((0, 2)))
    return out[:, 0], out[:, 1]


def lazy_rows(func: Callable) -> Callable:
    """Decorator for ``predict_f``/``predict_y``: a Dask ``X`` gives Dask outputs, lazily."""

    @functools.wraps(func)
    def wrapper(self, X, *args, **kwargs):
        if is_dask(X):
            return predict_blocks(func, self, X, *args, **kwargs)
        return func(self, X, *args, **kwargs)

    return wrapper
