"""The package's import graph: no module imports, directly or through others, a module that
imports it back.

Every import statement counts, wherever it stands: at module level, inside a function (the usual
way to hide a circle: ``from .fit import in_flight  # fit imports this module``) and under
``if TYPE_CHECKING:`` (a reader and a type checker follow those too). Only the implicit import of
a parent package is left out: ``import minitorch_dist.memory.estimate`` runs
``minitorch_dist/memory/__init__.py`` first, but that package file imports its modules lazily.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minitorch_dist"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its source."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package that holds this module
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:  # from package import module
                    found.add(f"{target}.{alias.name}")
                elif target in MODULES:
                    found.add(target)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_relative_absolute_and_function_level_imports() -> None:
    """Catches a graph that finds no edges (a wrong module name or path) and so no circle."""
    graph = import_graph()
    assert "minitorch_dist.planner.exact" in graph["minitorch_dist.planner.fit"]  # relative
    assert "minitorch_dist.models.router" in graph["minitorch_dist.models.moe_bias"]  # absolute
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_the_package() -> None:
    """Catches two modules that import each other, directly or around a longer loop (as
    ``planner.exact`` and ``planner.fit`` once did, one side hiding its import in a function)."""
    assert cycles(import_graph()) == []


ROOT = PACKAGE.parent
PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


def _defined_in(path: Path, name: str) -> bool:
    """Whether ``name`` is assigned, or a class or function of that name defined, at the top
    level of ``path`` (not imported there)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


@pytest.mark.parametrize("package", PACKAGES)
def test_an_editor_resolves_every_public_name_to_its_definition(package: str) -> None:
    """Catches an ``__init__`` whose exports an editor cannot follow (names kept as strings in a
    lazy table: go-to-definition on ``from minitorch_dist.zero import ZeroStage2`` landed
    nowhere): jedi, the engine of IPython's and many editors' completion, resolves every name of
    the package's ``__all__`` to the file that defines it, which is the ``__init__`` only for a
    name defined there."""
    jedi = pytest.importorskip("jedi")
    names = list(getattr(importlib.import_module(package), "__all__", ()))
    if not names:
        pytest.skip(f"{package} exports nothing")
    code = f"from {package} import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"
    code += "".join(f"{n}\n" for n in names)
    # Inference in this process: jedi's default environment starts a helper process that
    # outlives the test (tests/test_launch.py checks that no child process is left behind).
    script = jedi.Script(
        code,
        path=ROOT / "_go_to_definition.py",
        project=jedi.Project(ROOT),
        environment=jedi.InterpreterEnvironment(),
    )
    init = MODULES[package]
    wrong = {}
    for line, name in enumerate(names, start=len(names) + 3):
        found = script.goto(line, 0, follow_imports=True)
        paths = {d.module_path for d in found}
        if not found or None in paths:
            wrong[name] = "unresolved"
        elif paths == {init} and not _defined_in(init, name):
            wrong[name] = "the __init__, which only imports it"
        elif not all(p is not None and PACKAGE in Path(p).parents for p in paths):
            wrong[name] = f"outside the package: {sorted(map(str, paths))}"
    assert not wrong, f"{package}: go-to-definition lands on {wrong}"
