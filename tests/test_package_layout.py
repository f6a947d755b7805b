"""The package's import graph obeys the rules of its map (README, "How the code is
organised"): shared leaves first, techniques on them, figures beside their topic, the widget on top.

Every module of ``minitorch_dist`` is parsed (``ast``, nothing imported) and each of its imports,
at module level or inside a function, becomes an edge. A *unit* is a top-level module
(``figures``, ``grid``) or a subpackage (``memory``, ``zero``). The rules are checked on that
graph, so a new module that breaks one fails here, with the offending import named, before it
becomes a cycle that only shows up at import time in some notebook.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_dist._moved import MOVED
from minitorch_dist.lazy import typing_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minitorch_dist"

# Chapter techniques, first half and second half (the latter may not exist yet). Composition
# modules (parallel3d, planner) are not in this list: composing techniques is their job.
TECHNIQUES = (
    "precision",
    "recompute",
    "accumulate",
    "data_parallel",
    "zero",
    "tensor_parallel",
    "context_parallel",
    "pipeline",
    "expert_parallel",
)
# Parallel code, which the model must know nothing about (TP cuts it from outside).
PARALLEL = (
    "comm",
    "grid",
    "data_parallel",
    "zero",
    "tensor_parallel",
    "context_parallel",
    "pipeline",
    "expert_parallel",
    "parallel3d",
    "planner",
)
# Shared pieces that techniques stand on: importing a technique from one would be an upward import.
SHARED = (
    "printing",
    "checks",
    "figures",
    "scopes",
    "launching",
    "grid",
    "reference",
    "comparison",
    "models",
    "memory",
    "comm",
)
# Technique -> technique imports that are allowed, each for a stated reason.
ALLOWED_TECHNIQUE_IMPORTS = {
    # Chapter 4 measures accumulated steps under chapter 3's recompute policies (and reuses its
    # figure styles), so that one figure compares both memory levers on the same model.
    ("accumulate", "recompute"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TOP_LEVEL = typing_imports("minitorch_dist")  # from minitorch_dist import launch: name -> module


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, *, top_level_only: bool = False) -> set[str]:
    """The absolute names of the modules ``module`` imports. ``from pkg import name`` counts as
    importing ``pkg.name`` when that is a module, and the lazy top-level exports of
    ``minitorch_dist`` (``from minitorch_dist import launch``) as the module defining them.
    With ``top_level_only``, imports inside functions (run only when called) are left out. The old
    name of a moved module (``minitorch_dist.launcher``) counts as its new one."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # also the imports nested in module-level if/try blocks
        nodes = [
            n
            for top in tree.body
            if not isinstance(top, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            for n in ast.walk(top)
        ]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node, path.name == "__init__.py")
            found.add(source)
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES or f"{source}.{alias.name}" in MOVED:
                    found.add(f"{source}.{alias.name}")
                elif source == "minitorch_dist" and alias.name in TOP_LEVEL:
                    found.add(TOP_LEVEL[alias.name][0])
    return {MOVED.get(name, name) for name in found}


GRAPH = {module: _imports(module) for module in MODULES}


def _unit(module: str) -> str:
    """``minitorch_dist.memory.track`` -> ``memory``; ``minitorch_dist.figures`` -> ``figures``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _ours(name: str) -> bool:
    return name == "minitorch_dist" or name.startswith("minitorch_dist.")


def _is_plotting(name: str) -> bool:
    """matplotlib, the figure base, any topic's ``plots`` module (or a ``plots_*`` sibling split
    from it), the widget package."""
    return (
        name == "matplotlib"
        or name.startswith("matplotlib.")
        or name == "minitorch_dist.figures"
        or name.endswith(".plots")
        or (_ours(name) and name.rsplit(".", 1)[-1].startswith("plots_"))
        or (_ours(name) and _unit(name) == "viz")
    )


def _in_units(units: tuple[str, ...]) -> list[str]:
    return [m for m in MODULES if _unit(m) in units]


def _offences(modules: list[str], bad) -> list[str]:  # noqa: ANN001
    return [f"{m} imports {d}" for m in modules for d in sorted(GRAPH[m]) if bad(d)]


def test_the_graph_sees_the_package():
    """Catches a walker that silently finds nothing (a moved package root, a parse that drops
    relative imports), which would make every rule below pass vacuously."""
    assert {"memory", "comm", "models", "figures", "scopes", "viz"} <= {_unit(m) for m in MODULES}
    assert "minitorch_dist.scopes" in GRAPH["minitorch_dist.comm.shim"]
    assert "minitorch_dist.figures" in GRAPH["minitorch_dist.memory.plots"]
    assert "minitorch_dist.models" in GRAPH["minitorch_dist.memory.measure"]  # a lazy import


def test_no_import_cycles_between_units():
    """Catches two subpackages that import each other (say memory -> recompute -> memory): the
    import then works or fails depending on which one a notebook happens to import first."""
    edges = {u: set() for u in map(_unit, MODULES)}
    for module, deps in GRAPH.items():
        for dep in deps:
            if _ours(dep) and _unit(dep) not in ("", _unit(module)):
                edges[_unit(module)].add(_unit(dep))
    # Tarjan's strongly connected components: any with more than one unit is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        for v in edges.get(u, ()):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            component = []
            while True:
                v = stack.pop()
                component.append(v)
                if v == u:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for u in sorted(edges):
        if u not in index:
            visit(u)
    assert not cycles, f"import cycles between subpackages: {cycles}"


def test_leaves_import_no_technique():
    """Catches an upward import: a shared piece (printing, figures, scopes, the launcher, models,
    memory, comm, and the grid and reference harness when they exist) that imports a chapter's
    technique, which every technique would then drag in."""
    bad = _offences(_in_units(SHARED), lambda d: _ours(d) and _unit(d) in TECHNIQUES)
    # the closed forms stand alone: nothing of ours but the stdlib-only argument checks
    bad += _offences(
        ["minitorch_dist.memory.estimate"], lambda d: _ours(d) and d != "minitorch_dist.checks"
    )
    assert not bad, "\n".join(bad)


def test_figures_and_scopes_are_leaves():
    """Catches the figure base or the scope flag importing the package (the old layout had
    BookFigure inside chapter 1's plots, so comm drew its figures through viz)."""
    stdlib = sys.stdlib_module_names
    top = lambda d: d.split(".")[0]  # noqa: E731
    assert GRAPH["minitorch_dist.figures"], "the walker found no import in figures.py"
    bad = _offences(["minitorch_dist.figures"], lambda d: top(d) not in {*stdlib, "matplotlib"})
    bad += _offences(["minitorch_dist.scopes"], lambda d: top(d) not in stdlib)
    assert not bad, "\n".join(bad)


def test_models_import_no_parallel_code():
    """Catches the model learning about a parallelism (a TP-aware Attention, say): techniques
    cut the model from outside, so models must import no parallel package."""
    bad = _offences(_in_units(("models",)), lambda d: _ours(d) and _unit(d) in PARALLEL)
    assert not bad, "\n".join(bad)


def test_comm_imports_no_plotting_and_no_memory_tracker():
    """Catches comm's numbers and collectives pulling in matplotlib, the widget or the memory
    tracker; only ``comm.plots`` draws."""
    modules = [m for m in _in_units(("comm",)) if m != "minitorch_dist.comm.plots"]
    bad = _offences(modules, lambda d: _is_plotting(d) or _ours(d) and _unit(d) == "memory")
    assert not bad, "\n".join(bad)


def test_numbers_import_no_plotting():
    """Catches a closed-form module (bytes of memory, bytes and time of collectives) importing a
    figure module: the formulas must run where matplotlib is not installed."""
    numbers = [
        "minitorch_dist.memory.estimate",
        "minitorch_dist.memory.prediction",
        "minitorch_dist.comm.cost",
    ]
    assert not _offences(numbers, _is_plotting)


def test_nothing_outside_viz_imports_viz():
    """Catches a technique (or anything else) importing the widget package: viz sits on top."""
    # the course wing sits above viz: book_links writes the live widgets' assets
    # (viz.live_html), the browser check drives them and compares with viz.live's live_result
    above = {"viz", "course"}
    modules = [m for m in MODULES if _unit(m) not in above]
    bad = _offences(modules, lambda d: _ours(d) and _unit(d) == "viz")
    assert not bad, "\n".join(bad)


def test_techniques_do_not_import_each_other():
    """Catches a technique built on another one's internals (zero importing data_parallel, say):
    each imports only shared leaves; the few exceptions are listed with their reason."""
    bad = [
        f"{m} imports {d}"
        for m in _in_units(TECHNIQUES)
        for d in sorted(GRAPH[m])
        if _ours(d)
        and _unit(d) in TECHNIQUES
        and _unit(d) != _unit(m)
        and (_unit(m), _unit(d)) not in ALLOWED_TECHNIQUE_IMPORTS
    ]
    assert not bad, "\n".join(bad)


def test_package_inits_load_no_plotting():
    """Catches a package ``__init__`` that imports its plots (directly or through a module it
    imports at load time): ``import minitorch_dist.<topic>`` must not load matplotlib. Only the
    widget package may."""
    bad = []
    for package in sorted(m for m, p in MODULES.items() if p.name == "__init__.py"):
        if _unit(package) == "viz":
            continue
        seen, todo = set(), [package]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            for dep in _imports(module, top_level_only=True):
                if _is_plotting(dep):
                    bad.append(f"import {package} loads {dep} (imported by {module})")
                elif dep in MODULES:
                    todo.append(dep)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["comm", "memory", "models"])
def test_importing_the_numbers_does_not_import_matplotlib(package: str):
    """Catches, in a fresh interpreter, what the static checks could miss (an import hidden from
    ast, a third-party module that pulls matplotlib in): the cost formulas, the memory accounting
    and the model import without matplotlib."""
    code = f"import sys, minitorch_dist.{package}; assert 'matplotlib' not in sys.modules"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
