r"""Saving and loading models: one ``.npz`` file, arrays as ``.npy`` entries and everything else
as JSON — no pickle, and loading builds only the classes of :data:`REGISTRY`.

Format (``FORMAT_VERSION`` 2): the archive's entry ``__meta__`` is a JSON document

.. code-block:: text

    {"format": "spherelab-model", "version": 2, "spherelab": "<package version>",
     "data": <bool>, "root": <value>}

where a value is a JSON scalar (``NaN`` and ``Infinity`` allowed), ``{"__array__": key}`` (the archive's entry ``key``),
``{"__list__" | "__tuple__": [...]}``, ``{"__dict__": [[string, value], ...]}``,
``{"__ref__": n}`` (object ``n`` again: a kernel shared by a model and its features stays
shared) or ``{"__object__": name, "__id__": n, "state": {entry: value}}`` with ``name`` a key of
:data:`REGISTRY`. Each class writes the state that rebuilds it (:mod:`spherelab._state`: its
constructor's arguments and, fitted, its posterior or statistics) and is rebuilt through its
constructor and validated setters, so derived objects (harmonic plans, spectra, factors, caches)
are computed again, never read. Training data are written only with ``include_data=True``
(models whose posterior is the data, like :class:`~spherelab.models.ExactGP`, always keep them).

Loading checks, before it allocates anything, the archive's directory (entry names, the declared
sizes against :func:`spherelab._validation.memory_budget`), each array's header (numeric dtype,
a size the entry holds), then every entry a class reads (type, dtype, shape, finiteness); any
malformed file raises :class:`FormatError` naming the file, the entry and what was expected.
Saving writes a temporary file beside the target, flushes and syncs it, then renames it over the
target: an interrupted save leaves the old file as it was.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import tempfile
import zipfile
import zlib
from typing import Any

import numpy as np

from ._state import FormatError, LoadedState, Saveable

__all__ = ["save", "load", "FORMAT_VERSION", "FormatError", "REGISTRY"]

FORMAT = "spherelab-model"
FORMAT_VERSION = 2
_SCALARS = (bool, int, float, str, type(None))
_MAX_META = 64 << 20  # bytes of JSON
_MAX_ENTRIES = 100_000
_MAX_DEPTH = 64

#: every class a model file may name, by the name the file uses -> its module
REGISTRY: dict[str, str] = {
    **dict.fromkeys(["VISH"], "spherelab.models.vish"),
    **dict.fromkeys(["OrthogonalSVGP", "ActivatedSVGP"], "spherelab.models.decoupled"),
    **dict.fromkeys(["HarmonicSVGP"], "spherelab.models.hvgp"),
    **dict.fromkeys(["ExactGP"], "spherelab.models.exact"),
    **dict.fromkeys(["Matern"], "spherelab.kernels.matern"),
    **dict.fromkeys(["ArcCosine", "DeepArcCosine", "NTK"], "spherelab.kernels.arccos"),
    **dict.fromkeys(["IntrinsicMatern", "PolynomialDecay"], "spherelab.kernels.spectral"),
    **dict.fromkeys(["Truncated", "Parity"], "spherelab.kernels.wrapped"),
    **dict.fromkeys(["HarmonicFeatures"], "spherelab.features.harmonic"),
    **dict.fromkeys(["PhaseTruncatedHarmonics"], "spherelab.features.phases"),
    **dict.fromkeys(["ActivatedFeatures"], "spherelab.features.activated"),
    **dict.fromkeys(["InducingPoints"], "spherelab.features.points"),
    **dict.fromkeys(["ReLU", "Step", "SquaredReLU", "Softplus", "Swish", "Erf"], "spherelab.activations"),
    **dict.fromkeys(["Gaussian", "Bernoulli"], "spherelab.likelihoods"),
    **dict.fromkeys(["Reflection", "Rotation", "Product", "Antipodal"], "spherelab.groups"),
    **dict.fromkeys(["Statistics"], "spherelab.bounds.statistics"),
}


def _registered(name: str) -> type | None:
    module = REGISTRY.get(name) if isinstance(name, str) else None
    if module is None:
        return None
    cls = vars(importlib.import_module(module)).get(name)  # the module's own name: no attribute traversal
    return cls if isinstance(cls, type) and issubclass(cls, Saveable) else None


# ---- writing ------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self, include_data: bool) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.ids: dict[int, int] = {}
        self.keep_alive: list = []
        self.include_data = include_data

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, _SCALARS):
            return value  # (NaN and infinities as JSON's NaN / Infinity: a fit report may hold them)
        if isinstance(value, np.generic):
            return self.encode(value.item(), path)
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise TypeError(f"cannot save {path}: an array of dtype {value.dtype} (real numeric arrays only)")
            key = f"a{len(self.arrays)}"
            self.arrays[key] = value
            return {"__array__": key}
        if isinstance(value, (list, tuple)):
            tag = "__list__" if isinstance(value, list) else "__tuple__"
            return {tag: [self.encode(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(f"cannot save {path}: a dict with keys other than strings")
            return {"__dict__": [[k, self.encode(v, f"{path}[{k!r}]")] for k, v in value.items()]}
        cls = type(value)
        if _registered(cls.__name__) is not cls:
            raise TypeError(f"cannot save {path}: a {cls.__module__}.{cls.__qualname__} is not a class a model "
                            "file may hold (spherelab.persistence.REGISTRY)")
        if id(value) in self.ids:
            return {"__ref__": self.ids[id(value)]}
        self.ids[id(value)] = n = len(self.ids)
        self.keep_alive.append(value)  # ids stay unique while encoding
        state = value._save_state()
        skip = () if self.include_data else cls._data_entries
        encoded = {k: None if k in skip else self.encode(v, f"{path}.{k}") for k, v in state.items()}
        return {"__object__": cls.__name__, "__id__": n, "state": encoded}


def save(model: Any, path: str | os.PathLike, *, include_data: bool = False) -> None:
    """Save ``model`` (any spherelab model, fitted or not) to ``path`` (``.npz``), atomically.

    Parameters
    ----------
    model
        The model.
    path
        File name (written as given; ``.npz`` is the convention).
    include_data
        Also store the training inputs and targets (needed for ``elbo()`` without arguments and
        for further fitting; never for predictions, except by models whose posterior is the
        data, like ``ExactGP``, which always store them).
    """
    from . import __version__

    enc = _Encoder(include_data)
    root = enc.encode(model, type(model).__name__)
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "spherelab": __version__, "data": bool(include_data),
            "root": root}
    arrays = dict(enc.arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    target = os.path.abspath(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself survives a crash once the directory is synced (best effort)
        dfd = os.open(os.path.dirname(target), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ---- reading ------------------------------------------------------------------------------------
class _Archive:
    """The model file's entries, each read (and its header checked) only when asked for."""

    def __init__(self, zf: zipfile.ZipFile, name: str) -> None:
        from ._validation import memory_budget

        self.zf, self.name = zf, name
        infos = zf.infolist()
        if len(infos) > _MAX_ENTRIES:
            raise FormatError(f"{name}: {len(infos)} entries (at most {_MAX_ENTRIES})")
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if not info.filename.endswith(".npy") or info.filename[:-4] in self.infos:
                raise FormatError(f"{name}: unexpected entry {info.filename!r} (unique NAME.npy entries only)")
            self.infos[info.filename[:-4]] = info
        total = sum(info.file_size for info in infos)
        if total > memory_budget():
            raise FormatError(f"{name}: its entries declare {total / 2**30:.3g} GiB uncompressed, more than the "
                              f"{memory_budget() / 2**30:.3g} GiB available (SPHERELAB_MAX_MEMORY)")

    def read(self, key: str, limit: int | None = None) -> np.ndarray:
        info = self.infos.get(key) if isinstance(key, str) else None
        if info is None:
            raise FormatError(f"{self.name}: the array entry {key!r} is missing")
        if limit is not None and info.file_size > limit:
            raise FormatError(f"{self.name}: entry {key!r} declares {info.file_size} bytes (at most {limit})")
        where = f"{self.name}: entry {key!r}"
        try:
            with self.zf.open(info) as fp:
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
                count = math.prod(shape)
                nbytes = count * dtype.itemsize
                if nbytes > info.file_size:
                    raise FormatError(f"{where}: its header declares {nbytes} bytes, the entry holds "
                                      f"{info.file_size}")
                data = fp.read(nbytes)
                if len(data) != nbytes or fp.read(1):
                    raise FormatError(f"{where}: {len(data)} bytes of data, {nbytes} declared")
        except FormatError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as err:
            raise FormatError(f"{where} is unreadable: {type(err).__name__}: {err}") from None
        return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


class _Decoder:
    def __init__(self, archive: _Archive) -> None:
        self.archive = archive
        self.objects: dict[int, Any] = {}

    def fail(self, path: str, text: str) -> FormatError:
        return FormatError(f"{self.archive.name}: {path}: {text}")

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
            return self.archive.read(body)
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
        cls = _registered(name)
        if cls is None:
            raise self.fail(path, f"refusing to build {name!r}: not a class a model file may hold "
                                  f"({', '.join(sorted(REGISTRY))})")
        if not isinstance(n, int) or isinstance(n, bool) or n in self.objects:
            raise self.fail(path, f"object number {n!r} is not a new integer")
        if not isinstance(state, dict):
            raise self.fail(path, "the object's state is not a JSON object")
        where = f"{self.archive.name}: {path}"
        entries = {k: self.decode(v, f"{path}.{k}", depth + 1) for k, v in state.items()}
        loaded = LoadedState(entries, where)
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


def load(path: str | os.PathLike, *, device: str = "cpu") -> Any:
    """Load a model saved by :func:`save`; its operations run on ``device``.

    Raises
    ------
    FormatError
        The file is not a spherelab model file of a version this spherelab reads, or an entry is
        malformed (the message names the file, the entry and what was expected).
    """
    name = repr(os.fspath(path))
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise FormatError(f"{name} is not a spherelab model file: {type(err).__name__}: {err}") from None
    with zf:
        archive = _Archive(zf, name)
        if "__meta__" not in archive.infos:
            raise FormatError(f"{name} is not a spherelab model file (no __meta__ entry)")
        raw = archive.read("__meta__", limit=_MAX_META)
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise FormatError(f"{name}: __meta__ is not a byte string")
        try:
            meta = json.loads(raw.tobytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            raise FormatError(f"{name}: __meta__ is not JSON: {type(err).__name__}: {err}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise FormatError(f"{name} is not a spherelab model file (format "
                              f"{meta.get('format') if isinstance(meta, dict) else None!r})")
        version = meta.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise FormatError(f"{name} has format version {version!r}, newer than this spherelab reads "
                              f"({FORMAT_VERSION}); upgrade spherelab")
        if version < FORMAT_VERSION:
            raise FormatError(f"{name} has format version {version}, written before models declared their saved "
                              f"state (this spherelab reads version {FORMAT_VERSION}); fit the model again and save")
        if "root" not in meta:
            raise FormatError(f"{name}: __meta__ has no root entry")
        model = _Decoder(archive).decode(meta["root"], "root")
    restore = getattr(model, "_restore", None)
    if restore is not None:
        restore(device)
    return model
