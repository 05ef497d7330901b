r"""The reading side of model files (:func:`spherelab.load`): the archive's entries on a budget and the
decoder that rebuilds objects of the registry from them.

**What a load may cost is bounded before it is spent** (:class:`LoadBudget`), by the file's size:

* bytes: the arrays a load inflates, together, at most :math:`\max(256\,\mathrm{MiB},\ 64 B)` for a
  file of :math:`B` bytes, and never more than :func:`spherelab._validation.memory_budget`
  (``SPHERELAB_MAX_MEMORY``). Model files of float data compress by 1–10×; only structured zeros (an
  identity factor) compress further, which the 256 MiB cover. The archive's directory is checked
  against it before anything is read, every array's header (dtype, shape) before its data, each
  class's expected shape before the array is inflated, and an array entry may be used once only
  (a file cannot name one small entry a thousand times);
* the metadata: the JSON document is scanned before it is decoded — its nesting depth, its count of
  values (at most :data:`_MAX_VALUES`) and the memory its Python objects would take (about
  :data:`_BYTES_PER_VALUE` bytes a value, spent from the same budget as the arrays) — so a small
  file of many tiny values cannot cost a gigabyte of objects;
* work: a refactorisation a load performs (an exact GP's Cholesky of its :math:`N` rows,
  :math:`N^3/3` flops) at most :math:`\max(2\cdot10^{10},\ 1000\,B^2)` flops: a file of 15 000
  identical rows (2 KB) cannot buy a 15 000² factorisation, while genuine data, whose rows carry
  bytes of their own, stay far inside (15 000 distinct rows take about 1 MB).
"""

from __future__ import annotations

import importlib
import math
import re
import zipfile
import zlib
from typing import Any

import numpy as np

from ._state import FormatError, LoadedState, PendingArray, Saveable

__all__ = ["LoadBudget", "Archive", "Decoder", "registered", "check_json"]

_SCALARS = (bool, int, float, str, type(None))
_MAX_ENTRIES = 100_000
_MAX_DEPTH = 64
_MIN_BYTES, _BYTES_PER_BYTE = 256 << 20, 64
_MIN_FLOPS, _FLOPS_PER_BYTE2 = 2e10, 1000.0
#: the most values (numbers, strings, lists, objects) a model file's JSON may hold
_MAX_VALUES = 1_000_000
#: a decoded JSON value's memory at most: the object and its slot in its container (a float: 24 +
#: 8; an empty list 56 + 8; a one-entry dict's share of its table included)
_BYTES_PER_VALUE = 240
#: JSON nesting: every level of the format (an object's state, a list) takes two
_MAX_JSON_DEPTH = 2 * _MAX_DEPTH + 4
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(rb"[^\[\]{}]")
_PAIRS = re.compile(rb"\[\]|\{\}")


def check_json(raw: bytes, budget: "LoadBudget", what: str) -> None:
    """Refuse, before decoding, a JSON document ``raw`` whose decoding would cost more than a load
    may: more than :data:`_MAX_VALUES` values, nested deeper than :data:`_MAX_JSON_DEPTH`, or
    objects beyond the load's budget of bytes (spent here). Strings are set aside first, so that
    brackets and commas inside them do not count."""
    bare = _STRINGS.sub(b'""', raw)
    values = bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1
    if values > _MAX_VALUES:
        raise FormatError(f"{budget.name}: {what} holds about {values:,} values (at most {_MAX_VALUES:,}): "
                          "not a model file's metadata")
    budget.spend_bytes(_BYTES_PER_VALUE * values + 2 * (len(raw) - len(bare)), f"decoding {what}")
    brackets = _NOT_BRACKETS.sub(b"", bare)
    for _ in range(_MAX_JSON_DEPTH):  # each pass takes away the innermost level
        inner = _PAIRS.sub(b"", brackets)
        if not inner or inner == brackets:  # all matched, or unmatched ones left (the decoder says so)
            return
        brackets = inner
    raise FormatError(f"{budget.name}: {what} is nested deeper than {_MAX_JSON_DEPTH} levels")


class LoadBudget:
    """What one load may spend: ``bytes`` inflated and ``flops`` of refactorisation (module
    docstring), derived from the file's size ``file_bytes``."""

    def __init__(self, file_bytes: int, name: str) -> None:
        from ._validation import memory_budget

        self.name, self.file_bytes = name, int(file_bytes)
        self.bytes = min(memory_budget(), max(_MIN_BYTES, _BYTES_PER_BYTE * self.file_bytes))
        self.flops = max(_MIN_FLOPS, _FLOPS_PER_BYTE2 * float(self.file_bytes) ** 2)
        self.bytes_spent = 0

    def spend_bytes(self, nbytes: int, what: str) -> None:
        total = (self.bytes_spent + nbytes) / 2**20
        if self.bytes_spent + nbytes > self.bytes:
            raise FormatError(f"{self.name}: {what} would inflate the load to {total:,.1f} MiB, more than a file "
                              f"of {self.file_bytes:,} bytes may cost "
                              f"({self.bytes / 2**20:,.1f} MiB; SPHERELAB_MAX_MEMORY caps it too)")
        self.bytes_spent += nbytes

    def check_work(self, flops: float, what: str) -> None:
        """Refuse, before it starts, a computation of ``flops`` beyond the budget."""
        if flops > self.flops:
            raise FormatError(f"{self.name}: rebuilding needs {what} (about {flops:.3g} flops), more than a file of "
                              f"{self.file_bytes:,} bytes may cost ({self.flops:.3g}): its rows repeat far more than "
                              "data do; fit the model on the data instead of loading it")


def registered(name: Any, registry: dict[str, str]) -> type | None:
    """The class ``name`` of ``registry`` (name -> module), or None: looked up in its module's own
    namespace, no attribute traversal, and a :class:`~spherelab._state.Saveable` only."""
    module = registry.get(name) if isinstance(name, str) else None
    if module is None:
        return None
    cls = vars(importlib.import_module(module)).get(name)
    return cls if isinstance(cls, type) and issubclass(cls, Saveable) else None


class Archive:
    """The model file's entries, each used once, its header read before its data."""

    def __init__(self, zf: zipfile.ZipFile, name: str, budget: LoadBudget) -> None:
        self.zf, self.name, self.budget = zf, name, budget
        infos = zf.infolist()
        if len(infos) > _MAX_ENTRIES:
            raise FormatError(f"{name}: {len(infos)} entries (at most {_MAX_ENTRIES})")
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if not info.filename.endswith(".npy") or info.filename[:-4] in self.infos:
                raise FormatError(f"{name}: unexpected entry {info.filename!r} (unique NAME.npy entries only)")
            self.infos[info.filename[:-4]] = info
        total = sum(info.file_size for info in infos)
        if total > budget.bytes:
            raise FormatError(f"{name}: its entries declare {total / 2**20:,.1f} MiB uncompressed, more than a file "
                              f"of {budget.file_bytes:,} bytes may cost ({budget.bytes / 2**20:,.1f} MiB; "
                              "SPHERELAB_MAX_MEMORY caps it too)")
        self.used: set[str] = set()

    def _info(self, key: Any) -> zipfile.ZipInfo:
        info = self.infos.get(key) if isinstance(key, str) else None
        if info is None:
            raise FormatError(f"{self.name}: the array entry {key!r} is missing")
        return info

    def _header(self, fp, where: str, info: zipfile.ZipInfo) -> tuple:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise FormatError(f"{where}: .npy version {version} (1.0 or 2.0 expected)")
        if dtype.kind not in "biufc" or dtype.hasobject:
            raise FormatError(f"{where}: dtype {dtype} (numeric arrays only)")
        if any(int(n) < 0 for n in shape):
            raise FormatError(f"{where}: a negative dimension in its shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > info.file_size:
            raise FormatError(f"{where}: its header declares {nbytes} bytes, the entry holds {info.file_size}")
        return shape, fortran, dtype, nbytes

    def _open(self, key: str, read_data: bool):
        info = self._info(key)
        where = f"{self.name}: entry {key!r}"
        try:
            with self.zf.open(info) as fp:
                shape, fortran, dtype, nbytes = self._header(fp, where, info)
                if not read_data:
                    return shape, dtype
                self.budget.spend_bytes(nbytes, f"entry {key!r}")
                data = fp.read(nbytes)
                if len(data) != nbytes or fp.read(1):
                    raise FormatError(f"{where}: {len(data)} bytes of data, {nbytes} declared")
        except FormatError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError,
                RuntimeError) as err:  # (RuntimeError: zipfile's word for an encrypted entry)
            raise FormatError(f"{where} is unreadable: {type(err).__name__}: {err}") from None
        return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()

    def read(self, key: str, limit: int | None = None) -> np.ndarray:
        """The array of entry ``key`` (at most ``limit`` bytes declared)."""
        info = self._info(key)
        if limit is not None and info.file_size > limit:
            raise FormatError(f"{self.name}: entry {key!r} declares {info.file_size} bytes (at most {limit})")
        return self._open(key, True)

    def pending(self, key: Any) -> PendingArray:
        """Entry ``key`` known by its header only (read when a class asks for it, after checking its
        shape); each entry may be named once."""
        self._info(key)
        if key in self.used:
            raise FormatError(f"{self.name}: the array entry {key!r} is used twice (each entry holds one value)")
        self.used.add(key)
        shape, dtype = self._open(key, False)
        return PendingArray(tuple(int(n) for n in shape), dtype, lambda: self._open(key, True))


class Decoder:
    """Values of the format (:mod:`spherelab.persistence`) into objects of ``registry``."""

    def __init__(self, archive: Archive, registry: dict[str, str]) -> None:
        self.archive, self.registry = archive, registry
        self.objects: dict[int, Any] = {}

    def fail(self, path: str, text: str) -> FormatError:
        return FormatError(f"{self.archive.name}: {path}: {text}")

    def root_class(self, value: Any, kind: type | tuple[type, ...]) -> type:
        """The class the root ``value`` builds, which must be a ``kind``: checked before anything is
        built."""
        cls = registered(value.get("__object__"), self.registry) if isinstance(value, dict) else None
        if cls is None and isinstance(value, dict) and "__object__" in value:
            raise self.fail("root", f"refusing to build {value['__object__']!r}: not a class a model file may hold "
                                    f"({', '.join(sorted(self.registry))})")
        if cls is None or not issubclass(cls, kind):
            what = value.get("__object__") if isinstance(value, dict) and "__object__" in value else value
            text = repr(what) if len(repr(what)) <= 60 else repr(what)[:57] + "..."
            kinds = kind if isinstance(kind, tuple) else (kind,)
            names = "model" if len(kinds) > 2 else " or ".join(k.__name__ for k in kinds)
            raise self.fail("root", f"expected a saved {names}, the file holds {text}"
                            + ("" if cls is None else f" (load(path, kind={cls.__name__}) reads one)"))
        return cls

    def decode(self, value: Any, path: str, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail(path, f"nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, _SCALARS):
            return value
        if not isinstance(value, dict) or len(value) not in (1, 3):
            raise self.fail(path, f"not a value of the format ({type(value).__name__})")
        if set(value) == {"__object__", "__id__", "state"}:
            return self.build(value, path, depth)
        tag, body = next(iter(value.items()))
        if tag == "__array__" and len(value) == 1:
            return self.archive.pending(body)
        if tag in ("__list__", "__tuple__") and len(value) == 1 and isinstance(body, list):
            items = [self.decode(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(body)]
            return items if tag == "__list__" else tuple(items)
        if tag == "__dict__" and len(value) == 1 and isinstance(body, list):
            out = {}
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise self.fail(path, "a dict entry that is not a [string, value] pair")
                out[pair[0]] = self.decode(pair[1], f"{path}[{pair[0]!r}]", depth + 1)
            return out
        if tag == "__ref__" and len(value) == 1:
            if not isinstance(body, int) or body not in self.objects:
                raise self.fail(path, f"a reference to object {body!r}, which is not (yet) read")
            return self.objects[body]
        raise self.fail(path, f"unknown entry {sorted(value)}")

    def build(self, value: dict, path: str, depth: int) -> Any:
        name, n, state = value["__object__"], value["__id__"], value["state"]
        cls = registered(name, self.registry)
        if cls is None:
            raise self.fail(path, f"refusing to build {name!r}: not a class a model file may hold "
                                  f"({', '.join(sorted(self.registry))})")
        if not isinstance(n, int) or isinstance(n, bool) or n in self.objects:
            raise self.fail(path, f"object number {n!r} is not a new integer")
        if not isinstance(state, dict):
            raise self.fail(path, "the object's state is not a JSON object")
        where = f"{self.archive.name}: {path}"
        entries = {k: self.decode(v, f"{path}.{k}", depth + 1) for k, v in state.items()}
        loaded = LoadedState(entries, where, self.archive.budget)
        try:
            obj = cls._load_state(loaded)
        except FormatError:
            raise
        except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError, RuntimeError,
                np.linalg.LinAlgError, MemoryError) as err:
            raise FormatError(f"{where}: cannot rebuild a {name}: {type(err).__name__}: {err}") from None
        loaded.done()
        self.objects[n] = obj
        return obj
