"""Model files cannot cost more than they weigh (spherelab.loading): an array entry is used once; a
file of repeated rows cannot buy a large refactorisation; an entry of the wrong shape is refused
before it is inflated; statistics must be what data give (positive semi-definite, c in the range
of G with c^T G^+ c <= y^T y); inputs must lie within the kernel's lift; ``load`` returns models
unless a part is asked for by its class."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
import spherelab as sl
from conftest import find_saved, sine_data
from spherelab import kernels as K

G = sl.likelihoods.Gaussian


def _entries(path) -> tuple[dict, dict]:
    """(meta, {key: array}) of a saved file."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(arrays.pop("__meta__").tobytes()), arrays


def _write(path, meta, arrays, compress=True):
    arrays = dict(arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    return path


def _vish(tmp_path, **fit):
    X, y = sine_data(60)
    path = tmp_path / "vish.npz"
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)).fit(X, y, maxiter=3, lift_maxiter=2, **fit).save(path)
    return path


def test_an_entry_named_many_times_is_refused(tmp_path):
    meta, arrays = _entries(_vish(tmp_path))
    stats = find_saved(meta["root"], "Statistics")["state"]
    stats["c"] = dict(stats["G"])  # the same entry twice: refused (a file cannot multiply one entry)
    path = _write(tmp_path / "twice.npz", meta, arrays)
    with pytest.raises(sl.FormatError, match="used twice"):
        sl.load(path)


def test_a_file_of_repeated_rows_cannot_buy_a_large_factorisation(tmp_path):
    X, y = sine_data(30)
    saved = tmp_path / "exact.npz"
    sl.save(sl.models.ExactGP(K.Matern(1.5), 0.1).fit(X, y), saved)
    meta, arrays = _entries(saved)
    state = meta["root"]["state"]
    arrays[state["X"]["__array__"]] = np.ones((15_000, 2))  # 15 000 identical rows: about 2 KB
    arrays[state["y"]["__array__"]] = np.zeros(15_000)
    path = _write(tmp_path / "rows.npz", meta, arrays)
    assert path.stat().st_size < 20_000
    start = time.perf_counter()
    with pytest.raises(sl.FormatError, match="Cholesky factor of 15,000 rows"):
        sl.load(path)
    assert time.perf_counter() - start < 5  # refused before the factorisation, not after it
    # the same rows as genuine data carry bytes of their own: a model of 2 000 distinct rows loads
    rng = np.random.default_rng(0)
    arrays[state["X"]["__array__"]] = rng.uniform(-1, 1, (2_000, 2))
    arrays[state["y"]["__array__"]] = rng.standard_normal(2_000)
    assert isinstance(sl.load(_write(tmp_path / "real.npz", meta, arrays)), sl.models.ExactGP)


def test_an_entry_of_the_wrong_shape_is_refused_before_it_inflates(tmp_path):
    meta, arrays = _entries(_vish(tmp_path))
    c_key = find_saved(meta["root"], "Statistics")["state"]["c"]["__array__"]
    arrays[c_key] = np.zeros(12_500_000)  # 100 MB of zeros in about 100 KB: the wrong shape for c
    path = _write(tmp_path / "wide.npz", meta, arrays)
    assert path.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(sl.FormatError, match=r"stats\.c: expected an array of shape"):
            sl.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, peak  # the header was read, not the 100 MB


def test_the_bytes_a_load_inflates_follow_the_files_size(tmp_path):
    meta, arrays = _entries(_vish(tmp_path))
    X_key = "bigX"
    state = meta["root"]["state"]
    state["X"], state["y"] = {"__array__": X_key}, {"__array__": "bigy"}
    arrays[X_key], arrays["bigy"] = np.zeros((20_000_000, 2)), np.zeros(20_000_000)  # 480 MB in ~0.5 MB
    path = _write(tmp_path / "zeros.npz", meta, arrays)
    with pytest.raises(sl.FormatError, match="more than a file of .* bytes may cost"):
        sl.load(path)


@pytest.mark.parametrize("name, edit, match", [
    ("G = 0", lambda G, c: (np.zeros_like(G), c), "c\\^T G\\^\\+ c = inf exceeds"),
    ("c = 1e300", lambda G, c: (G, np.full_like(c, 1e300)), "exceeds y\\^T y"),
    ("G indefinite", lambda G, c: (G - 2 * np.linalg.eigvalsh(G).max() * np.eye(len(c)), c),
     "not positive semi-definite"),
    ("c scaled", lambda G, c: (G, 50 * c), "exceeds y\\^T y"),
])
def test_impossible_statistics_are_refused(tmp_path, name, edit, match):
    meta, arrays = _entries(_vish(tmp_path))
    stats = find_saved(meta["root"], "Statistics")["state"]
    Gk, ck = stats["G"]["__array__"], stats["c"]["__array__"]
    arrays[Gk], arrays[ck] = edit(arrays[Gk], arrays[ck])
    with pytest.raises(sl.FormatError, match=match):
        sl.load(_write(tmp_path / "stats.npz", meta, arrays))


def test_fitted_statistics_load_in_both_precisions(tmp_path):
    for dtype in ("float64", "float32"):
        X, y = sine_data(200)
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            model = sl.VISH(K.Matern(1.5, 1.0), 4, G(0.1), gram_dtype=dtype).fit(X, y, maxiter=3, lift_maxiter=2)
        path = tmp_path / f"{dtype}.npz"
        model.save(path)
        loaded = sl.load(path)
        assert loaded.stats.impossible() is None
        for a, b in zip(loaded.predict_f(X[:5]), model.predict_f(X[:5])):
            assert np.array_equal(a, b)


def test_inducing_inputs_beyond_the_lift_are_refused_at_load(tmp_path):
    X, y = sine_data(40)
    path = tmp_path / "orth.npz"
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, y, maxiter=3).save(path)
    meta, arrays = _entries(path)
    z_key = find_saved(meta["root"], "InducingPoints")["state"]["Z"]["__array__"]
    arrays[z_key] = np.full_like(arrays[z_key], 1e200)
    with pytest.raises(sl.FormatError, match="InducingPoints.*1e\\+200"):
        sl.load(_write(tmp_path / "far.npz", meta, arrays))
    meta, arrays = _entries(path)  # within float64's range for Z, beyond the lift at its input scale
    find_saved(meta["root"], "Matern")["state"]["input_scale"] = 1e-100
    arrays[z_key] = np.full_like(arrays[z_key], 1e60)
    with pytest.raises(sl.FormatError, match="inputs the kernel can lift"):
        sl.load(_write(tmp_path / "scaled.npz", meta, arrays))


def test_load_returns_models_unless_a_part_is_asked_for(tmp_path):
    kernel = K.Matern(2.5, 0.7)
    path = tmp_path / "kernel.npz"
    sl.save(kernel, path)
    with pytest.raises(sl.FormatError, match="expected a saved model, the file holds 'Matern'"):
        sl.load(path)
    again = sl.load(path, kind=K.Matern)
    assert type(again) is K.Matern and again.lengthscale == 0.7
    with pytest.raises(sl.FormatError, match="expected a saved ArcCosine"):
        sl.load(path, kind=K.ArcCosine)
    with pytest.raises(TypeError, match="kind must be"):
        sl.load(path, kind=dict)


def test_the_directory_is_checked_before_anything_is_read(tmp_path, monkeypatch):
    meta, arrays = _entries(_vish(tmp_path))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, v in {**arrays, "__meta__": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}.items():
            out = io.BytesIO()
            np.save(out, v)
            zf.writestr(f"{k}.npy", out.getvalue())
    path = tmp_path / "plain.npz"
    path.write_bytes(buf.getvalue())
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", "1K")  # the cap applies whatever the file's size
    with pytest.raises(sl.FormatError, match="declare .* uncompressed, more than"):
        sl.load(path)


def _with_report(tmp_path, name, report_json: str):
    """A saved VISH whose __meta__ holds ``report_json`` as its fit report (written as raw text)."""
    meta, arrays = _entries(_vish(tmp_path))
    meta["root"]["state"]["fit_report"] = "@REPORT@"
    text = json.dumps(meta).replace('"@REPORT@"', report_json)
    arrays = dict(arrays)
    arrays["__meta__"] = np.frombuffer(text.encode(), dtype=np.uint8)
    path = tmp_path / name
    np.savez_compressed(path, **arrays)
    return path


@pytest.mark.parametrize("report, match", [
    ('{"__list__": [' + ",".join(["0.5"] * 3_000_000) + "]}", "values"),  # millions of floats, a small file
    ("[" * 3_000 + "]" * 3_000, "values|deeper"),  # deep nesting
    ('{"__list__": [' + ",".join(["[]"] * 1_500_000) + "]}", "values"),  # millions of empty lists
    ('{"a": ' * 200 + "1" + "}" * 200, "deeper"),  # deeper than the format ever nests
])
def test_metadata_is_bounded_before_it_is_decoded(tmp_path, report, match):
    path = _with_report(tmp_path, "meta.npz", report)
    assert path.stat().st_size < 400_000  # a small file...
    tracemalloc.start()
    t = time.perf_counter()
    with pytest.raises(sl.FormatError, match=match) as err:
        sl.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # ...refused without building its objects: the inflated text and its scans, not a gigabyte
    assert peak < 12 * len(report) + (8 << 20), peak
    assert "meta.npz" in str(err.value) and time.perf_counter() - t < 30


def test_a_string_holding_brackets_and_commas_is_one_value(tmp_path):
    path = _with_report(tmp_path, "strings.npz", json.dumps({"__dict__": [["note", '[[[[,,,,{{{{\\"' * 1000]]}))
    assert sl.load(path).fit_report_["note"] == '[[[[,,,,{{{{\\"' * 1000


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_only_regular_files_are_opened(tmp_path, kind):
    import os

    if kind == "fifo":
        path = tmp_path / "pipe.npz"
        os.mkfifo(path)  # open() would block until a writer came
    elif kind == "directory":
        path = tmp_path / "folder.npz"
        path.mkdir()
    else:
        path = tmp_path / "zero.npz"
        path.symlink_to("/dev/zero")  # zipfile would read for ever, then fail for memory
    with pytest.raises(sl.FormatError, match="not a regular file"):
        sl.load(path)


def test_an_encrypted_entry_is_a_format_error(tmp_path):
    path = _vish(tmp_path)
    data = bytearray(path.read_bytes())
    # set the "encrypted" flag bit of every entry's local header and central directory record
    for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (at := data.find(sig, start)) >= 0:
            data[at + offset] |= 0x01
            start = at + 4
    bad = tmp_path / "encrypted.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(sl.FormatError, match="encrypted.npz"):
        sl.load(bad)
