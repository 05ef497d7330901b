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

Loading (:mod:`spherelab.loading`) returns a model (or the part asked for by ``kind``) and checks,
before it allocates anything, the root's class, the archive's directory (entry names, the declared
sizes against the load's budget, which follows the file's size and
:func:`spherelab._validation.memory_budget`), each array's header (numeric dtype, a size the entry
holds, each entry used once), the shape a class expects before the array is inflated, then its
values (finiteness, and what fitted state must be: statistics positive semi-definite and
consistent with the targets, inputs within the lift's range), and the work of any refactorisation
against the budget; any malformed file raises :class:`FormatError` naming the file, the entry and
what was expected.
Saving writes a temporary file beside the target, flushes and syncs it, then renames it over the
target: an interrupted save leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import zipfile
from typing import Any

import numpy as np

from ._listing import own_names
from ._state import FormatError, Saveable

__all__ = ["save", "load", "FORMAT_VERSION", "FormatError", "REGISTRY"]
__dir__ = own_names(__name__)  # dir() and tab completion: the names above, not the imports

FORMAT = "spherelab-model"
FORMAT_VERSION = 2
_SCALARS = (bool, int, float, str, type(None))
_MAX_META = 64 << 20  # bytes of JSON


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))
    return next((word for test, word in kinds if test(mode)), "special file")

#: the models (what :func:`load` returns unless asked for a part)
MODELS = ("VISH", "OrthogonalSVGP", "ActivatedSVGP", "HarmonicSVGP", "ExactGP", "NeighbourResidual")

#: every class a model file may name, by the name the file uses -> its module
REGISTRY: dict[str, str] = {
    **dict.fromkeys(["VISH"], "spherelab.models.vish"),
    **dict.fromkeys(["OrthogonalSVGP", "ActivatedSVGP"], "spherelab.models.decoupled"),
    **dict.fromkeys(["HarmonicSVGP"], "spherelab.models.hvgp"),
    **dict.fromkeys(["ExactGP"], "spherelab.models.exact"),
    **dict.fromkeys(["NeighbourResidual"], "spherelab.models.local"),
    **dict.fromkeys(["Matern"], "spherelab.kernels.matern"),
    **dict.fromkeys(["ArcCosine", "DeepArcCosine", "NTK"], "spherelab.kernels.arccos"),
    **dict.fromkeys(["IntrinsicMatern", "PolynomialDecay"], "spherelab.kernels.spectral"),
    **dict.fromkeys(["Truncated", "Parity"], "spherelab.kernels.wrapped"),
    **dict.fromkeys(["Additive"], "spherelab.kernels.additive"),
    **dict.fromkeys(["HarmonicFeatures"], "spherelab.features.harmonic"),
    **dict.fromkeys(["AdditiveHarmonics"], "spherelab.features.additive"),
    **dict.fromkeys(["PhaseTruncatedHarmonics"], "spherelab.features.phases"),
    **dict.fromkeys(["ActivatedFeatures"], "spherelab.features.activated"),
    **dict.fromkeys(["InducingPoints"], "spherelab.features.points"),
    **dict.fromkeys(["ReLU", "Step", "SquaredReLU", "Softplus", "Swish", "Erf"], "spherelab.activations"),
    **dict.fromkeys(["Gaussian", "Bernoulli"], "spherelab.likelihoods"),
    **dict.fromkeys(["Reflection", "Rotation", "Product", "Antipodal"], "spherelab.groups"),
    **dict.fromkeys(["Statistics"], "spherelab.bounds.statistics"),
}


def _registered(name: str) -> type | None:
    from .loading import registered

    return registered(name, REGISTRY)


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
        skip = () if self.include_data else cls.data_entries()
        encoded = {k: None if k in skip else self.encode(v, f"{path}.{k}") for k, v in state.items()}
        return {"__object__": cls.__name__, "__id__": n, "state": encoded}


def _write_atomically(target: str, arrays: dict) -> None:
    """The archive to a temporary file beside ``target``, flushed and synced, renamed over it.
    The temporary file's name is chosen before it exists, so whatever interrupts the save — at
    any point, before or after the file is created — the clean-up knows what to remove."""
    folder = os.path.dirname(target)
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as err:  # named by the target, not by a temporary name the user never chose
            raise type(err)(err.errno, f"cannot save {target}: its folder {folder} cannot be written to "
                                       f"({err.strerror})") from None
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
    from ._validation import check_bool
    from .concurrency import holding

    include_data = check_bool(include_data, "include_data")
    if not isinstance(model, Saveable):
        raise TypeError(f"model must be a spherelab model (or a part of one: a kernel, likelihood, features), got "
                        f"{type(model).__name__}")
    target = os.path.abspath(os.fspath(path))
    # read as a prediction reads, until the file is written: a save racing a fit waits for it and
    # writes the fitted model (the arrays are written from the model's own memory, not copied)
    with holding(model) if isinstance(model, Saveable) else contextlib.nullcontext():
        enc = _Encoder(include_data)
        root = enc.encode(model, type(model).__name__)
        meta = {"format": FORMAT, "version": FORMAT_VERSION, "spherelab": __version__, "data": bool(include_data),
                "root": root}
        arrays = dict(enc.arrays)
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        _write_atomically(target, arrays)
    try:  # the rename itself survives a crash once the directory is synced (best effort)
        dfd = os.open(os.path.dirname(target), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ---- reading (the archive and the decoder: spherelab.loading) ---------------------------------------
def load(path: str | os.PathLike, *, device: str = "cpu", kind: type | None = None) -> Any:
    """Load a model saved by :func:`save`; its operations run on ``device``.

    Parameters
    ----------
    path
        The file.
    device
        Where the model's operations run (``"cpu"``, ``"cuda"``, ``"auto"``).
    kind
        The class of object expected (default: any model, :data:`MODELS`):
        a file whose root is something else — a kernel, a likelihood, a number — is refused before
        anything is built. Pass a part's class (e.g. ``sl.kernels.Matern``) to read a saved part.

    Raises
    ------
    FormatError
        The file is not a spherelab model file of a version this spherelab reads, holds another
        kind of object, an entry is malformed, or rebuilding it would cost more than a file of its
        size may (:mod:`spherelab.loading`): the message names the file, the entry and what was
        expected.
    """
    from .loading import Archive, Decoder, LoadBudget, check_json

    if kind is None:
        kinds = tuple(_registered(n) for n in MODELS)
    else:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not kinds or not all(isinstance(k, type) and issubclass(k, Saveable) for k in kinds):
            raise TypeError(f"kind must be a spherelab model or part class (spherelab.persistence.REGISTRY), got "
                            f"{kind!r}")
    name = repr(os.fspath(path))
    try:
        info = os.stat(path)
    except (OSError, ValueError) as err:
        raise FormatError(f"{name} is not a spherelab model file: {type(err).__name__}: {err}") from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block in open(), a device never end
        raise FormatError(f"{name} is not a regular file (a {_file_kind(info.st_mode)}): a model file is one")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, NotImplementedError) as err:
        raise FormatError(f"{name} is not a spherelab model file: {type(err).__name__}: {err}") from None
    size = info.st_size
    with zf:
        archive = Archive(zf, name, LoadBudget(size, name))
        if "__meta__" not in archive.infos:
            raise FormatError(f"{name} is not a spherelab model file (no __meta__ entry)")
        raw = archive.read("__meta__", limit=_MAX_META)
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise FormatError(f"{name}: __meta__ is not a byte string")
        check_json(raw.tobytes(), archive.budget, "__meta__")
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
        decoder = Decoder(archive, REGISTRY)
        decoder.root_class(meta["root"], kinds)
        model = decoder.decode(meta["root"], "root")
    restore = getattr(model, "_restore", None)
    if restore is not None:
        restore(device)
    return model
