"""Crafted model files: every one is refused with :class:`spherelab.FormatError` naming what is wrong,
builds nothing outside the registry, allocates nothing beyond the memory limit, and — checked by an
audit hook — starts no process, loads no library and removes no file while it is read. Also:
saving is atomic and works in every state (unfitted, after predictions, after ``fit_svi``).

The corpus is generated from valid files of three models (VISH with its statistics and data, an
orthogonally-decoupled SVGP, a harmonic SVGP) by one mutation each, so every case is reviewable
here rather than a binary blob."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile

import numpy as np
import pytest
import spherelab as sl
from conftest import find_saved, hvgp_data
from spherelab import kernels as K

G = sl.likelihoods.Gaussian
FORBIDDEN = ("subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
             "os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "ctypes.dlopen", "os.rename", "os.replace")
_audit = {"on": False, "seen": []}


def _hook(event, args):
    if _audit["on"] and event.startswith(FORBIDDEN):
        _audit["seen"].append((event, args))


sys.addaudithook(_hook)  # cannot be removed: it records only inside `audited`


def audited_load(path):
    _audit["on"], _audit["seen"] = True, []
    try:
        return sl.load(path)
    finally:
        _audit["on"] = False
        assert not _audit["seen"], f"loading {path} raised audit events {_audit['seen']}"


# ---- valid files to mutate -------------------------------------------------------------------------
def _vish():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (60, 2))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        return sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)).fit(X, np.sin(3 * X[:, 0]), maxiter=3, lift_maxiter=2)


def _orthogonal():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (40, 2))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        return sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)).fit(X, np.cos(X[:, 1]), maxiter=3)


def _hvgp():
    X, y = hvgp_data(np.random.default_rng(0))
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        return sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, G(0.1)).fit(X, y, maxiter=3)


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("valid")
    out = {}
    for name, build in (("vish", _vish), ("orthogonal", _orthogonal), ("hvgp", _hvgp)):
        path = folder / f"{name}.npz"
        build().save(path, include_data=name == "vish")
        audited_load(path)  # valid files load under the hook (and warm every code path)
        with zipfile.ZipFile(path) as zf:
            entries = {n: zf.read(n) for n in zf.namelist()}
        meta = json.loads(np.load(io.BytesIO(entries["__meta__.npy"])).tobytes())
        out[name] = (meta, entries)
    return out


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _write(path, entries: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


def _with_meta(entries, meta):
    text = json.dumps(meta) if not isinstance(meta, (str, bytes)) else meta
    raw = text.encode() if isinstance(text, str) else text
    return {**entries, "__meta__.npy": _npy(np.frombuffer(raw, dtype=np.uint8))}


_find = find_saved


def _state(meta, name):
    return _find(meta["root"], name)["state"]


def _array_key(meta, name, entry):
    return _state(meta, name)[entry]["__array__"]


# each case: (model, mutation(meta, entries) -> entries or bytes, what the message must say)
def _meta_edit(fn):
    def mutate(meta, entries):
        fn(meta)
        return _with_meta(entries, meta)
    return mutate


def _set_object(name):
    return _meta_edit(lambda m: m["root"].__setitem__("__object__", name))


def _set_state(cls, entry, value):
    return _meta_edit(lambda m: _state(m, cls).__setitem__(entry, value))


def _replace_array(cls, entry, array):
    def mutate(meta, entries):
        key = _array_key(meta, cls, entry)
        return {**entries, f"{key}.npy": _npy(array)}
    return mutate


def _new_array(cls, entry, array):
    """Point ``entry`` of the first ``cls`` at a new array entry."""
    def mutate(meta, entries):
        _state(meta, cls)[entry] = {"__array__": "crafted"}
        return {**_with_meta(entries, meta), "crafted.npy": _npy(array)}
    return mutate


def _raw_entry(cls, entry, raw: bytes):
    def mutate(meta, entries):
        return {**entries, f"{_array_key(meta, cls, entry)}.npy": raw}
    return mutate


def _npy_header(descr: str, shape) -> bytes:
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    header = header + " " * (63 - len(header) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def _deep(depth):
    return _set_state("VISH", "max_degree", json.loads('{"__list__": [' * depth + "1" + "]}" * depth))


def _whole(data: bytes):
    return lambda meta, entries: data


def _truncated(meta, entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in entries.items():
            zf.writestr(n, d)
    return buf.getvalue()[: len(buf.getvalue()) // 2]


def _corrupt(meta, entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in entries.items():
            zf.writestr(n, d)
    data = bytearray(buf.getvalue())
    start = data.find(b"a0.npy") + 40  # inside the first array's compressed data
    for i in range(start, start + 16):
        data[i] ^= 0xFF
    return bytes(data)


CASES = {
    # classes outside the registry, however named
    "foreign function": ("vish", _set_object("os:system"), "refusing to build 'os:system'"),
    "foreign class": ("vish", _set_object("subprocess.Popen"), "refusing to build"),
    "dotted path through a module": ("vish", _set_object("spherelab.backend.jit:tempfile._TemporaryFileCloser"),
                                     "refusing to build"),
    "version-1 style module path": ("vish", _set_object("spherelab.models.vish:VISH"), "refusing to build"),
    "private class": ("vish", _set_object("_Encoder"), "refusing to build"),
    "derived class (plan)": ("vish", _set_object("Plan"), "refusing to build 'Plan'"),
    "derived class (harmonics)": ("vish", _set_object("SphericalHarmonics"), "refusing to build"),
    "abstract base": ("vish", _set_object("ZonalKernel"), "refusing to build"),
    "dunder name": ("vish", _set_object("__class__"), "refusing to build"),
    "class name not a string": ("vish", _set_object(["VISH"]), "refusing to build"),
    "nested foreign class": ("vish", _meta_edit(lambda m: _find(m["root"], "Matern").__setitem__(
        "__object__", "builtins:eval")), "root.kernel: refusing to build"),
    # the envelope
    "version 999": ("vish", _meta_edit(lambda m: m.__setitem__("version", 999)), "newer than this spherelab reads"),
    "version 1": ("vish", _meta_edit(lambda m: m.__setitem__("version", 1)), "format version 1, written before"),
    "version as a string": ("vish", _meta_edit(lambda m: m.__setitem__("version", "2")), "format version '2'"),
    "wrong format name": ("vish", _meta_edit(lambda m: m.__setitem__("format", "other")), "not a spherelab model"),
    "no root": ("vish", _meta_edit(lambda m: m.pop("root")), "no root entry"),
    "meta not JSON": ("vish", lambda m, e: _with_meta(e, "{not json"), "__meta__ is not JSON"),
    "meta not UTF-8": ("vish", lambda m, e: _with_meta(e, b"\xff\xfe\x00"), "__meta__ is not JSON"),
    "meta a JSON list": ("vish", lambda m, e: _with_meta(e, "[1, 2]"), "not a spherelab model"),
    "meta as floats": ("vish", lambda m, e: {**e, "__meta__.npy": _npy(np.zeros(4))}, "not a byte string"),
    "meta nested too deep for JSON": ("vish", lambda m, e: _with_meta(e, "[" * 100_000 + "]" * 100_000),
                                      "__meta__ is nested deeper"),
    "values nested too deep": ("vish", _deep(200), "nested deeper than"),
    "no __meta__": ("vish", lambda m, e: {k: v for k, v in e.items() if k != "__meta__.npy"}, "no __meta__"),
    # the value grammar
    "unknown tag": ("vish", _set_state("VISH", "max_degree", {"__pickle__": "x"}), "unknown entry"),
    "bare list": ("vish", _set_state("VISH", "max_degree", [1, 2]), "not a value of the format"),
    # the root: a model, checked before anything is built
    "root an unknown tag": ("vish", _meta_edit(lambda m: m.__setitem__("root", {"__pickle__": "x"})),
                            "expected a saved model"),
    "root a bare list": ("vish", _meta_edit(lambda m: m.__setitem__("root", [1, 2])), "the file holds [1, 2]"),
    "root a number": ("vish", _meta_edit(lambda m: m.__setitem__("root", 5)), "the file holds 5"),
    "root a kernel": ("vish", _meta_edit(lambda m: m.__setitem__("root", _find(m["root"], "Matern"))),
                      "the file holds 'Matern' (load(path, kind=Matern) reads one)"),
    "root a likelihood": ("vish", _meta_edit(lambda m: m.__setitem__("root", _find(m["root"], "Gaussian"))),
                          "the file holds 'Gaussian'"),
    "reference to nothing": ("vish", _set_state("VISH", "kernel", {"__ref__": 77}), "a reference to object 77"),
    "reference to itself": ("vish", _set_state("VISH", "kernel", {"__ref__": 0}), "not (yet) read"),
    "object number reused": ("vish", _meta_edit(lambda m: _find(m["root"], "Gaussian").__setitem__("__id__", 1)),
                             "is not a new integer"),
    "state not an object": ("vish", _meta_edit(lambda m: _find(m["root"], "Matern").__setitem__("state", [1])),
                            "the object's state is not a JSON object"),
    "dict entry not a pair": ("vish", _set_state("VISH", "fit_report", {"__dict__": [["a"]]}), "not a [string, value]"),
    "array key missing": ("vish", _set_state("VISH", "q_mu", {"__array__": "a999"}), "entry 'a999' is missing"),
    # entries of a class
    "entry missing": ("vish", _meta_edit(lambda m: _state(m, "VISH").pop("kernel")), "the entry 'kernel' is missing"),
    "unexpected entry": ("vish", _set_state("VISH", "callback", 1), "unexpected entries ['callback']"),
    "invalid hyper-parameter": ("vish", _set_state("Matern", "lengthscale", -1.0), "lengthscale must be"),
    "NaN hyper-parameter": ("vish", _set_state("Matern", "variance", float("nan")), "variance"),
    "hyper-parameter as text": ("vish", _set_state("Matern", "lengthscale", "1.0"), "lengthscale"),
    "likelihood is a kernel": ("vish", _meta_edit(lambda m: _state(m, "VISH").__setitem__(
        "likelihood", {"__ref__": _find(m["root"], "Matern")["__id__"]})), "likelihood must be"),
    "features of the wrong class": ("vish", _meta_edit(lambda m: _state(m, "VISH").__setitem__(
        "features", {"__ref__": _find(m["root"], "Matern")["__id__"]})), "expected a saved SphericalFeatures"),
    "max_degree 10**9": ("vish", _set_state("HarmonicFeatures", "max_degree", 10**9), "features"),
    "negative max_degree": ("vish", _set_state("HarmonicFeatures", "max_degree", -1), "max_degree"),
    "dimension 10**6": ("vish", _set_state("HarmonicFeatures", "dim", 10**6), "features"),
    "kept index out of range": ("vish", _new_array("HarmonicFeatures", "keep", np.array([0, 5000])), "keep"),
    "kept indices as floats": ("vish", _new_array("HarmonicFeatures", "keep", np.array([0.0, 1.0])), "integer array"),
    "q_mu of the wrong size": ("vish", _new_array("VISH", "q_mu", np.zeros(3)), "q_mu"),
    "statistics of the wrong size": ("vish", _replace_array("Statistics", "G", np.eye(3)), "stats"),
    "statistics with NaN": ("vish", _replace_array("Statistics", "G", np.full((16, 16), np.nan)), "finite"),
    "statistics complex": ("vish", _replace_array("Statistics", "c", np.ones(16, complex)), "real, finite"),
    "statistics not symmetric": ("vish", _replace_array("Statistics", "G", np.triu(np.ones((16, 16)))), "symmetric"),
    "negative row count": ("vish", _set_state("Statistics", "n", -5), "an integer >= 1"),
    "training data NaN": ("vish", _replace_array("VISH", "X", np.full((60, 2), np.nan)), "finite"),
    "training data of the wrong width": ("vish", _replace_array("VISH", "X", np.zeros((60, 5))), "X"),
    "fit report holding an object": ("vish", _set_state("VISH", "fit_report", {
        "__dict__": [["k", {"__ref__": 1}]]}), "fit report"),
    "Bernoulli with 10**9 nodes": ("vish", _meta_edit(lambda m: _find(m["root"], "Gaussian").update(
        {"__object__": "Bernoulli", "state": {"num_points": 10**9}})), "num_points must be at most"),
    "decoupled: inducing points complex": ("orthogonal", _replace_array("InducingPoints", "Z",
                                                                        np.ones((5, 2), complex)), "Z"),
    "decoupled: W of the wrong shape": ("orthogonal", _replace_array("OrthogonalSVGP", "W", np.zeros((4, 7))),
                                        "input_dim"),
    "decoupled: L_u of the wrong shape": ("orthogonal", _replace_array("OrthogonalSVGP", "L_u", np.eye(2)), "L_u"),
    "hvgp: a group of 10**12 elements": ("hvgp", _meta_edit(lambda m: _find(m["root"], "Reflection").update(
        {"__object__": "Rotation", "state": {"dim": 2, "T": 10**12, "plane": {"__tuple__": [0, 1]}}})), "sizes"),
    "hvgp: block sizes negative": ("hvgp", _set_state("HarmonicSVGP", "sizes", {"__list__": [-1, 3, 3, 3]}), "sizes"),
    "hvgp: reflection basis not orthogonal": ("hvgp", _replace_array("Reflection", "basis", np.ones((2, 2))),
                                              "basis must be an orthogonal"),
    # the arrays' headers
    "object dtype header": ("vish", _raw_entry("Statistics", "c", _npy_header("|O", (3,)) + b"\0" * 24),
                            "numeric arrays"),
    "shape of 10**12 elements": ("vish", _raw_entry("Statistics", "c", _npy_header("<f8", (10**12,)) + b"\0" * 64),
                                 "its header declares"),
    "negative shape": ("vish", _raw_entry("Statistics", "c", _npy_header("<f8", (-3,))), "a negative dimension"),
    "short data": ("vish", _raw_entry("Statistics", "c", _npy_header("<f8", (16,)) + b"\0" * 8), "declares 128 bytes"),
    "bad magic": ("vish", _raw_entry("Statistics", "c", b"NOTNUMPY" + b"\0" * 64), "unreadable"),
    "npy version 9": ("vish", _raw_entry("Statistics", "c", b"\x93NUMPY\x09\x00" + b"\0" * 64), ".npy version (9, 0)"),
    # the archive
    "not a zip": ("vish", _whole(b"just text"), "not a spherelab model file"),
    "empty file": ("vish", _whole(b""), "not a spherelab model file"),
    "truncated zip": ("vish", _truncated, "not a spherelab model file"),
    "corrupt compressed data": ("vish", _corrupt, "unreadable"),
    "entry not .npy": ("vish", lambda m, e: {**e, "evil.txt": b"x"}, "unexpected entry 'evil.txt'"),
    "empty archive": ("vish", lambda m, e: {}, "no __meta__"),
}


def _make(tmp_path, originals, case):
    model, mutate, _ = CASES[case]
    meta, entries = originals[model]
    out = mutate(json.loads(json.dumps(meta)), dict(entries))
    path = tmp_path / "crafted.npz"
    if isinstance(out, bytes):
        path.write_bytes(out)
    else:
        _write(path, out)
    return path


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 50


def test_the_audit_hook_sees_forbidden_events(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("x")
    _audit["on"], _audit["seen"] = True, []
    try:
        os.remove(victim)
    finally:
        _audit["on"] = False
    assert [event for event, _ in _audit["seen"]] == ["os.remove"]


@pytest.mark.parametrize("case", list(CASES))
def test_crafted_file_is_refused(tmp_path, originals, case):
    path = _make(tmp_path, originals, case)
    with pytest.raises(sl.FormatError) as err:
        audited_load(path)
    assert CASES[case][2] in str(err.value), str(err.value)
    assert str(path.name) in str(err.value) or "crafted" in str(err.value)


def test_a_decompression_bomb_is_refused_before_it_inflates(tmp_path, originals, monkeypatch):
    """An entry declaring 256 MB (a 256 KB file) against a 64 MB limit: refused from the directory."""
    meta, entries = originals["vish"]
    key = _array_key(meta, "Statistics", "c")
    path = tmp_path / "bomb.npz"
    _write(path, {**entries, f"{key}.npy": _npy_header("<f8", (2**25,)) + bytes(2**28)})
    assert path.stat().st_size < 2**20
    monkeypatch.setenv("SPHERELAB_MAX_MEMORY", "64M")
    with pytest.raises(sl.FormatError, match="declare .* MiB uncompressed, more than"):
        audited_load(path)


def test_the_registry_names_classes_of_spherelab_only():
    from spherelab.persistence import REGISTRY

    for name, module in REGISTRY.items():
        cls = vars(__import__(module, fromlist=[name]))[name]
        assert cls.__name__ == name and cls.__module__ == module
        assert issubclass(cls, sl._state.Saveable)


# ---- saving -------------------------------------------------------------------------------------
def test_save_is_atomic(tmp_path, monkeypatch):
    """A save that fails half-way (a full disk, Ctrl-C) leaves the previous file loadable and no
    temporary file behind."""
    path = tmp_path / "m.npz"
    model = _orthogonal()
    model.save(path)
    before = path.read_bytes()

    def interrupted(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["m.npz"]
    monkeypatch.undo()
    for a, b in zip(sl.load(path).predict_f(np.zeros((2, 2))), model.predict_f(np.zeros((2, 2)))):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("state", ["unfitted", "after predictions", "after fit_svi"])
@pytest.mark.parametrize("name", ["vish", "orthogonal", "hvgp"])
def test_save_works_in_every_state(tmp_path, name, state):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (40, 2))
    y = np.sin(2 * X[:, 0])
    model = {"vish": lambda: sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)),
             "orthogonal": lambda: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)),
             "hvgp": lambda: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, G(0.1))}[name]()
    if state == "after predictions":
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            model.fit(X, y, maxiter=3, **({"lift_maxiter": 2} if name == "vish" else {}))
        model.predict_f(X[:3])
    elif state == "after fit_svi":
        model.fit_svi(X, y, iterations=3, batch_size=16)
    path = tmp_path / "m.npz"
    model.save(path, include_data=True)
    loaded = audited_load(path)
    assert type(loaded) is type(model)
    if state != "unfitted":
        for a, b in zip(loaded.predict_f(X[:5]), model.predict_f(X[:5])):
            assert np.array_equal(a, b)
