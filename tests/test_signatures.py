"""Rules of the package's signatures that a reader relies on, checked over its source.

One name per collective: the copying collectives live in ``minitorch_dist.comm.collectives``
under one name each; no other module defines its own wrapper of a collective, imports one
under another name, or re-exports one (each such spelling is a second name to look up).

One type for a group: every public function's ``group`` (and ``tp_group``, ``cp_group`` ...)
is a ``Group`` (``minitorch_dist.comm.groups``: a process group or None), in every folder.

Small signatures for measurements: a public function of a measuring module takes at most
:data:`MAX_PARAMETERS` named parameters; more settings go in a frozen config dataclass (as
``TPRun``, ``GridRun``), whose fields may still be passed by keyword.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minitorch_dist"
COMM = PACKAGE / "comm"
# a function named as a collective: _all_reduce, all_gather_seq, _split, reduce_scatter_copy ...
# (a method that gathers its own object's state, ZeRO's ``_gather``, is not one)
COLLECTIVE = re.compile(
    r"_*(all_reduce|all_gather|reduce_scatter|all_to_all|broadcast)(_copy|_seq|_single|_tensor|_stacked)?"
    r"|_*(split|gather|scatter)(_copy|_seq|_single|_tensor|_stacked)"
)


def _modules(skip_comm: bool = True) -> list[tuple[Path, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "course" in path.parts or (skip_comm and COMM in path.parents):
            continue
        out.append((path, ast.parse(path.read_text(), filename=str(path))))
    return out


def _all(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return set()


def test_no_module_outside_comm_defines_a_collective_of_its_own() -> None:
    """Catches a second spelling of a collective (tensor parallelism's ``_all_reduce`` beside
    ``comm``'s ``all_reduce_copy``; context parallelism's ``_gather_seq``)."""
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and COLLECTIVE.fullmatch(node.name)
    ]
    assert not found, f"collectives defined outside minitorch_dist/comm: {found}"


def test_comm_names_are_imported_and_exported_under_their_own_name_only() -> None:
    """Catches ``from minitorch_dist.comm.collectives import all_reduce_copy as _all_reduce``
    and a module that lists a name it imports from ``comm`` in its ``__all__``."""
    renamed, exported = [], []
    for path, tree in _modules():
        public = _all(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            if not node.module.startswith("minitorch_dist.comm") and not (
                node.level and node.module.startswith("comm")
            ):
                continue
            for alias in node.names:
                where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
                if alias.asname and alias.asname != alias.name:
                    renamed.append(f"{where} {alias.name} as {alias.asname}")
                if (alias.asname or alias.name) in public and path.name != "__init__.py":
                    exported.append(f"{where} {alias.name}")
    assert not renamed, f"comm names imported under another name: {renamed}"
    assert not exported, f"comm names re-exported by another module: {exported}"


# parameters named like a group that are no process group: an optimizer's param group, a flag
NOT_GROUPS = {"param_group", "by_group"}


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """Top-level functions and the methods of top-level classes, not named ``_private``."""
    out = []
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        out += [
            f
            for f in members
            if isinstance(f, ast.FunctionDef)
            and (not f.name.startswith("_") or f.name.startswith("__"))
        ]
    return out


def test_every_group_parameter_has_the_one_type() -> None:
    """Catches ``group: Any`` in one folder beside ``dist.ProcessGroup | None`` in the next.
    ``models`` imports no parallel code, so it spells the same type out."""
    found = []
    for path, tree in _modules(skip_comm=False):
        want = "dist.ProcessGroup | None" if "models" in path.parts else "Group"
        for f in _public_functions(tree):
            for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs:
                if (a.arg == "group" or a.arg.endswith("_group")) and a.arg not in NOT_GROUPS:
                    got = ast.unparse(a.annotation) if a.annotation else None
                    if got != want:
                        found.append(
                            f"{path.relative_to(PACKAGE)}:{f.lineno} {f.name}({a.arg}: {got})"
                        )
    assert not found, f"group parameters not typed as the one Group: {found}"


MAX_PARAMETERS = 7
# the modules that measure a technique or compare it with the single process
MEASURING = ("measure*.py", "parallel3d/compare.py", "zero/train.py", "expert_parallel/train.py")


def test_measurements_take_a_config_not_a_dozen_arguments() -> None:
    """Catches a measurement function growing a 10-14-argument signature again (each setting
    a positional argument threaded through the launched rank function)."""
    paths = sorted({p for pattern in MEASURING for p in PACKAGE.rglob(pattern)})
    assert len(paths) >= 8, paths
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for f in _public_functions(tree):
            named = f.args.posonlyargs + f.args.args + f.args.kwonlyargs
            if len(named) > MAX_PARAMETERS:
                found.append(f"{path.relative_to(PACKAGE)}:{f.lineno} {f.name}: {len(named)}")
    assert not found, f"measurements with more than {MAX_PARAMETERS} parameters: {found}"
