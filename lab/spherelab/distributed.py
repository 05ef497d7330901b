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

Models reach both kinds of array through one adapter, :func:`rows`: :class:`InMemory` and
:class:`InBlocks` answer the same questions (check these rows, gather or subsample some of them,
are they at hand), and a model's pass over them is looked up by the adapter's kind in a table
(a :class:`BlockwisePass` runs the in-memory pass on every block), so no model tests which kind
of array it was given.

Dask is optional (``pip install spherelab[dask]``); nothing here is imported without it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any, Callable

import numpy as np

from ._listing import own_names
from ._validation import check_data, match_targets

__all__ = ["is_dask", "prepare", "subsample_rows", "take_rows", "block_statistics", "block_sum", "without_data",
           "predict_blocks", "lazy_rows", "rows", "InMemory", "InBlocks",
           "BlockwisePass"]
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
            parts.append(dask.delayed(_rows)(xb, yb, local, k, lo, (hi - lo, X.shape[1])))
    out = _compute(parts, progress=False)
    return np.concatenate([p[0] for p in out]), np.concatenate([p[1] for p in out])


def _declared(Xb, k: int, start: int, shape: tuple[int, int], name: str = "X") -> None:
    """A computed block against the shape its array declared for it: a block built by hand (for
    example ``da.from_delayed`` with a wrong ``shape=``) would otherwise misplace or drop rows."""
    got, shape = tuple(np.shape(Xb)), tuple(int(v) for v in shape)
    if got[:1] != shape[:1] or (len(shape) > 1 and got[1:] != shape[1:]):
        raise ValueError(f"block {k} of {name} (rows {start}..{start + shape[0] - 1}) has shape {got}, but "
                         f"{name}'s chunks declare {shape}: rebuild the Dask array with the blocks' true "
                         f"shapes (da.from_delayed(..., shape=) must match what the task returns)")


def _block_data(Xb, yb, k: int, start: int, shape: tuple[int, int]):
    _declared(Xb, k, start, shape)
    _declared(yb, k, start, shape[:1] if np.ndim(yb) == 1 else (shape[0], 1), "y")
    try:
        return check_data(Xb, yb)
    except (ValueError, TypeError) as err:
        raise type(err)(f"block {k} (rows {start}..{start + len(Xb) - 1}): {err}") from None


def _rows(Xb, yb, local, k, start, shape):
    Xb, yb = _block_data(Xb, yb, k, start, shape)
    return Xb[local], yb[local]


def _block_stats(stats_fn: Callable, Xb, yb, k: int, start: int, shape: tuple[int, int]):
    from .threads import thread_limit

    Xb, yb = _block_data(Xb, yb, k, start, shape)
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
    parts = [dask.delayed(_block_stats)(fn, xb, yb, k, s, (n, X.shape[1]))
             for k, (xb, yb, s, n) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed().ravel(),
                                                     _offsets(X.chunks[0]), X.chunks[0]))]
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
    """A shallow copy of ``model`` without its training data and what a fit holds of them (its
    ``data`` and ``held`` fields, :class:`~spherelab._state.Fields`): what a Dask task needs of it
    (the posterior, the parameters), so that no task carries the rows."""
    light = copy.copy(model)
    for entry in model.fields.entries("data", "held"):
        name = model.fields.attribute(entry)
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
        if block_info:  # Dask's test call (no block_info) passes an empty block
            _declared(Xb, k, starts[k], (X.chunks[0][k], X.shape[1]))
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


def rows(X: Any, y: Any = None) -> "InMemory":
    """The adapter models read training rows through: :class:`InBlocks` for a Dask ``X``,
    :class:`InMemory` for anything else (checked when :meth:`InMemory.checked` is called)."""
    return InBlocks(X, y) if is_dask(X) else InMemory(X, y)


@dataclasses.dataclass(frozen=True)
class InMemory:
    """Rows in memory: at hand, read at random, checked at once."""

    X: Any
    y: Any = None

    def checked(self, likelihood: Any = None) -> tuple[Any, Any]:
        """(X, y) validated (values, shapes, dtype; the targets as ``likelihood`` reads them)."""
        if likelihood is None:
            return check_data(self.X, self.y)
        X, y = check_data(self.X, likelihood.prepare_targets(self.y))
        likelihood.check_targets(y)
        return X, y

    def require(self, why: str | None) -> "InMemory":
        """These rows; blocks raise ``TypeError(why)`` unless ``why`` is None (what a method
        cannot do with rows it cannot read at random)."""
        return self

    def at_hand(self) -> tuple[Any, Any] | None:
        """(X, y) as given when they are in memory; None for blocks (their values are read, and
        checked, only when a pass computes them)."""
        return self.X, self.y

    def gather(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` of X, in that order, as a new NumPy array."""
        return self.X[index].copy()

    def subsample(self, size: int, seed: int) -> tuple[Any, Any]:
        """:func:`subsample_rows`."""
        return subsample_rows(self.X, self.y, size, seed)


class InBlocks(InMemory):
    """Rows of a Dask array: checked for shape now and for values block by block; read through
    passes over the blocks (:class:`BlockwisePass`)."""

    def checked(self, likelihood: Any = None) -> tuple[Any, Any]:
        return prepare(self.X, self.y)

    def require(self, why: str | None) -> "InMemory":
        if why is not None:
            raise TypeError(why)
        return self

    def at_hand(self) -> None:
        return None

    def gather(self, index: np.ndarray) -> np.ndarray:
        if not len(index):
            return np.zeros((0, self.X.shape[1]), dtype=self.X.dtype)
        order = np.argsort(index)  # gathered block by block in sorted order, then put back in index's
        X = take_rows(self.X, self.X[:, 0], index[order])[0]
        out = np.empty_like(X)
        out[order] = X
        return out


class BlockwisePass:
    """A pass over Dask blocks: :meth:`summed` runs a method of ``make(owner, X_block, y_block)``
    on every block (the owner without its training data, so no task carries the rows) and returns
    the sum of the blocks' results (:func:`block_sum`: Statistics, or tuples, lists and dicts of
    arrays). Subclasses name the methods they sum."""

    def __init__(self, owner: Any, make: Callable, X: Any, y: Any) -> None:
        self._owner, self._make = owner, make
        self._X, self._y = prepare(X, y)

    def summed(self, method: str, *args) -> Any:
        """``make(owner, X_block, y_block).<method>(*args)`` summed over the blocks."""
        light = without_data(self._owner)  # at the owner's parameters of this call
        return block_sum(functools.partial(_on_block, self._make, light, method, args), self._X, self._y)


def _on_block(make: Callable, owner: Any, name: str, args: tuple, Xb, yb):
    # module level, so that a task pickles the pass's maker and the light owner, not the pass
    return getattr(make(owner, Xb, yb), name)(*args)
