"""The walk of the training inputs through a model's ``fit``: which functions of spherelab receive
them, in which modules, and how often the walk climbs back up a layer.

Measured, not read: a profile hook follows the array ``X`` given to ``fit`` and every array of
its column count returned from a call that received one (the validated copy, the lift's
subsample, the chunks of a pass), and records each spherelab function that receives one.

* stops: the distinct functions that receive the inputs, in the order first reached;
* modules: the distinct modules among them;
* layers: a top-level unit of the package (a subpackage or module) sits one above the highest
  unit it imports (deferred imports included; the import graph has no cycle, tests/test_imports.py);
* climbs: stops first reached from a caller in a lower layer (a callback: a pass calling back into
  the bound or the model that defined its columns);
* returns: stops in a module the walk had already left.

    PYTHONPATH=lab python benchmarks/tools/walk.py
"""

from __future__ import annotations

import ast
import sys
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
import spherelab

ROOT = Path(spherelab.__file__).parent


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@lru_cache(maxsize=None)  # the profile hook asks it at every call of every thread
def _module_of(path: str) -> str | None:
    p = Path(path)
    try:
        rel = p.relative_to(ROOT.parent)
    except ValueError:
        return None
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def _unit_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        module = _module_of(str(path))
        unit = _unit(module)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                found.update(_unit(t) for t in names if t.startswith("spherelab.") and _unit(t) != unit)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found.update(_unit(t) for t in names if t.startswith("spherelab.") and _unit(t) != unit)
    return graph


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of the unit graph (a cycle of imports is one component)."""
    reach = {u: set() for u in graph}
    for u in graph:
        stack = list(graph[u])
        while stack:
            v = stack.pop()
            if v and v not in reach[u]:
                reach[u].add(v)
                stack.extend(graph.get(v, ()))
    out, seen = [], set()
    for u in graph:
        if u and u not in seen:
            comp = {u} | {v for v in reach[u] if u in reach.get(v, ())}
            seen |= comp
            out.append(comp)
    return out


def layers() -> dict[str, int]:
    """Each top-level unit's layer: 0 for a unit importing no other, else one above its highest
    import; the units of an import cycle share one layer (:func:`cycles` names them)."""
    graph = _unit_imports()
    comps = _components(graph)
    of = {u: i for i, c in enumerate(comps) for u in c}
    out: dict[int, int] = {}

    def layer(i):
        if i not in out:
            out[i] = -1  # (the condensed graph has no cycle)
            below = {of[v] for u in comps[i] for v in graph.get(u, ()) if v in of and of[v] != i}
            out[i] = 1 + max((layer(j) for j in below), default=-1)
        return out[i]

    return {u: layer(of[u]) for u in of}


def cycles() -> list[set[str]]:
    """The units that import each other (none since issue 31: tests/test_imports.py)."""
    return [c for c in _components(_unit_imports()) if len(c) > 1]


def _arrays(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(v)


#: modules whose decorators wrap the models' methods: their wrappers are transparent (the caller of a
#: decorated method is whoever called the wrapper)
DECORATORS = ("spherelab.threads", "spherelab.concurrency", "spherelab.transaction", "spherelab.distributed")


def _caller(frame) -> str | None:
    up = frame.f_back
    while up is not None:
        module = _module_of(up.f_code.co_filename)
        if not (module in DECORATORS and "<locals>" in up.f_code.co_qualname):
            return module
        up = up.f_back
    return None


def walk(fit, X: np.ndarray) -> list[dict]:
    """Run ``fit()`` (which must receive ``X``) and return its stops: dicts with ``function``,
    ``module``, ``caller`` (the caller's module) in the order first reached."""
    D = X.shape[1]
    tracked: list[np.ndarray] = [X]
    stops: dict[tuple, dict] = {}
    receiving: set[int] = set()

    def holds(a: np.ndarray) -> bool:
        return a.ndim == 2 and a.shape[1] == D and any(a is t or np.shares_memory(a, t) for t in tracked)

    def hook(frame, event, arg):
        module = _module_of(frame.f_code.co_filename)
        if module is None or not module.startswith("spherelab"):
            return
        if event == "call":
            values = [frame.f_locals[n] for n in frame.f_code.co_varnames[: frame.f_code.co_argcount
                                                                              + frame.f_code.co_kwonlyargcount]
                      if n in frame.f_locals]
            if any(holds(a) for v in values for a in _arrays(v)):
                receiving.add(id(frame))
                key = (module, frame.f_code.co_qualname)
                if key not in stops:
                    stops[key] = {"function": frame.f_code.co_qualname, "module": module, "caller": _caller(frame)}
        elif event == "return" and id(frame) in receiving:
            receiving.discard(id(frame))
            for a in _arrays(arg):
                if a.ndim == 2 and a.shape[1] == D and not any(a is t for t in tracked):
                    tracked.append(a)

    sys.setprofile(hook)
    threading.setprofile(hook)  # the pass's shares run on threads of their own
    try:
        fit()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return list(stops.values())


def climbs_up(stop: dict, lay: dict[str, int]) -> bool:
    """Whether a stop was first reached from a spherelab caller in a lower layer."""
    caller = stop["caller"]
    return bool(caller and caller.startswith("spherelab")
                and lay.get(_unit(stop["module"]), 0) > lay.get(_unit(caller), 0))


def summary(stops: list[dict]) -> dict[str, int]:
    """Stops, modules, climbs and returns of a walk (module docstring)."""
    lay = layers()
    climbs = sum(1 for s in stops if climbs_up(s, lay))
    returns, left, previous = 0, set(), None
    for s in stops:
        if s["module"] != previous:
            if s["module"] in left:
                returns += 1
            if previous is not None:
                left.add(previous)
            previous = s["module"]
    return {"stops": len(stops), "modules": len({s["module"] for s in stops}), "climbs": climbs, "returns": returns}


def example_fits():
    import spherelab as sl

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(300)
    K, G = sl.kernels, sl.likelihoods.Gaussian
    return X, {
        "VISH.fit": sl.models.capped()(lambda: sl.VISH(K.Matern(1.5, 1.0), 4, G(0.1)).fit(X, y, maxiter=3, lift_maxiter=3)),
        "OrthogonalSVGP.fit": sl.models.capped()(lambda: sl.OrthogonalSVGP(K.Matern(1.5, 1.0), sl.InducingPoints(X[:8] + 0.01), 4,
                                                        G(0.1)).fit(X, y, maxiter=3)),
    }


def evaluation_in_a_fit(device: str = "cpu") -> list[dict]:
    """The walk of one whole bound-and-gradient evaluation (forward and backward) of the decoupled
    model inside a fit on ``device`` (``"sim"``: the rows held on the simulated device, where the
    walk ends when the held rows take over): the decoupled statistics path (the fit's pass chosen
    on entering ``holding_rows``, as ``SparseModel.fit`` enters it, outside the walk)."""
    import spherelab as sl

    X, _ = example_fits()
    if device != "cpu":  # the simulator runs a Python thread per CUDA thread, each call traced here
        X = X[:40]
    y = np.sin(2 * X[:, 0])
    model = sl.OrthogonalSVGP(sl.kernels.Matern(1.5, 1.0), sl.InducingPoints(X[:8] + 0.01), 4,
                              sl.likelihoods.Gaussian(0.1), device=device)
    with sl.models.capped():  # (in the simulator only the initial point: its kernels run slowly)
        model.fit(X, y, maxiter=3, optimize=device == "cpu")
    theta = model.parameter_vector()
    with model.holding_rows(X, y):
        return walk(lambda: model.objective(theta, X, y), X)


def statistics_path(stops: list[dict]) -> list[dict]:
    """The forward statistics pass within an evaluation's walk: from the model's choice of pass
    (``StatisticsPath.rows_pass``) to the first stop of the backward pass (the rows' gradients, or
    the lift's backward sums)."""
    names = [s["function"] for s in stops]
    start = names.index("StatisticsPath.rows_pass")
    end = next((i for i, s in enumerate(stops) if i > start and
                ("rows.gradients" in s["module"] or "lift_backward" in s["function"])), len(stops))
    return stops[start:end]


def main() -> None:
    X, fits = example_fits()
    for c in cycles():
        print(f"an import cycle through {len(c)} units, one layer here: {', '.join(sorted(c))}")
    print("| fit | stops | modules | climbs | returns |")
    print("| --- | --- | --- | --- | --- |")
    walks = {}
    for name, fit in fits.items():
        walks[name] = walk(fit, X)
        s = summary(walks[name])
        print(f"| {name} | {s['stops']} | {s['modules']} | {s['climbs']} | {s['returns']} |")
    name = "OrthogonalSVGP, one evaluation in a fit"
    walks[name] = evaluation_in_a_fit()
    s = summary(walks[name])
    print(f"| {name} | {s['stops']} | {s['modules']} | {s['climbs']} | {s['returns']} |")
    s = summary(statistics_path(walks[name]))
    print(f"| its statistics path (the forward pass) | {s['stops']} | {s['modules']} | {s['climbs']} | {s['returns']} |")
    from spherelab.backend.ops import simulator_enabled

    if simulator_enabled():  # NUMBA_ENABLE_CUDASIM=1: the device's branch, its rows held there
        name = "OrthogonalSVGP, one evaluation in a fit on the simulated device"
        walks[name] = evaluation_in_a_fit("sim")
        s = summary(walks[name])
        print(f"| {name} | {s['stops']} | {s['modules']} | {s['climbs']} | {s['returns']} |")
    lay = layers()
    for name, stops in walks.items():
        print(f"\n{name}:")
        for s in stops:
            mark = "  <- a climb" if climbs_up(s, lay) else ""
            print(f"  {s['module']}.{s['function']}  (layer {lay.get(_unit(s['module']), 0)}; "
                  f"from {s['caller']}){mark}")


if __name__ == "__main__":
    main()
