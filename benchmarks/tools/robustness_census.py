"""A census of bad and unusual calls over the public API, each classified: correct answer, clear
error (ValueError/TypeError/MemoryError/RuntimeError naming the argument), obscure error, silent
wrong answer, or hang (20 s alarm). Runs against any version of spherelab on ``PYTHONPATH`` (it
uses only the API common to all), so a change's before/after counts come from one script:

    PYTHONPATH=<tree>/lab python benchmarks/tools/robustness_census.py
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import warnings
from collections import Counter

import numpy as np
import spherelab as sl
from spherelab import kernels as K

CLEAR = (ValueError, TypeError, MemoryError, RuntimeError)
rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (60, 2))
Y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(60)


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


def classify(call, names, check=None):
    """call() -> result; names: words a clear error mentions; check(result) -> True if right."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except Hang:
        return "hang"
    except CLEAR as exc:
        return "clear error" if any(n.lower() in str(exc).lower() for n in names) else "obscure error"
    except Exception:  # noqa: BLE001
        return "obscure error"
    finally:
        signal.alarm(0)
    try:
        ok = check(result) if check is not None else True
    except Exception:  # noqa: BLE001
        ok = False
    return "correct" if ok else "silent wrong"


def finite(r):
    return all(np.all(np.isfinite(a)) for a in (r if isinstance(r, tuple) else (r,)))


def kernels():
    return {"Matern": lambda: K.Matern(1.5, 0.7), "ArcCosine": lambda: K.ArcCosine(1),
            "IntrinsicMatern": lambda: K.IntrinsicMatern(3, 1.5), "Parity": lambda: K.Parity(K.Matern(2.5))}


def cases():
    bad = [-1.0, 0.0, np.nan, np.inf, 1j, "x", [], [[1.0]], -1e-300]
    for kname, make in kernels().items():
        for attr in ("variance", "bias", "input_scale", "lengthscale"):
            if attr not in make().hyperparameters:
                continue
            for v in bad:
                if attr == "bias" and v == 0.0:
                    continue  # bias 0 is valid

                def call(make=make, attr=attr, v=v):
                    k = make()
                    setattr(k, attr, v)
                    return k.K(X[:5])

                yield f"{kname}.{attr} = {v!r}", call, [attr], lambda r: False  # any answer is wrong
    for v in (-1.0, 0.0, np.nan, 1e-320):
        def call(v=v):
            m = sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, Y, optimize=False)
            m.likelihood.variance = v
            return m.predict_y(X[:5]) if hasattr(m, "predict_y") else m.elbo()

        yield f"likelihood.variance = {v!r}", call, ["variance", "noise"], lambda r: False
    models = {"VISH": lambda: sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)),
              "OrthogonalSVGP": lambda: sl.OrthogonalSVGP(K.Matern(1.5), sl.InducingPoints(X[:4]), 3,
                                                          sl.likelihoods.Gaussian(0.1))}
    targets = {"zeros": np.zeros(60), "y * 1e-300": Y * 1e-300, "one target 1e300": np.where(np.arange(60) == 3, 1e300, Y)}
    for mname, make in models.items():
        for tname, y in targets.items():
            def call(make=make, y=y):
                m = make().fit(X, y, maxiter=30)
                return m.elbo(), m.predict_f(X[:5])

            yield f"{mname}.fit(X, {tname})", call, ["y", "floor", "noise"], lambda r: np.isfinite(r[0]) and finite(r[1])
        for dname, Xb in {"complex": X.astype(complex), "bool": X > 0, "object": X.astype(object),
                          "X * 1e200": X * 1e200}.items():
            def call(make=make, Xb=Xb):
                return make().fit(Xb, Y, maxiter=5).predict_f(X[:3])

            ok = (lambda r: finite(r)) if dname == "object" else (lambda r: False)
            yield f"{mname}.fit({dname} X)", call, ["X"], ok
        fitted = make().fit(X, Y, optimize=False)
        for pname, Xp in {"3 columns": np.ones((4, 3)), "(0, 2)": np.ones((0, 2)), "1-d": np.ones(2),
                          "3-d": np.ones((2, 2, 2)), "NaN": np.full((2, 2), np.nan)}.items():
            def call(m=fitted, Xp=Xp):
                return m.predict_f(Xp)

            ok = (lambda r: r[0].shape == (0,)) if pname == "(0, 2)" else (lambda r: False)
            yield f"{mname}.predict_f({pname})", call, ["X"], ok
        for v in (-1.0, np.nan, "x"):
            yield (f"{mname}.set_params(variance={v!r})", lambda m=fitted, v=v: m.set_params(variance=v),
                   ["variance"], lambda r: False)
    yield ("SphericalHarmonics(1000, 3)", lambda: sl.SphericalHarmonics(1000, 3), ["features", "GiB", "max_degree"],
           lambda r: False)
    yield from surface_cases()
    yield from state_cases()
    yield from table_cases()
    yield from edge_cases()


TABLE = "surface: "


def table_cases():
    """Every argument of the user-facing surface at every bad value of its kind (tests/surface.py,
    2026-11-27): 1 400 calls."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    import surface

    for entry, name, bad in surface.cases():
        def call(entry=entry, name=name, bad=bad):
            return entry(**{name: bad})

        yield f"{TABLE}{entry.name}({name}={bad!r:.30})", call, [name, *entry.args[name].words], lambda r: False


def edge_cases():
    """The edges of the model-state machinery (2026-11-27): files that cost more than they weigh,
    impossible fitted state, data files that lie, refits that fail half-way, a load that flips
    between passes, reads racing a fit; and (2026-11-29) JSON that costs more than its bytes,
    pipes, devices and encrypted entries as model files, data trusted file by file, a failed
    fit then a refit, a user's own attributes, estimators read while they refit, Dask blocks
    that lie about their shape, inputs beyond the lift, columns constant up to rounding."""
    from census_edges import edge_cases as cases

    yield from cases(X, Y)


def surface_cases():
    """Functions outside the models (2026-11-26): NaN/inf/complex/out-of-domain arguments."""
    from scipy.special import eval_gegenbauer
    from spherelab import activations as A

    t_calls = {"gegenbauer": lambda t: sl.gegenbauer(3, 1.5, t), "zonal_table": lambda t: sl.zonal_table(4, 3, t),
               "gegenbauer_series": lambda t: sl.gegenbauer_series(np.ones(3), 1.5, t),
               **{f"{a.__class__.__name__}.shape": (lambda t, a=a: a.shape(t))
                  for a in (A.ReLU(), A.Softplus(2.0), A.Swish(1.0), A.Erf(), A.Step(), A.SquaredReLU())},
               **{f"{k}.shape": (lambda t, k=k: kernels()[k]().shape(t)) for k in kernels()}}
    for name, f in t_calls.items():
        for label, t in (("NaN", np.array([0.2, np.nan])), ("inf", np.array([np.inf])), ("complex", np.array([0.5j]))):
            yield f"{name}({label})", (lambda f=f, t=t: f(t)), ["t"], lambda r: False
        if "." in name and name.split(".")[0] in kernels():
            yield f"{name}(1.5)", (lambda f=f: f(np.array([1.5]))), ["t"], lambda r: False  # no cosine is 1.5
    yield ("gegenbauer(3, 1.5, [1.5, -3])", lambda: sl.gegenbauer(3, 1.5, np.array([1.5, -3.0])), ["t"],
           lambda r: np.allclose(r, eval_gegenbauer(3, 1.5, np.array([1.5, -3.0]))))  # a polynomial's value
    for name, f in {"log_num_harmonics(inf, 3)": lambda: sl.log_num_harmonics(np.inf, 3),
                    "log_num_harmonics(2.5, 3)": lambda: sl.log_num_harmonics(2.5, 3),
                    "log_gegenbauer_at_one(nan, 1)": lambda: sl.log_gegenbauer_at_one(np.nan, 1.0),
                    "log_gegenbauer_at_one(3, nan)": lambda: sl.log_gegenbauer_at_one(3, np.nan)}.items():
        yield name, f, ["degree", "n", "alpha"], lambda r: False
    for name, f, words in (
            ("roc_auc with a NaN score", lambda: sl.metrics.roc_auc(np.array([0, 1]), np.array([0.1, np.nan])), ["score"]),
            ("synthetic_regression(noise=nan)", lambda: sl.datasets.synthetic_regression(10, noise=np.nan), ["noise"]),
            ("snelson_like(noise=-1)", lambda: sl.datasets.snelson_like(10, noise=-1.0), ["noise"]),
            ("orthographic_grid(10, nan)", lambda: sl.orthographic_grid(10, np.nan), ["lon0"]),
            ("log_sphere_area(nan)", lambda: sl.log_sphere_area(np.nan), ["k"]),
            ("greedy_directions(-1, 3, 2)",
             lambda: sl.features.greedy_directions(-1, 3, 2, np.random.default_rng(0)), ["ell"])):
        yield name, f, words, lambda r: False


def state_cases():
    """A model's state (2026-11-26): saving and loading, values set after construction, labels,
    estimators, the environment."""
    import atexit
    import json
    import os
    import shutil
    import tempfile
    import zipfile

    folder = tempfile.mkdtemp(prefix="census-")
    atexit.register(shutil.rmtree, folder, True)

    def fitted():
        return sl.VISH(K.Matern(1.5), 3, sl.likelihoods.Gaussian(0.1)).fit(X, Y, maxiter=5, lift_maxiter=2)

    def save_after_predict():
        m = fitted()
        m.predict_f(X[:3])
        sl.save(m, os.path.join(folder, "after-predict.npz"))
        return sl.load(os.path.join(folder, "after-predict.npz")).predict_f(X[:3])

    yield "save after predict_f", save_after_predict, ["save"], finite

    def crafted(mutate):
        path = os.path.join(folder, "valid.npz")
        sl.save(fitted(), path)
        with zipfile.ZipFile(path) as zf:
            entries = {n: zf.read(n) for n in zf.namelist()}
        meta = json.loads(np.load(path)["__meta__"].tobytes())
        mutate(meta)
        out = os.path.join(folder, "crafted.npz")
        arrays = {n[:-4]: np.load(path)[n[:-4]] for n in entries}
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        np.savez(out, **arrays)
        return sl.load(out)

    def set_root(name):
        return lambda m: m["root"].__setitem__("__object__", name)

    for label, mutate in {"a dotted path through a module": set_root("spherelab.backend.jit:tempfile._TemporaryFileCloser"),
                          "a class outside spherelab": set_root("subprocess:Popen"),
                          "version 999": lambda m: m.__setitem__("version", 999)}.items():
        yield f"load a file naming {label}", (lambda mutate=mutate: crafted(mutate)), \
            ["refusing", "spherelab class", "version", "format"], lambda r: False

    def bad_floor():
        lik = sl.likelihoods.Gaussian(0.1)
        lik.floor = -1.0
        return lik.floor

    def bad_exact_noise():
        gp = sl.models.ExactGP(K.Matern(1.5), 0.1).fit(X, Y)
        gp.noise = -1.0
        return gp.predict_y(X[:3])

    yield "Gaussian.floor = -1", bad_floor, ["floor"], lambda r: False
    yield "ExactGP.noise = -1", bad_exact_noise, ["noise"], lambda r: False

    def bool_labels():
        m = sl.ActivatedSVGP(K.ArcCosine(1), sl.ActivatedFeatures(sl.activations.ReLU(), 3, 3),
                             sl.likelihoods.Bernoulli())
        return m.fit(X, Y > 0, maxiter=5).predict_y(X[:3])

    yield "Bernoulli fit with labels {False, True}", bool_labels, ["y"], finite

    def memory(text):
        previous = os.environ.get("SPHERELAB_MAX_MEMORY")
        os.environ["SPHERELAB_MAX_MEMORY"] = text
        try:
            return sl.SphericalHarmonics(5, 3)(sl.sample_sphere(4, 5, rng=0))
        finally:
            if previous is None:
                os.environ.pop("SPHERELAB_MAX_MEMORY")
            else:
                os.environ["SPHERELAB_MAX_MEMORY"] = previous

    for text in ("inf", "-8G", "1e400"):  # a bad value is ignored (with a warning): the call must work
        yield f"SPHERELAB_MAX_MEMORY={text}", (lambda text=text: memory(text)), ["SPHERELAB_MAX_MEMORY"], finite
    try:
        from spherelab.estimators import VISHRegressor
    except ImportError:
        return
    yield ("VISHRegressor.fit on one row", lambda: VISHRegressor(max_degree=2).fit(X[:1], Y[:1]).predict(X[:2]),
           ["sample", "rows"], lambda r: False)


def _predict(model):
    return model.predict_f(X[:5])[0]


def fork_case():
    model = sl.VISH(K.Matern(1.5), 4, sl.likelihoods.Gaussian(0.1))
    with sl.thread_limit(2):
        model.fit(X, Y, maxiter=5)
        sl.SphericalHarmonics(9, 4)(sl.sample_sphere(20_000, 9, rng=rng))
    with mp.get_context("fork").Pool(2) as pool:
        try:
            out = pool.map_async(_predict, [model, model]).get(timeout=30)
        except mp.TimeoutError:
            return "hang"
    return "correct" if all(np.allclose(o, model.predict_f(X[:5])[0]) for o in out) else "silent wrong"


def main():
    counts, lines = Counter(), []
    for name, call, names, check in cases():
        outcome = classify(call, names, check)
        counts[outcome] += 1
        lines.append((outcome, name))
    outcome = fork_case()
    counts[outcome] += 1
    lines.append((outcome, "fork-started Pool after a fit"))
    print(f"spherelab from {sl.__file__}")
    print("\n| outcome | calls |\n| --- | --- |")
    for key in ("correct", "clear error", "obscure error", "silent wrong", "hang"):
        print(f"| {key} | {counts[key]} |")
    print(f"| total | {sum(counts.values())} |")
    # the surface table's calls by function (one line each), the other cases one by one
    by_function: dict[str, Counter] = {}
    singles = []
    for outcome, name in lines:
        if outcome in ("correct", "clear error"):
            continue
        if name.startswith(TABLE):
            by_function.setdefault(name[len(TABLE):].split("(")[0], Counter())[outcome] += 1
        else:
            singles.append(f"  {outcome}: {name}")
    print("\nnot correct and not a clear error:")
    for function, c in by_function.items():
        print(f"  {function}: " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())))
    print("\n".join(singles))


if __name__ == "__main__":
    main()
