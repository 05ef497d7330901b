"""Save and load: every model round-trips through the documented .npz + JSON format with
identical predictions (also in a fresh process), without the training data by default, with
shared parts still shared and hyper-parameters validated again; bad files are refused clearly."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import spherelab as sl
from conftest import hvgp_data, sine_data
from spherelab import activations as A
from spherelab import kernels as K

G = sl.likelihoods.Gaussian


MODELS = {
    "vish": lambda X: sl.VISH(K.Matern(1.5, 1.0), 3, G(0.1)),
    "vish-features-prior": lambda X: sl.VISH(K.Matern(2.5, 0.8), 3, G(0.1), prior="features"),
    "vish-phases": lambda X: sl.VISH(K.ArcCosine(1), None, G(0.1),
                                     features=sl.PhaseTruncatedHarmonics(3, 3, 2, seed=0)),
    "orthogonal": lambda X: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)),
    "orthogonal-harmonic": lambda X: sl.OrthogonalSVGP(K.Matern(1.5), sl.HarmonicFeatures(2), 3, G(0.1)),
    "activated": lambda X: sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(A.ReLU(), 3, 3), G(0.1)),
    "hvgp": lambda X: sl.HarmonicSVGP(K.Matern(2.5, 0.9), sl.groups.Reflection(2), 3, G(0.1)),
    "exact": lambda X: sl.models.ExactGP(K.Matern(1.5), 0.1),
}


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_predicts_identically(name, tmp_path):
    X, y = hvgp_data(np.random.default_rng(0)) if name == "hvgp" else sine_data()
    model = MODELS[name](X)
    if name == "exact":
        model.fit(X, y)
    else:
        with sl.models.capped():  # a deliberately short fit: its limit is meant
            model.fit(X, y, maxiter=5)
    path = tmp_path / "model.npz"
    sl.save(model, path)
    loaded = sl.load(path)
    assert type(loaded) is type(model)
    Xs = X[:7] + 0.05
    for a, b in zip(loaded.predict_f(Xs), model.predict_f(Xs)):
        assert np.array_equal(a, b)
    if hasattr(model, "get_params"):
        for key, value in model.get_params().items():
            assert np.array_equal(np.asarray(loaded.get_params()[key], dtype=float), np.asarray(value, dtype=float))


def test_training_data_only_when_asked(tmp_path):
    X, y = sine_data(2_000)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.VISH(K.Matern(1.5), 3, G(0.1)).fit(X, y, maxiter=5, lift_maxiter=3)
    small, full = tmp_path / "small.npz", tmp_path / "full.npz"
    model.save(small)
    model.save(full, include_data=True)
    assert small.stat().st_size < 0.25 * full.stat().st_size
    loaded = sl.load(small)
    assert loaded._X is None
    assert np.isclose(loaded.elbo(), model.elbo(), rtol=1e-12)  # VISH's statistics are saved
    with pytest.raises(ValueError, match="no training data.*include_data"):
        loaded.elbo_gradient()
    assert np.array_equal(sl.load(full)._X, X)


def test_shared_parts_stay_shared_and_parameters_are_validated(tmp_path):
    X, y = sine_data()
    model = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 4, G(0.1)).fit(X, y, optimize=False)
    path = tmp_path / "m.npz"
    model.save(path)
    loaded = sl.load(path)
    loaded.kernel.lengthscale = 0.3  # the model follows its kernel after loading, as before saving
    model.kernel.lengthscale = 0.3
    assert np.allclose(loaded.predict_f(X[:3])[0], model.predict_f(X[:3])[0], rtol=1e-12)
    # a hand-edited file with an invalid hyper-parameter is refused by the same check as an assignment
    with zipfile.ZipFile(path) as zf:
        meta = json.loads(np.load(path)["__meta__"].tobytes())
        entries = {n: zf.read(n) for n in zf.namelist()}
    text = json.dumps(meta).replace('"lengthscale": 1.0', '"lengthscale": -1.0')
    assert text != json.dumps(meta)
    bad = tmp_path / "bad.npz"
    arrays = {n[:-4]: np.load(path)[n[:-4]] for n in entries}
    arrays["__meta__"] = np.frombuffer(text.encode(), dtype=np.uint8)
    np.savez(bad, **arrays)
    with pytest.raises(sl.FormatError, match="root.kernel: cannot rebuild a Matern.*lengthscale must be a finite "
                                             "number > 0"):
        sl.load(bad)


def test_bad_files_are_refused(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a spherelab model file"):
        sl.load(junk)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.ones(3))
    with pytest.raises(ValueError, match="no __meta__"):
        sl.load(other)
    evil = tmp_path / "evil.npz"
    meta = {"format": "spherelab-model", "version": 1, "root": {"__object__": "os:system", "__id__": 0, "state": {}}}
    np.savez(evil, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="format version 1, written before"):
        sl.load(evil)
    meta["version"] = 2
    np.savez(evil, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    with pytest.raises(sl.FormatError, match="refusing to build 'os:system'"):
        sl.load(evil)
    newer = tmp_path / "newer.npz"
    meta = {"format": "spherelab-model", "version": 99, "root": None}
    np.savez(newer, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="newer than this spherelab reads"):
        sl.load(newer)


def test_unsaveable_parts_are_named(tmp_path):
    """A part whose class is not in the registry (a user's subclass) is named; attributes outside a
    class's declared state are not saved at all."""

    class MyMatern(K.Matern):
        pass

    model = sl.VISH(MyMatern(1.5), 2, G(0.1))
    with pytest.raises(TypeError, match=r"VISH\.kernel: a .*MyMatern is not a class a model file may hold"):
        model.save(tmp_path / "m.npz")
    model = sl.VISH(K.Matern(1.5), 2, G(0.1))
    model.callback = lambda: None
    model.save(tmp_path / "m.npz")
    assert not hasattr(sl.load(tmp_path / "m.npz"), "callback")


@pytest.mark.slow
def test_a_fresh_process_predicts_identically(tmp_path):
    X, y = sine_data(200)
    with sl.models.capped():  # a deliberately short fit: its limit is meant
        model = sl.VISH(K.Matern(1.5, 1.0), 4, G(0.1)).fit(X, y, maxiter=10, lift_maxiter=5)
    path = tmp_path / "model.npz"
    model.save(path)
    np.save(tmp_path / "Xs.npy", X[:20])
    code = ("import numpy as np, spherelab as sl, sys; m = sl.load(sys.argv[1]); "
            "np.save(sys.argv[2], np.stack(m.predict_f(np.load(sys.argv[3]))))")
    out = tmp_path / "pred.npy"
    subprocess.run([sys.executable, "-c", code, str(path), str(out), str(tmp_path / "Xs.npy")], check=True, timeout=240)
    assert np.array_equal(np.load(out), np.stack(model.predict_f(X[:20])))


def test_a_folder_that_cannot_be_written_names_the_target(tmp_path):
    model = sl.VISH(sl.kernels.Matern(1.5, 1.0), 2)
    target = tmp_path / "missing" / "model.npz"
    with pytest.raises(OSError, match="cannot save .*model.npz: its folder .*missing") as err:
        sl.save(model, target)
    assert ".tmp" not in str(err.value)


def test_a_save_interrupted_at_any_line_leaves_no_temporary_file(tmp_path):
    """A Ctrl-C at every line of writing the file: the target is the old file or the new one,
    whole, and no temporary file stays beside it."""
    import os
    import sys

    from spherelab import persistence

    X, y = np.linspace(-1, 1, 20)[:, None], np.sin(np.linspace(-1, 1, 20))
    model = sl.models.ExactGP(sl.kernels.Matern(1.5, 1.0), 0.1).fit(X, y)
    target = tmp_path / "m.npz"
    code = persistence._write_atomically.__code__

    def run(k):
        seen = [0]

        def local(frame, event, arg):
            if event == "line":
                seen[0] += 1
                if seen[0] - 1 == k:
                    raise KeyboardInterrupt
            return local

        sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
        try:
            sl.save(model, target)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        return seen[0]

    lines = run(-1)
    assert lines > 5
    for k in range(lines):
        run(k)
        assert sorted(os.listdir(tmp_path)) in ([], ["m.npz"]), k
        if target.exists():
            np.testing.assert_array_equal(sl.load(target).predict_y(X[:3])[0], model.predict_y(X[:3])[0])
