"""Modules that moved, importable under their old names: ``minitorch_dist.grade`` *is*
``minitorch_dist.course.grade`` (the same module object, so a monkeypatch of one patches the
other), and ``python -m minitorch_dist.grade`` runs the new module as a script.

``MOVED`` is the whole list (old name -> new name); ``minitorch_dist/__init__.py`` installs the
finder below. The package, its tests and the benchmarks import the new names. The old ones stay
only where they are in print: the commands of the README, the guides and CI (``python -m
minitorch_dist.make test``, ``.grade``, ``.release``, ``.submit``, ``.book_links``, ...), lab
notebooks already handed out (``from minitorch_dist.answers import check_answer``) and the
chapters' ``minitorch_dist.results``. The old files are not kept as stubs.
Standard library only: the README's commands import this before torch is installed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import CodeType, ModuleType

_COURSE = (
    "make",
    "vendor",
    "book_links",
    "book_outputs",
    "browser_check",
    "browser_check_page",
    "release",
    "grade",
    "autograder",
    "submit",
    "answers",
    "results",
)

MOVED: dict[str, str] = {
    **{f"minitorch_dist.{m}": f"minitorch_dist.course.{m}" for m in _COURSE},
    "minitorch_dist.flops": "minitorch_dist.memory.flops",
    "minitorch_dist.checkpoint": "minitorch_dist.zero.checkpoint",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the module at its new name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just pointed the module's __spec__ at the alias: give it back
        module.__spec__ = self._own_spec

    def get_code(self, fullname: str) -> CodeType:
        """``python -m OLD``: run the new module as ``__main__`` (its relative imports work)."""
        source = f"import runpy\nrunpy.run_module({self.target!r}, run_name='__main__', alter_sys=True)\n"
        return compile(source, f"<{fullname}, moved to {self.target}>", "exec")


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(MOVED[fullname]))


def install() -> None:
    """Make the old names importable (once per interpreter)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
