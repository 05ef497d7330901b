r"""Saving and loading models: one ``.npz`` file, arrays as NumPy arrays and everything else as
JSON — loading runs no pickle and builds only spherelab's own classes.

Format (``FORMAT_VERSION`` 1): the archive's entry ``__meta__`` is a JSON document

.. code-block:: text

    {"format": "spherelab-model", "version": 1, "spherelab": "<package version>",
     "data": <bool>, "root": <value>}

where a value is a JSON scalar (floats may be ``NaN``/``Infinity``), ``{"__array__": key}`` (an
entry of the archive), ``{"__list__" | "__tuple__": [...]}``, ``{"__dict__": [[key, value],
...]}``, ``{"__slice__": [start, stop, step]}``, ``{"__ref__": n}`` (the object numbered ``n``
again: a kernel shared by a model and its features stays shared) or ``{"__object__":
"module:Class", "__id__": n, "state": {attribute: value}}``. ``__object__`` must name a class of
the ``spherelab`` package.

What is stored: every attribute of the model and its parts (hyper-parameters, features, the
variational posterior or the sufficient statistics of VISH, fit reports) except those a class
lists in ``_transient`` (the device's operation table, optimiser results, the training data —
the latter kept with ``include_data=True``; a model that needs its data to predict, like
:class:`~spherelab.models.ExactGP`, always keeps it). On load every validated hyper-parameter
(:class:`~spherelab._validation.Hyper`) is checked again, and the model's operations are
resolved for ``device``.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import zipfile
from typing import Any

import numpy as np

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT = "spherelab-model"
FORMAT_VERSION = 1
_SCALARS = (bool, int, float, str, type(None))


class _Encoder:
    def __init__(self, skip_data: bool) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.ids: dict[int, int] = {}
        self.keep_alive: list = []
        self.skip_data = skip_data

    def array(self, value: np.ndarray, path: str) -> dict:
        if value.dtype.kind not in "biufc":
            raise TypeError(f"cannot save {path}: an array of dtype {value.dtype} (only numeric arrays are stored)")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = value
        return {"__array__": key}

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return self.array(value, path)
        if isinstance(value, (list, tuple)):
            tag = "__list__" if isinstance(value, list) else "__tuple__"
            return {tag: [self.encode(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"__dict__": [[self.encode(k, f"{path} key"), self.encode(v, f"{path}[{k!r}]")]
                                 for k, v in value.items()]}
        if isinstance(value, slice):
            return {"__slice__": [value.start, value.stop, value.step]}
        cls = type(value)
        if cls.__module__.split(".")[0] == "spherelab" and hasattr(value, "__dict__"):
            if id(value) in self.ids:
                return {"__ref__": self.ids[id(value)]}
            self.ids[id(value)] = n = len(self.ids)
            self.keep_alive.append(value)  # ids stay unique while encoding
            skip = _transient(cls, self.skip_data)
            state = {k: self.encode(v, f"{path}.{k}") for k, v in vars(value).items() if k not in skip}
            return {"__object__": f"{cls.__module__}:{cls.__qualname__}", "__id__": n, "state": state}
        raise TypeError(f"cannot save {path}: a {cls.__module__}.{cls.__qualname__} is not part of the format "
                        "(add the attribute to its class's _transient if it can be rebuilt)")


def _transient(cls: type, skip_data: bool) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "_transient", ()))
    if skip_data:
        names.update(getattr(cls, "_transient_data", ()))  # the most derived class decides
    return names


class _Decoder:
    def __init__(self, arrays) -> None:
        self.arrays = arrays
        self.objects: dict[int, Any] = {}

    def decode(self, value: Any) -> Any:
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, list):
            raise ValueError("malformed file: a bare list")
        if "__array__" in value:
            return np.array(self.arrays[value["__array__"]])
        if "__list__" in value:
            return [self.decode(v) for v in value["__list__"]]
        if "__tuple__" in value:
            return tuple(self.decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {_hashable(self.decode(k)): self.decode(v) for k, v in value["__dict__"]}
        if "__slice__" in value:
            return slice(*value["__slice__"])
        if "__ref__" in value:
            return self.objects[value["__ref__"]]
        if "__object__" in value:
            cls = _spherelab_class(value["__object__"])
            obj = cls.__new__(cls)
            self.objects[value["__id__"]] = obj
            state = {k: self.decode(v) for k, v in value["state"].items()}
            obj.__dict__.update(state)
            _revalidate(obj)
            return obj
        raise ValueError(f"malformed file: unknown entry {sorted(value)}")


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def _spherelab_class(name: str) -> type:
    module, _, qualname = name.partition(":")
    if module.split(".")[0] != "spherelab":
        raise ValueError(f"refusing to load {name!r}: only spherelab classes are built from a saved model")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"malformed file: {name!r} is not a class")
    return obj


def _revalidate(obj: Any) -> None:
    """Run every validated hyper-parameter of ``obj`` through its check again."""
    from ._validation import Hyper

    for klass in type(obj).__mro__:
        for name, attr in vars(klass).items():
            if isinstance(attr, Hyper) and attr.slot in obj.__dict__:
                setattr(obj, name, obj.__dict__[attr.slot])


def save(model: Any, path: str | os.PathLike, *, include_data: bool = False) -> None:
    """Save ``model`` (any spherelab model, fitted or not) to ``path`` (``.npz``).

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

    enc = _Encoder(skip_data=not include_data)
    root = enc.encode(model, type(model).__name__)
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "spherelab": __version__, "data": bool(include_data),
            "root": root}
    arrays = dict(enc.arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load(path: str | os.PathLike, *, device: str = "cpu") -> Any:
    """Load a model saved by :func:`save`; its operations run on ``device``."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise ValueError(f"{os.fspath(path)!r} is not a spherelab model file: {err}") from None
    with archive:
        if "__meta__" not in archive.files:
            raise ValueError(f"{os.fspath(path)!r} is not a spherelab model file (no __meta__ entry)")
        meta = json.load(io.BytesIO(archive["__meta__"].tobytes()))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{os.fspath(path)!r} is not a spherelab model file (format {meta.get('format')!r})")
        if int(meta.get("version", -1)) > FORMAT_VERSION:
            raise ValueError(f"{os.fspath(path)!r} has format version {meta['version']}, newer than this spherelab "
                             f"reads ({FORMAT_VERSION}); upgrade spherelab")
        model = _Decoder({k: archive[k] for k in archive.files if k != "__meta__"}).decode(meta["root"])
    restore = getattr(model, "_restore", None)
    if restore is not None:
        restore(device)
    return model
