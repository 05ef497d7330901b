r"""The saved state of spherelab's objects: what a class writes and how it is rebuilt from a file.

Every class a model file may name derives from :class:`Saveable` and is listed in
:data:`spherelab.persistence.REGISTRY`. It declares its state in :meth:`Saveable._save_state` —
the arguments of its constructor and, for a fitted model, the posterior or statistics arrays — and
is rebuilt by :meth:`Saveable._load_state` through its constructor and validated setters, so every
derived object (harmonic plans, spectra, caches, Cholesky factors) is computed again and nothing
derived is read from the file. :class:`LoadedState` hands the decoded entries to
``_load_state`` through typed getters that raise :class:`FormatError` naming the file, the entry
and what was expected; an entry a class does not read is an error too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .concurrency import Locked

__all__ = ["FormatError", "Saveable", "LoadedState", "PendingArray"]


class FormatError(ValueError):
    """A file that is not a valid spherelab model file; the message names the file, the entry and
    what was expected there."""


class Saveable(Locked):
    """Base of the classes a model file may hold (:mod:`spherelab.persistence`); as a
    :class:`~spherelab.concurrency.Locked` object, copies and pickles read it under its lock."""

    #: entries of :meth:`_save_state` holding training data: written only with ``include_data``
    _data_entries: tuple[str, ...] = ()

    def _save_state(self) -> dict[str, Any]:
        """The entries that rebuild this object: scalars, strings, ``None``, NumPy arrays, other
        saveable objects, and lists, tuples and dicts of those."""
        raise NotImplementedError(f"{type(self).__name__} does not define its saved state")  # pragma: no cover

    @classmethod
    def _load_state(cls, state: "LoadedState"):
        """Rebuild from ``state``; the default passes every entry to the constructor, which
        validates each argument."""
        return cls(**state.kwargs())


_MISSING = object()


class PendingArray:
    """An array entry of a model file known by its header (``shape``, ``dtype``): its data are read
    by :meth:`read` only once a class has checked the shape it expects."""

    __slots__ = ("shape", "dtype", "_read", "_value")

    def __init__(self, shape: tuple, dtype: np.dtype, read) -> None:
        self.shape, self.dtype, self._read, self._value = shape, dtype, read, None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def read(self) -> np.ndarray:
        if self._value is None:
            self._value = self._read()
        return self._value


def _materialise(v: Any) -> Any:
    """``v`` with every pending array read (lists, tuples, dicts walked)."""
    if isinstance(v, PendingArray):
        return v.read()
    if isinstance(v, list):
        return [_materialise(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_materialise(x) for x in v)
    if isinstance(v, dict):
        return {k: _materialise(x) for k, x in v.items()}
    return v


class LoadedState:
    """The decoded entries of one saved object, read through typed getters (each entry once);
    ``budget`` (a :class:`spherelab.loading.LoadBudget`) bounds the work of rebuilding it."""

    def __init__(self, entries: dict[str, Any], where: str, budget: Any = None) -> None:
        self._entries, self._where, self._read = entries, where, set()
        self._budget = budget

    def check_work(self, flops: float, what: str) -> None:
        """Refuse, before it starts, a computation of about ``flops`` that a file of this size may
        not cost (``what`` names it)."""
        if self._budget is not None:
            self._budget.check_work(flops, what)

    def fail(self, name: str, expected: str, got: Any = _MISSING) -> FormatError:
        got_text = "" if got is _MISSING else f", got {_describe(got)}"
        return FormatError(f"{self._where}.{name}: expected {expected}{got_text}")

    def _get(self, name: str) -> Any:
        if name not in self._entries:
            raise FormatError(f"{self._where}: the entry {name!r} is missing")
        self._read.add(name)
        return self._entries[name]

    def has(self, name: str) -> bool:
        return name in self._entries

    def value(self, name: str) -> Any:
        """The entry as decoded, arrays read (its consumer validates it)."""
        return _materialise(self._get(name))

    def is_null(self, name: str) -> bool:
        """Whether the entry is null (an array entry is not read)."""
        return self._get(name) is None

    def kwargs(self) -> dict[str, Any]:
        """Every entry, for a constructor that validates its arguments."""
        return {name: _materialise(self._get(name)) for name in list(self._entries)}

    def int(self, name: str, minimum: int | None = None, maximum: int | None = None, optional: bool = False):
        v = self._get(name)
        if v is None and optional:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or (minimum is not None and v < minimum) \
                or (maximum is not None and v > maximum):
            bounds = f" in [{minimum}, {maximum}]" if maximum is not None else (
                f" >= {minimum}" if minimum is not None else "")
            raise self.fail(name, f"an integer{bounds}{' or null' if optional else ''}", v)
        return v

    def float(self, name: str, minimum: float | None = None) -> float:
        v = self._get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) \
                or (minimum is not None and v < minimum):
            raise self.fail(name, "a finite number" + (f" >= {minimum}" if minimum is not None else ""), v)
        return float(v)

    def bool(self, name: str) -> bool:
        v = self._get(name)
        if not isinstance(v, bool):
            raise self.fail(name, "true or false", v)
        return v

    def str(self, name: str, choices: tuple[str, ...]) -> str:
        v = self._get(name)
        if v not in choices:
            raise self.fail(name, "one of " + ", ".join(repr(c) for c in choices), v)
        return v

    def array(self, name: str, shape: tuple | None = None, integer: bool = False, optional: bool = False):
        """A real array: float64 and finite, or integer (``integer``); ``shape`` entries of None
        match any length."""
        v = self._get(name)
        if v is None and optional:
            return None
        v = _checked(v, shape, integer, lambda expected: self.fail(name, expected, v))
        return np.array(v, dtype=np.int64 if integer else np.float64)

    def arrays(self, name: str, shapes: list[tuple]) -> list[np.ndarray]:
        """A list of float arrays, one per shape."""
        v = self._get(name)
        if not isinstance(v, list) or len(v) != len(shapes):
            raise self.fail(name, f"a list of {len(shapes)} arrays", v)
        out = []
        for i, (a, shape) in enumerate(zip(v, shapes)):
            a = _checked(a, shape, False, lambda expected, i=i, a=a: self.fail(f"{name}[{i}]", expected, a))
            out.append(np.array(a, dtype=np.float64))
        return out

    def obj(self, name: str, kind: type | tuple[type, ...], optional: bool = False):
        v = self._get(name)
        if v is None and optional:
            return None
        if not isinstance(v, kind):
            names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise self.fail(name, f"a saved {names}{' or null' if optional else ''}", v)
        return v

    def report(self, name: str) -> dict:
        """A fit report: JSON values only (numbers, strings, lists, dicts), nothing built."""
        v = self._get(name)
        if not isinstance(v, dict) or not _plain(v, 0):
            raise self.fail(name, "a dict of plain values (a fit report)", v)
        return v

    def done(self) -> None:
        extra = sorted(set(self._entries) - self._read)
        if extra:
            raise FormatError(f"{self._where}: unexpected entries {extra} (not part of this class's saved state)")


def _checked(v: Any, shape: tuple | None, integer: bool, fail) -> np.ndarray:
    """``v`` read and checked; a pending array's dtype and shape are checked on its header first."""
    if isinstance(v, PendingArray):
        _check_kind_and_shape(v, shape, integer, fail)
        v = v.read()
    check_array(v, shape, integer, fail)
    return v


def _check_kind_and_shape(v: Any, shape: tuple | None, integer: bool, fail) -> None:
    if integer:
        if v.dtype.kind not in "iu":
            raise fail("an integer array")
    elif v.dtype.kind not in "fiu":
        raise fail("a real, finite array")
    if shape is not None and (v.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, v.shape))):
        wanted = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
        raise fail(f"an array of shape {wanted}")


def check_array(v: Any, shape: tuple | None, integer: bool, fail) -> None:
    if not isinstance(v, np.ndarray):
        raise fail("an array")
    _check_kind_and_shape(v, shape, integer, fail)
    if not integer and not np.all(np.isfinite(v)):
        raise fail("a real, finite array")


def _plain(v: Any, depth: int) -> bool:
    if depth > 20:
        return False
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(x, depth + 1) for k, x in v.items())
    return False


def _describe(v: Any) -> str:
    if isinstance(v, (np.ndarray, PendingArray)):
        return f"an array of dtype {v.dtype} and shape {v.shape}"
    if isinstance(v, (bool, int, float, str)) or v is None:
        text = repr(v)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(v).__name__}"
