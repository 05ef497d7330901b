"""A census of bad and unusual calls over the public API, each classified: correct answer, clear
error (ValueError/TypeError/MemoryError/RuntimeError naming the argument), obscure error, silent
wrong answer, or hang (20 s alarm). Runs against any version of spherelab on ``PYTHONPATH`` (it
uses only the API common to all), so a change's before/after counts come from one script:

    PYTHONPATH=<tree>/lab python benchmarks/robustness_census.py
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
    print("\nnot correct and not a clear error:")
    for outcome, name in lines:
        if outcome not in ("correct", "clear error"):
            print(f"  {outcome}: {name}")


if __name__ == "__main__":
    main()
