"""Data files are checked as model files are (spherelab.datasets.files): the table's shape and
finiteness, a split's indices, banana's labels, regular files only (a FIFO or a device cannot hang
the loader), a named FormatError for a broken file — never a silent fall-through to another folder's
copy — and the folder beside the clone read only when it is the user's (or root's) and writable by
no one else."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest
import spherelab as sl

HEADER = "a,b,c,d,e,f,y"


def _yacht(root, rows=308, table=None, train=None, test=None):  # yacht's 308 rows: a known set's size is checked
    folder = root / "yacht"
    (folder / "original").mkdir(parents=True, exist_ok=True)
    if table is None:
        table = "\n".join(",".join(str(float(i + j)) for j in range(7)) for i in range(rows))
    (folder / "yacht.csv").write_text(HEADER + "\n" + table + "\n")
    (folder / "original" / "index_train_0.txt").write_text(train if train is not None else "0\n1\n2\n3\n4\n5\n6\n7\n")
    (folder / "original" / "index_test_0.txt").write_text(test if test is not None else "8\n9\n10\n11\n")
    return root


@pytest.fixture
def mine(tmp_path, monkeypatch):
    monkeypatch.setenv("SPHERELAB_DATA", str(tmp_path))
    return tmp_path


def test_a_valid_folder_loads(mine):
    Xtr, ytr, Xte, yte = sl.datasets.load_uci("yacht", 0, data_dir_=_yacht(mine))
    assert Xtr.shape == (8, 6) and Xte.shape == (4, 6) and ytr[0] == 6.0


@pytest.mark.parametrize("what, kwargs, match", [
    ("a NaN", {"table": "1,2,3,4,5,6,nan\n" * 12}, "12 NaN or infinite value"),
    ("an infinity", {"table": "1,2,3,4,5,6,7\n" * 11 + "1,2,inf,4,5,6,7"}, "row 12, column 3"),
    ("a missing column", {"table": "1,2,3,4,5,6\n" * 12}, "expected rows of 7 numbers|not a table"),
    ("text", {"table": "1,2,3,4,5,6,seven\n" * 12}, "not a table of numbers"),
    ("no rows", {"table": ""}, "expected rows of 7 numbers"),
    ("a negative index", {"train": "0\n-1\n2\n"}, "outside the table's 308 rows"),
    ("an index past the end", {"test": "8\n308\n"}, "outside the table's 308 rows, e.g. 308"),
    ("an empty split", {"train": ""}, "non-empty list"),
    ("a fractional index", {"train": "0\n1.5\n"}, "an integer"),
    ("a repeated index", {"train": "0\n1\n1\n"}, "1 repeated index"),
    ("overlapping splits", {"train": "0\n1\n2\n", "test": "2\n3\n"}, "row\\(s\\) in both, e.g. row 2"),
])
def test_a_data_file_that_lies_is_refused_by_name(mine, what, kwargs, match):
    root = _yacht(mine, **kwargs)
    with pytest.raises(sl.FormatError, match=match) as err:
        sl.datasets.load_uci("yacht", 0, data_dir_=root)
    assert "yacht" in str(err.value)


def test_the_header_must_name_the_columns(mine):
    _yacht(mine)
    (mine / "yacht" / "yacht.csv").write_text("a,b,y\n" + "1,2,3,4,5,6,7\n" * 4)
    with pytest.raises(sl.FormatError, match="header names 3 columns, expected 7"):
        sl.datasets.load_uci("yacht", 0)


def test_banana_labels_must_be_zero_or_one(mine):
    (mine / "banana").mkdir()
    (mine / "banana" / "banana.csv").write_text("x1,x2,y\n" + "0.1,0.2,1\n" * 399 + "0.3,0.4,2\n")
    with pytest.raises(sl.FormatError, match="labels must be 0 or 1"):
        sl.datasets.load_banana()


def _within(seconds, call):
    def alarm(*_):
        raise TimeoutError("the loader hung")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return call()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_device_is_refused_at_once(mine):
    _yacht(mine)
    csv = mine / "yacht" / "yacht.csv"
    csv.unlink()
    os.mkfifo(csv)
    with pytest.raises(sl.FormatError, match="found a named pipe"):
        _within(10, lambda: sl.datasets.load_uci("yacht", 0))
    csv.unlink()
    if os.path.exists("/dev/zero"):
        csv.symlink_to("/dev/zero")
        with pytest.raises(sl.FormatError, match="found a device|writable by others"):
            _within(10, lambda: sl.datasets.load_uci("yacht", 0))


def test_a_broken_set_in_the_users_folder_is_reported_not_skipped(mine):
    _yacht(mine)
    csv = mine / "yacht" / "yacht.csv"
    csv.unlink()
    csv.mkdir()  # broken: a directory where the table should be
    assert sl.datasets.find_dataset("yacht") == mine  # this folder holds the set, broken or not
    with pytest.raises(sl.FormatError, match="found a directory"):
        sl.datasets.load_uci("yacht", 0)
    with pytest.raises(sl.FormatError, match="found a directory"):
        sl.datasets.load("yacht", 0)  # no stand-in either: the user's file is broken, and is named


def test_the_folder_beside_the_clone_must_be_the_users(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    _yacht(shared)
    monkeypatch.delenv("SPHERELAB_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(sl.datasets.loaders, "_beside_repository", lambda: shared)
    assert shared in sl.datasets.search_path()
    shared.chmod(0o777)  # anyone may change what is found there
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert shared not in sl.datasets.search_path()
        assert any(str(shared) in str(w.message) and "writable by others" in str(w.message) for w in caught)
    finally:
        shared.chmod(0o755)


@pytest.mark.parametrize("split", [True, 1.0, "1", -1])
def test_a_split_is_an_integer(split):
    with pytest.raises((TypeError, ValueError), match="split"):
        sl.datasets.load("yacht", split)


def test_the_shared_sets_pass_every_check():
    from pathlib import Path

    shared = Path(sl.__file__).resolve().parents[3] / "shared" / "data"
    if not (shared / "protein" / "protein.csv").exists():
        pytest.skip("../shared/data not present")
    for name in sl.datasets.UCI_SETS:
        Xtr, ytr, Xte, yte = sl.datasets.load_uci(name, 0, data_dir_=shared)
        assert Xtr.shape[1] == sl.datasets.UCI_SHAPES[name][1]
        assert Xtr.shape[0] + Xte.shape[0] == sl.datasets.UCI_SHAPES[name][0]
    X, y = sl.datasets.load_banana(data_dir_=shared)
    assert set(np.unique(y)) == {0.0, 1.0}


def test_a_known_set_must_have_its_rows(mine):
    _yacht(mine, rows=3, train="0\n1\n", test="2\n")
    with pytest.raises(sl.FormatError, match="3 rows, but this data set has 308"):
        sl.datasets.load_uci("yacht", 0)
    with pytest.raises(sl.FormatError, match="3 rows"):
        sl.datasets.load("yacht", 0)  # not "real", and no stand-in either: the file is named


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="no file owners here")
@pytest.mark.parametrize("which", ["yacht", "yacht/yacht.csv", "yacht/original", "yacht/original/index_test_0.txt"])
def test_every_folder_and_file_on_the_way_is_trusted(mine, which):
    _yacht(mine)
    target = mine / which
    mode = target.stat().st_mode & 0o777
    target.chmod(0o777 if target.is_dir() else 0o666)  # anyone may change it
    try:
        with pytest.raises(sl.FormatError, match="writable by others") as err:
            sl.datasets.load_uci("yacht", 0)
        assert str(target) in str(err.value)
    finally:
        target.chmod(mode)
    assert sl.datasets.load_uci("yacht", 0)[0].shape == (8, 6)


def test_an_error_never_echoes_the_file_s_bytes(mine):
    _yacht(mine)
    secret = mine / "secret.txt"
    secret.write_text("TOKEN=abc123,PASSWORD=hunter2\n" * 3)
    csv = mine / "yacht" / "yacht.csv"
    csv.unlink()
    csv.symlink_to(secret)
    with pytest.raises(sl.FormatError) as err:
        sl.datasets.load_uci("yacht", 0)
    assert "hunter2" not in str(err.value) and "TOKEN" not in str(err.value)
    csv.unlink()
    csv.write_text(HEADER + "\n" + "1,2,3,4,5,6,hunter2\n" * 308)
    with pytest.raises(sl.FormatError, match="not a table of numbers") as err:
        sl.datasets.load_uci("yacht", 0)
    assert "hunter2" not in str(err.value)
