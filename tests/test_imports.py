"""The package's import graph: no module imports another that imports it back at import time, and
no subpackage imports another that imports it back, even through imports deferred into functions."""

from __future__ import annotations

import ast
from pathlib import Path

import spherelab

ROOT = Path(spherelab.__file__).parent



def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _targets(module: str, node) -> list[str]:
    package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
    target = ".".join(base + ([node.module] if node.module else []))
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _imports(module: str, deferred: bool) -> set[str]:
    """The package modules ``module`` imports: at import time only (not inside functions or
    ``if TYPE_CHECKING:``), or with ``deferred`` every import anywhere in it."""
    found, stack = set(), list(ast.parse(MODULES[module].read_text(encoding="utf-8")).body)
    while stack:
        node = stack.pop()
        if not deferred and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not deferred and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(t for t in _targets(module, node) if t in MODULES and t != module)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_another_that_imports_it_back_at_import_time():
    graph = {m: _imports(m, deferred=False) for m in MODULES}
    assert _cycles(graph) == []


def test_no_subpackage_imports_another_that_imports_it_back_even_when_deferred():
    """The layers: backend's operation table imports nothing of the package, the maths call it, the
    device implementations (devices/) import the maths and register into it, testing/ proves them.
    (Before issue 31: one cycle through nine subpackages, 27 edges, by imports deferred into functions.)"""
    def sub(module):
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "spherelab"

    graph: dict[str, set[str]] = {}
    for m in MODULES:
        graph.setdefault(sub(m), set())
        for t in _imports(m, deferred=True):
            if sub(t) != sub(m) and sub(t) != "spherelab":
                graph[sub(m)].add(sub(t))
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    assert graph["backend"] == set(), "the operation table imports nothing of the package"
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_another_that_imports_it_back_even_for_annotations():
    """Every import counted, deferred into functions and under ``if TYPE_CHECKING:`` alike: no two
    modules lean on each other (a package's ``__init__``, which gathers its modules' names, is not
    counted as a module one imports)."""
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    graph = {m: {t for t in _imports(m, deferred=True) if t not in packages} for m in MODULES}
    assert _cycles(graph) == []


def private_reaches() -> list[str]:
    """Every ``obj._name`` in the package where ``obj`` is not ``self``, ``cls`` or ``super()`` (a
    dunder is not private): a module reading or calling what another object keeps to itself."""
    found = []
    for module, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_private_reaches_stay_at_most_half_of_the_count_first_measured():
    """102 when first counted (the same rule); at most half of that now. Same-class access to
    another instance (``other._key``) counts too: it is rare enough to be read one by one."""
    found = private_reaches()
    assert len(found) <= 51, "\n".join(found)


def test_the_reach_counter_sees_a_reach():
    assert any(r.endswith("sys._getframe") for r in private_reaches())


def test_models_hold_the_models_and_the_floor_the_passes():
    """``models/`` at most 3 000 lines (4 636 before the strategies moved into ``rows/``, 3 797 before
    the fits that choose models moved into ``selection/``, 3 202 before the parameter registry and
    the fits' transactions became modules of their own): a pass over rows added there instead of
    the rows floor, or a chooser instead of ``selection/``, fails here first."""
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "models").glob("*.py"))
    assert lines <= 3000, lines
