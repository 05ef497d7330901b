"""The robustness census's cases at the edges of the model-state machinery, written against the public
API only (so the same cases run on any version): files that cost more than they weigh, impossible
fitted state, data files that lie, refits that fail half-way, the machine's load flipping between a
fit's passes, reads racing a fit, ``fork`` during a fit. Each yields ``(label, call, words, check)``
as robustness_census.py classifies them; further groups: values beyond what the arithmetic holds
(_value_cases) and files as an attacker or an accident makes them (_file_cases)."""

from __future__ import annotations

import atexit
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import threading
import time

import numpy as np
import spherelab as sl
from spherelab import kernels as K

G = sl.likelihoods.Gaussian


def _entries(path):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(arrays.pop("__meta__").tobytes()), arrays


def _write(path, meta, arrays):
    np.savez_compressed(path, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return path


def _find(node, name):
    if isinstance(node, dict):
        if node.get("__object__") == name:
            return node
        nodes = node.values()
    elif isinstance(node, list):
        nodes = node
    else:
        return None
    for v in nodes:
        hit = _find(v, name)
        if hit is not None:
            return hit
    return None


def _edit(folder, model, edit):
    path = os.path.join(folder, "valid.npz")
    sl.save(model, path)
    meta, arrays = _entries(path)
    edit(meta, arrays)
    return sl.load(_write(os.path.join(folder, "crafted.npz"), meta, arrays))


def _fit_in_a_thread(model, X, Y, maxiter):
    """Start ``model.fit`` in a thread whose evaluations last 10 ms each; returns (thread, inside:
    an Event set once the fit evaluates, restore: puts the class back)."""
    original = type(model)._collapsed_elbo_and_gradient
    inside = threading.Event()

    def slow(self, *args, **kwargs):
        inside.set()
        time.sleep(0.01)
        return original(self, *args, **kwargs)

    type(model)._collapsed_elbo_and_gradient = slow
    t = threading.Thread(target=lambda: model.fit(X, Y + 0.5, maxiter=maxiter))
    t.start()
    return t, inside, lambda: setattr(type(model), "_collapsed_elbo_and_gradient", original)


def edge_cases(X, Y):
    folder = tempfile.mkdtemp(prefix="census-edges-")
    atexit.register(shutil.rmtree, folder, True)

    def vish():
        return sl.VISH(K.Matern(1.5), 3, G(0.1)).fit(X, Y, maxiter=3, lift_maxiter=2)

    def orth():
        return sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, Y, maxiter=3)

    def stats(meta):
        return _find(meta["root"], "Statistics")["state"]

    def twice(meta, arrays):
        stats(meta)["c"] = dict(stats(meta)["G"])

    def rows(meta, arrays):
        state = meta["root"]["state"]
        arrays[state["X"]["__array__"]] = np.ones((15_000, 2))
        arrays[state["y"]["__array__"]] = np.zeros(15_000)

    def wide(meta, arrays):
        arrays[stats(meta)["c"]["__array__"]] = np.zeros(12_500_000)

    def g_zero(meta, arrays):
        key = stats(meta)["G"]["__array__"]
        arrays[key] = np.zeros_like(arrays[key])

    def c_huge(meta, arrays):
        key = stats(meta)["c"]["__array__"]
        arrays[key] = np.full_like(arrays[key], 1e300)

    def z_far(meta, arrays):
        key = _find(meta["root"], "InducingPoints")["state"]["Z"]["__array__"]
        arrays[key] = np.full_like(arrays[key], 1e200)

    def root(value):
        return lambda meta, arrays: meta.__setitem__("root", value(meta))

    exact = sl.models.ExactGP(K.Matern(1.5), 0.1).fit(X, Y)
    files = [("an array entry named twice", vish, twice, ["twice"]),
             ("an exact GP of 15 000 identical rows (a few KB)", lambda: exact, rows, ["rows", "Cholesky"]),
             ("an entry of the wrong shape (100 MB of zeros)", vish, wide, ["shape"]),
             ("VISH statistics with G = 0", vish, g_zero, ["statistics", "G"]),
             ("VISH statistics with c = 1e300", vish, c_huge, ["statistics", "G"]),
             ("inducing inputs of 1e200", orth, z_far, ["lift", "Z"]),
             ("a root of 5", vish, root(lambda m: 5), ["root"]),
             ("a root that is a kernel", vish, root(lambda m: _find(m["root"], "Matern")), ["root"]),
             ("a root that is a likelihood", vish, root(lambda m: _find(m["root"], "Gaussian")), ["root"])]
    for label, make, edit, words in files:
        yield (f"load: {label}", lambda make=make, edit=edit: _edit(folder, make(), edit), words,
               lambda r: False)
    yield from _data_cases(folder)
    yield from _state_cases(X, Y, folder)
    yield from _value_cases(X, Y)
    yield from _file_cases(X, Y, folder)


def _yacht(root, table=None, train="0\n1\n2\n3\n", test="4\n5\n"):
    os.makedirs(os.path.join(root, "yacht", "original"), exist_ok=True)
    with open(os.path.join(root, "yacht", "yacht.csv"), "w") as fh:
        fh.write("a,b,c,d,e,f,y\n" + (table or "1,2,3,4,5,6,7\n" * 8))
    for kind, text in (("train", train), ("test", test)):
        with open(os.path.join(root, "yacht", "original", f"index_{kind}_0.txt"), "w") as fh:
            fh.write(text)
    return root


def _data_cases(folder):
    def load(**files):
        root = _yacht(tempfile.mkdtemp(dir=folder), **files)
        return sl.datasets.load_uci("yacht", 0, data_dir_=root)

    for label, files in {"a NaN in the table": {"table": "1,2,3,4,5,6,nan\n" * 8},
                         "rows of 6 numbers for 7 columns": {"table": "1,2,3,4,5,6\n" * 8},
                         "overlapping training and test rows": {"test": "3\n4\n"},
                         "a negative split index": {"train": "0\n-1\n"},
                         "an empty split": {"train": ""}}.items():
        yield f"data: {label}", (lambda files=files: load(**files)), ["yacht"], lambda r: False

    def fifo():
        root = _yacht(tempfile.mkdtemp(dir=folder))
        csv = os.path.join(root, "yacht", "yacht.csv")
        os.remove(csv)
        os.mkfifo(csv)
        return sl.datasets.load_uci("yacht", 0, data_dir_=root)

    if hasattr(os, "mkfifo"):
        yield "data: a named pipe as the table", fifo, ["yacht", "pipe"], lambda r: False
    yield "data: split=True", lambda: sl.datasets.load("yacht", True), ["split"], lambda r: False


def _state_cases(X, Y, folder):
    def refit():  # an invalid refit must leave the estimator predicting as before
        from spherelab.estimators import VISHRegressor

        est = VISHRegressor(max_degree=2, maxiter=5).fit(X, Y)
        before = est.predict(X[:5])
        est.set_params(noise=-1.0)
        try:
            est.fit(X * 40 + 7, Y * 30 - 5)
        except ValueError:
            pass
        return np.array_equal(est.predict(X[:5]), before)

    yield "estimator: a refit refused half-way keeps the old scaling", refit, [], bool

    def vector():
        m = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, Y, maxiter=3)
        before = m.predict_f(X[:5])[0]
        try:
            m.set_parameter_vector(m.parameter_vector()[:-1] + 0.1)
        except ValueError:
            pass
        return np.array_equal(m.predict_f(X[:5])[0], before)

    yield "set_parameter_vector of the wrong length writes nothing", vector, [], bool

    def flipping():
        from spherelab import threads

        previous = threads.machine_busy
        sl.set_threads("auto")
        out = []
        try:
            for period in (1, 2, 3):  # the passes read the load a different number of times each
                count = [0]

                def flip(count=count, period=period):
                    count[0] += 1
                    return (count[0] // period) % 2 == 1

                threads.machine_busy = flip
                m = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1))
                Xb = np.tile(X, (50, 1)) + 0.01 * np.arange(3000)[:, None] / 3000
                out.append(m.fit(Xb, np.tile(Y, 50), maxiter=3).predict_f(X[:5]))
        finally:
            threads.machine_busy = previous
            sl.set_threads(1)
        return out

    yield "a decoupled fit while the machine's load flips between passes", flipping, [], \
        lambda r: all(np.all(np.isfinite(a)) for pair in r for a in pair)

    def racing(read):
        model = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, Y, maxiter=3)
        t, inside, restore = _fit_in_a_thread(model, X, Y, 15)
        try:
            inside.wait(30)
            got = read(model)
            t.join(60)
        finally:
            restore()
        return np.array_equal(got.predict_f(X[:5])[0], model.predict_f(X[:5])[0])

    import copy

    def saved(m):
        path = os.path.join(folder, "racing.npz")
        sl.save(m, path)
        return sl.load(path)

    for label, read in (("save", saved), ("copy.deepcopy", copy.deepcopy)):
        yield f"{label} during a fit captures the fitted model", (lambda read=read: racing(read)), [], bool

    def forked():
        if "fork" not in mp.get_all_start_methods():
            return True
        model = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, Y, maxiter=3)
        before = model.predict_f(X[:5])[0]
        t, inside, restore = _fit_in_a_thread(model, X, Y, 20)
        try:
            inside.wait(30)
            pid = os.fork()
            if pid == 0:
                ok = False
                try:
                    ok = np.array_equal(model.predict_f(X[:5])[0], before)
                finally:
                    os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            t.join(60)
        finally:
            restore()
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

    yield "fork during a fit: the child predicts as before the fit", forked, [], bool


def _value_cases(X, Y):
    """Blocks that lie about their shape, inputs far beyond the lift, columns constant up to
    rounding, targets without noise."""
    try:
        import dask
        import dask.array as da
    except ImportError:
        return

    def liar(rows, cols):  # a hand-built block whose task returns another shape than declared
        half = X.shape[0] // 2
        late = da.from_delayed(dask.delayed(lambda: X[half:half + rows, :cols])(), shape=(X.shape[0] - half, X.shape[1]),
                               dtype=float)
        return da.concatenate([da.from_array(X[:half], chunks=half), late])

    for label, rows, cols in (("fewer rows", 3, X.shape[1]), ("fewer columns", X.shape[0], 1)):
        yield (f"dask: a block holding {label} than its chunks declare (fit)",
               lambda rows=rows, cols=cols: sl.VISH(K.Matern(1.5), 2, G(0.1)).fit(liar(rows, cols), Y, maxiter=2),
               ["declare"], lambda r: False)

    def lying_prediction():
        model = sl.VISH(K.Matern(1.5), 2, G(0.1)).fit(X, Y, optimize=False)
        return model.predict_f(liar(3, X.shape[1]))[0].compute()

    yield "dask: predictions over a block holding fewer rows than declared", lying_prediction, ["declare"], \
        lambda r: False

    def far(model):
        return lambda: model.predict_f(X * 1e300)

    orth = sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:5]), 3, G(0.1)).fit(X, Y, maxiter=3)
    # the message names the caller's X (not the kernel's second argument)
    yield "predictions at inputs of 1e300 (inducing points)", far(orth), ["lift [X "], lambda r: False

    def rounding_column():
        from spherelab.estimators import InducingPointRegressor

        Xc = np.c_[X, np.where(np.arange(X.shape[0]) % 2, 0.1 * 3, 0.3)]  # equal up to the last bit
        est = InducingPointRegressor(num_inducing=6, maxiter=5).fit(Xc, Y)
        return est.predict(Xc[:5] + 1.0, return_std=True)[1]

    yield "estimator: a column constant up to rounding", rounding_column, [], \
        lambda sd: bool(np.all(np.isfinite(sd)) and sd.max() < 1e3)

    def noise_free():
        model = sl.models.NeighbourResidual(sl.VISH(K.Matern(1.5), 3, G(0.1)), 16, subsample=40)
        model.fit(X, np.sin(3 * X[:, 0]))
        return model.predict_y(np.random.default_rng(1).normal(size=(200, X.shape[1])))

    yield "neighbours' correction of noise-free targets", noise_free, [], \
        lambda r: all(np.all(np.isfinite(a)) for a in r) and bool(np.all(r[1] > 0))


def _file_cases(X, Y, folder):
    """Model files and data files as an attacker or an accident makes them, a failed fit then a
    refit, a user's own attribute, estimators read while they refit."""
    import zipfile

    def path(name):
        return os.path.join(folder, name)

    vish = sl.VISH(K.Matern(1.5), 2, G(0.1)).fit(X, Y, optimize=False)

    def meta_bytes(text: bytes):
        def build():
            target = path("bomb.npz")
            np.savez(target, __meta__=np.frombuffer(text, dtype=np.uint8))
            return sl.load(target)
        return build

    # a few KB compressed: 3 million values, or lists nested 100 000 deep
    yield ("load: a model file whose JSON holds 3 million numbers",
           meta_bytes(b'{"format": "spherelab", "root": [' + b"0," * 3_000_000 + b"0]}"), ["values"], lambda r: False)
    yield ("load: a model file whose JSON nests lists 100 000 deep",
           meta_bytes(b'{"root": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), ["nested"], lambda r: False)

    def special(make):
        def build():
            target = path(f"special-{make.__name__}")
            if os.path.lexists(target):
                os.remove(target)
            make(target)
            return sl.load(target)
        return build

    def fifo(target):
        os.mkfifo(target)

    def dev_zero(target):
        os.symlink("/dev/zero", target)

    if hasattr(os, "mkfifo"):
        yield "load: a named pipe as the model path", special(fifo), ["regular file"], lambda r: False
    if os.path.exists("/dev/zero"):
        yield "load: a link to /dev/zero as the model path", special(dev_zero), ["regular file"], lambda r: False

    def encrypted():
        target = path("encrypted.npz")
        vish.save(target)
        data = bytearray(open(target, "rb").read())
        for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the "encrypted" flag bit
            at = data.find(signature)
            while at >= 0:
                data[at + offset] |= 1
                at = data.find(signature, at + 4)
        open(target, "wb").write(bytes(data))
        with zipfile.ZipFile(target) as z:
            assert z.infolist()[0].flag_bits & 1
        return sl.load(target)

    yield "load: a model file with encrypted entries", encrypted, ["encrypted", "unreadable"], lambda r: False

    def exact_refit():
        model = sl.models.ExactGP(K.Matern(1.5), 0.1)
        try:
            model.fit(X, np.where(np.arange(len(Y)) == 3, np.nan, Y))
        except ValueError:
            pass
        model.fit(X, Y)  # the data fixed, the cell run again
        target = path("exact.npz")
        model.save(target)
        return np.array_equal(sl.load(target).predict_f(X[:5])[0], model.predict_f(X[:5])[0])

    yield "ExactGP: a fit refused (NaN in y), fitted again, saved and loaded", exact_refit, [], bool

    def own_attribute():
        model = sl.VISH(K.Matern(1.5), 2, G(0.1))
        model.note = "run 3"
        model.fit(X, Y, maxiter=3)
        return model.note == "run 3"

    yield "a user's own attribute on a model, then a fit", own_attribute, [], bool

    def data(edit):
        root = _yacht(tempfile.mkdtemp(dir=folder), table="1,2,3,4,5,6,7\n" * 308)
        edit(os.path.join(root, "yacht"))
        return sl.datasets.load_uci("yacht", 0, data_dir_=root)

    yield ("data: a world-writable table", lambda: data(lambda d: os.chmod(os.path.join(d, "yacht.csv"), 0o666)),
           ["writ"], lambda r: False)
    yield ("data: a world-writable set folder", lambda: data(lambda d: os.chmod(d, 0o777)), ["writ"],
           lambda r: False)
    secret = "census-secret-value-" + "7" * 12

    def echo():
        with open(path("secret.txt"), "w") as fh:
            fh.write(f"SECRET={secret}\n" * 40)

        def link(d):
            os.remove(os.path.join(d, "yacht.csv"))
            os.symlink(path("secret.txt"), os.path.join(d, "yacht.csv"))
        try:
            data(link)
        except (ValueError, TypeError, OSError) as err:
            return secret not in str(err)
        return False

    yield "data: a table linked to another file: the error shows none of its bytes", echo, [], bool
    yield "data: load(['energy'])", lambda: sl.datasets.load(["energy"]), ["name"], lambda r: False
    yield ("data: a stand-in's split=10**6", lambda: sl.datasets.load("energy", 10 ** 6, stand_in="allow"),
           ["split"], lambda r: False)

    def racing_estimator():
        from spherelab.estimators import VISHRegressor

        est = VISHRegressor(max_degree=2, maxiter=5).fit(X, Y)
        olds, news, seen, stop = [est.predict(X[:5])], [], [], threading.Event()

        def read():
            while not stop.is_set():
                seen.append(est.predict(X[:5]))

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for k in range(3):
                est.fit(X * (2 + k), Y * (3 + k))
                news.append(est.predict(X[:5]))
        finally:
            stop.set()
            reader.join(60)
        known = olds + news
        return bool(seen) and all(any(np.array_equal(s, k) for k in known) for s in seen)

    yield "estimator: predictions from a thread during three refits are each before or after one", \
        racing_estimator, [], bool
