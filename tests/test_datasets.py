"""Data loaders and generators."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import spherelab as sl

SHARED = __import__("pathlib").Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def test_synthetic_generator_is_deterministic_and_chunked():
    X1, y1 = sl.datasets.synthetic_regression(2500, seed=3, chunk=1000)
    X2, y2 = sl.datasets.synthetic_regression(2500, seed=3, chunk=1000)
    assert X1.shape == (2500, 8) and y1.shape == (2500,)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert 0.3 < y1.std() < 2.0
    with pytest.raises(ValueError, match="num_points"):
        sl.datasets.synthetic_regression(0)


@pytest.mark.skipif(not (SHARED / "yacht" / "yacht.csv").exists(), reason="../shared/data not present")
def test_load_uci_from_a_data_directory():
    Xtr, ytr, Xte, yte = sl.datasets.load_uci("yacht", 3, data_dir_=SHARED)
    assert Xtr.shape == (277, 6) and Xte.shape == (31, 6)
    assert ytr.shape == (277,) and yte.shape == (31,)


@pytest.mark.skipif(not (SHARED / "banana" / "banana.csv").exists(), reason="../shared/data not present")
def test_load_snelson_and_banana_from_a_data_directory():
    X, y = sl.datasets.load_snelson(data_dir_=SHARED)
    assert X.shape == (200, 1) and y.shape == (200,)
    assert np.isclose(y.mean(), -0.342745, atol=1e-6)  # PROVENANCE.md
    X, y = sl.datasets.load_banana(data_dir_=SHARED)
    assert X.shape == (400, 2) and set(np.unique(y)) == {0.0, 1.0}
    assert np.isclose(y.mean(), 0.5425)


def test_generated_stand_ins_resemble_the_originals():
    X, y = sl.datasets.snelson_like(seed=1)
    assert X.shape == (200, 1) and 0.0 < X.min() and X.max() < 6.0
    assert 0.5 < y.std() < 1.2  # Snelson: std 0.84
    X, y = sl.datasets.banana_like(seed=1)
    assert X.shape == (400, 2) and set(np.unique(y)) == {0.0, 1.0}
    assert 0.4 < y.mean() < 0.7  # banana: 0.54 of class 1
    # as hard as the original: least-squares classifiers on linear / cubic features reach
    # 0.68 / 0.80 training accuracy on the real banana set
    x1, x2 = X.T
    one = np.ones_like(x1)
    accuracy = []
    for F in (np.column_stack([one, x1, x2]),
              np.column_stack([one, x1, x2, x1**2, x2**2, x1 * x2, x1**3, x2**3, x1**2 * x2, x1 * x2**2])):
        w = np.linalg.lstsq(F, y - 0.5, rcond=None)[0]
        accuracy.append(np.mean((F @ w > 0) == (y == 1)))
    assert 0.6 < accuracy[0] < 0.76 and 0.76 < accuracy[1] < 0.86


def test_loaders_missing_give_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(sl.datasets.loaders, "find_dataset", lambda name: None)
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_snelson()
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_banana()


def test_load_uci_missing_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sl.datasets.loaders, "find_dataset", lambda name: None)
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="download=True"):
        sl.datasets.load_uci("energy")
    with pytest.raises(ValueError, match="name must be one of"):
        sl.datasets.load_uci("iris")


def test_susy_like():
    X, y = sl.datasets.susy_like(20_000, seed=3)
    assert X.shape == (20_000, 8) and set(np.unique(y)) == {0.0, 1.0}
    assert abs(y.mean() - 0.46) < 0.02 and np.all(np.isfinite(X))
    # informative but not separable: a linear score ranks well, not perfectly
    auc = sl.metrics.roc_auc(y, X[:, 4] + 0.5 * X[:, 0])
    assert 0.7 < auc < 0.95
    X2, y2 = sl.datasets.susy_like(20_000, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)


def test_search_path_order_env_then_beside_the_repository_then_user_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    path = sl.datasets.search_path()
    assert path[0] == tmp_path / "mine"
    assert path[-1] == tmp_path / "xdg" / "spherelab"
    assert SHARED.resolve() in [p.resolve() for p in path[1:-1]]  # imported from the clone
    # a set in $SPHERELAB_DATA wins over the shared one
    (tmp_path / "mine" / "snelson").mkdir(parents=True)
    (tmp_path / "mine" / "snelson" / "snelson.csv").write_text("x,y\n" + "1.0,2.0\n" * 200)
    assert sl.datasets.find_dataset("snelson") == tmp_path / "mine"
    (X, y), label = sl.datasets.load("snelson")
    assert label == "snelson, real" and X.shape == (200, 1)


@pytest.mark.skipif(not (SHARED / "yacht" / "yacht.csv").exists(), reason="../shared/data not present")
def test_load_finds_the_shared_data_without_any_setting(monkeypatch):
    monkeypatch.delenv("SPHERELAB_DATA", raising=False)
    (Xtr, ytr, Xte, yte), label = sl.datasets.load("yacht", 2)
    assert label == "yacht, real, split 2" and Xtr.shape == (277, 6) and Xte.shape == (31, 6)
    assert np.array_equal(Xtr, sl.datasets.load_uci("yacht", 2, data_dir_=SHARED)[0])


def test_load_falls_back_to_a_stand_in_of_the_same_shape_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(sl.datasets.loaders, "find_dataset", lambda name: None)
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    with pytest.warns(sl.datasets.StandInWarning, match=f"no yacht data in .*{tmp_path}.*stand-in"):
        (Xtr, ytr, Xte, yte), label = sl.datasets.load("yacht", 0)
    assert label == "yacht, stand-in"
    assert Xtr.shape == (277, 6) and Xte.shape == (31, 6)
    with pytest.warns(sl.datasets.StandInWarning, match="no banana data"):
        (X, y), label = sl.datasets.load("banana")
    assert label == "banana, stand-in" and X.shape == (400, 2)
    with pytest.raises(ValueError, match="split"):  # a stand-in has the real set's splits only
        sl.datasets.load("yacht", 10**6)
    with pytest.raises(ValueError, match="split"):
        sl.datasets.load("protein", 5)  # protein has five
    with pytest.raises(ValueError, match="a string"):
        sl.datasets.load(["energy"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quiet, for a caller that shows the label
        assert sl.datasets.load("yacht", 0, stand_in="allow")[1] == "yacht, stand-in"
    with pytest.raises(FileNotFoundError, match="yacht"):
        sl.datasets.load("yacht", 0, stand_in="refuse")
    with pytest.raises(FileNotFoundError, match="yacht/yacht.csv not found in"):
        sl.datasets.load_uci("yacht")
    with pytest.raises(ValueError, match="name"):
        sl.datasets.load("mnist")


@pytest.mark.skipif(not (SHARED / "banana" / "original").exists(), reason="../shared/data not present")
@pytest.mark.parametrize("name", ["snelson", "banana"])
def test_download_writes_the_same_table_as_the_shared_copy(name, tmp_path, monkeypatch):
    """``download=True`` offline: GPflow's files served from the shared originals (byte-identical
    to the repository blobs, PROVENANCE.md) give the shared CSV's numbers."""
    import urllib.request

    def urlopen(url, timeout=None):
        return open(SHARED / name / "original" / url.rsplit("/", 1)[-1], "rb")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    loader = getattr(sl.datasets, f"load_{name}")
    with pytest.raises(FileNotFoundError, match="download=True"):
        loader(data_dir_=tmp_path)
    X, y = loader(data_dir_=tmp_path, download=True)
    X0, y0 = loader(data_dir_=SHARED)
    assert np.array_equal(X, X0) and np.array_equal(y, y0)
    assert (tmp_path / name / f"{name}.csv").exists()
