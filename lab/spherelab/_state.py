r"""The saved state of spherelab's objects: what a class writes and how it is rebuilt from a file.

Every class a model file may name derives from :class:`Saveable` and is listed in
:data:`spherelab.persistence.REGISTRY`. A model declares its fields once, in a :class:`Fields`
table (each field's file entry, the attribute holding it, and its role); what it saves, which
entries are training data, what its posterior cache depends on and which attributes it may hold
at all follow from that table. Smaller classes list their state in :meth:`Saveable._save_state`:
the arguments of their constructor. Every class is rebuilt by :meth:`Saveable._load_state`
through its constructor and validated setters, so every derived object (harmonic plans, spectra,
caches, Cholesky factors) is computed again and nothing derived is read from the file.
:class:`LoadedState` hands the decoded entries to ``_load_state`` through typed getters that raise
:class:`FormatError` naming the file, the entry and what was expected; an entry a class does not read is an error too.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .concurrency import Locked, publish

__all__ = ["FormatError", "Fields", "Hyper", "Saveable", "LoadedState", "PendingArray"]


class FormatError(ValueError):
    """A file that is not a valid spherelab model file; the message names the file, the entry and
    what was expected there."""


class Hyper:
    """A validated hyper-parameter: every assignment — in the constructor, by attribute after
    it, by ``set_params`` or by an optimiser — goes through ``check(value, name)``, the one
    definition of what is valid for it.

    Example: ``variance = Hyper(check_positive)`` in a class body; ``obj.variance = -1`` then
    raises ``ValueError: variance must be a finite number > 0, got -1``."""

    def __init__(self, check, doc: str = "") -> None:
        self.check, self.__doc__ = check, doc

    def __set_name__(self, owner, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.slot]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, obj, value) -> None:
        publish(obj, self.slot, self.check(value, self.name))  # under the object's lock once built


class Fields:
    """One class's state, declared once: every field's role, its entry in a model file and the
    attribute that holds it (``"entry"``, or ``"entry=attribute"`` where the attribute is private).

    Roles: ``config`` (the constructor's arguments), ``fitted`` (what a fit or the user sets:
    parameters, statistics), ``report`` (the fit report), ``data`` (training data, saved only with
    ``include_data``) are saved; ``held`` (what a fit holds of the training rows), ``transient``
    (the device's operations, optimiser results, objects the constructor derives) and ``cache``
    (values computed from other fields, each with the entries it depends on) are not. ``data`` and
    ``held`` fields are left out of the copies of a model sent to workers. A subclass extends its
    base's table with ``+``; an entry it declares again takes the new role.

    Examples
    --------
    >>> f = Fields(config=("kernel",), fitted=("q_mu",), data=("X=_X",), cache={"_post": ("kernel", "q_mu")})
    >>> f.entries("config", "fitted"), f.attribute("X"), f.depends("_post")
    (('kernel', 'q_mu'), '_X', ('kernel', 'q_mu'))
    """

    ROLES = ("config", "fitted", "report", "data", "held", "transient", "cache")
    SAVED = ("config", "fitted", "report", "data")

    def __init__(self, **roles: Any) -> None:
        self._role: dict[str, str] = {}
        self._attr: dict[str, str] = {}
        self._deps: dict[str, tuple[str, ...]] = {}
        for role, names in roles.items():
            if role not in self.ROLES:
                raise TypeError(f"Fields roles are {self.ROLES}, got {role!r}")
            for spec in names:
                entry, _, attr = spec.partition("=")
                self._role[entry], self._attr[entry] = role, attr or entry
                if role == "cache":
                    self._deps[entry] = tuple(names[spec])

    def __add__(self, other: "Fields") -> "Fields":
        out = Fields()
        for table in (self, other):
            for entry, role in table._role.items():
                out._role.pop(entry, None)  # a new role moves the entry to the end of its role
                out._role[entry], out._attr[entry] = role, table._attr[entry]
            out._deps.update(table._deps)
        out._deps = {e: d for e, d in out._deps.items() if out._role[e] == "cache"}  # an entry given another role
        return out

    def entries(self, *roles: str) -> tuple[str, ...]:
        """The entries of ``roles``, in declaration order."""
        return tuple(e for role in roles for e, r in self._role.items() if r == role)

    def attribute(self, entry: str) -> str:
        return self._attr[entry]

    def depends(self, cache: str) -> tuple[str, ...]:
        """The entries a cache is computed from."""
        return self._deps[cache]

    def attributes(self) -> frozenset:
        """Every attribute an instance may hold (its lock besides)."""
        return frozenset(self._attr.values()) | {"_parameter_lock"}

    def read(self, obj: Any, entry: str) -> Any:
        return getattr(obj, self._attr[entry], None)

    def write(self, obj: Any, entry: str, value: Any) -> None:
        """Set a field by its entry name (a loader's way to the private attributes)."""
        setattr(obj, self._attr[entry], value)

    def saved(self, obj: Any) -> dict[str, Any]:
        """The entries a model file holds for ``obj``."""
        return {e: self.read(obj, e) for e in self.entries(*self.SAVED)}

    def fingerprint(self, obj: Any, cache: str) -> tuple:
        """What cache ``cache`` of ``obj`` was computed from, comparable by ``==``: arrays by their
        bytes, parts by their saved state."""
        return tuple(_fingerprint(self.read(obj, e), 0) for e in self._deps[cache])

    def cached(self, obj: Any, cache: str, compute: Callable[[], Any]) -> Any:
        """The value of cache ``cache`` of ``obj``: held beside the :meth:`fingerprint` of the
        fields it depends on, and ``compute()`` again whenever one of them has changed (replaced
        or written in place)."""
        key = self.fingerprint(obj, cache)
        held = getattr(obj, self._attr[cache], None)
        if held is not None and held[0] == key:
            return held[1]
        value = compute()
        setattr(obj, self._attr[cache], (key, value))
        return value

    def undeclared(self, obj: Any) -> list[str]:
        """Attributes of ``obj`` that its class's table does not declare (none, for a sound table)."""
        return sorted(set(vars(obj)) - self.attributes())


def _fingerprint(v: Any, depth: int) -> Any:
    if isinstance(v, np.ndarray):
        return (v.shape, v.dtype.str, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_fingerprint(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return tuple((k, _fingerprint(x, depth + 1)) for k, x in sorted(v.items()))
    if isinstance(v, Saveable) and depth < 8:
        return type(v).__name__, _fingerprint(v._save_state(), depth + 1)
    return v


class Saveable(Locked):
    """Base of the classes a model file may hold (:mod:`spherelab.persistence`); as a
    :class:`~spherelab.concurrency.Locked` object, copies and pickles read it under its lock."""

    #: the declared state (:class:`Fields`), where the class has one
    fields: Fields | None = None

    @classmethod
    def data_entries(cls) -> tuple[str, ...]:
        """Entries of :meth:`_save_state` holding training data: written only with ``include_data``."""
        return () if cls.fields is None else cls.fields.entries("data")

    def _save_state(self) -> dict[str, Any]:
        """The entries that rebuild this object: scalars, strings, ``None``, NumPy arrays, other
        saveable objects, and lists, tuples and dicts of those (default: the saved fields)."""
        if self.fields is None:  # pragma: no cover - every saveable class declares one or the other
            raise NotImplementedError(f"{type(self).__name__} does not define its saved state")
        return self.fields.saved(self)

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
