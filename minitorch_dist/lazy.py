"""Lazy package exports (PEP 562): a package's names are imported when first used.

A package ``__init__`` that imported every module eagerly made ``import minitorch_dist.memory``
import torch (through the tracker), even for a caller that wants only the closed forms. With
:func:`attach`, the ``__init__`` writes its exports as ordinary imports that only an editor or a
type checker runs, and :func:`attach` reads them from its source::

    from typing import TYPE_CHECKING

    from minitorch_dist.lazy import attach

    if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
        from .estimate import activation_bytes, model_state_bytes
        from .track import MemoryTracker

    __getattr__, __dir__ = attach(__name__)  # __all__: the names imported above

Each public name is written once; go-to-definition on ``from minitorch_dist.memory import
MemoryTracker`` lands in ``memory/track.py``. At run time ``from minitorch_dist.memory import
MemoryTracker`` imports ``memory.track`` (and torch) at that moment, while ``from
minitorch_dist.memory.prediction import predict`` imports no torch at all. This is what lets the
arithmetic layer (:mod:`minitorch_dist.arithmetic`) run where torch is absent.

One subtlety: a package may export a name equal to one of its modules (``pipeline.simulate``,
the function, defined in ``pipeline/simulate.py``). The import system binds a loaded submodule
on its package by name, which would shadow the function with the module; the package's module
type binds the exported object instead, as an eager ``from .simulate import simulate`` did.
A leaf: standard library only.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["attach", "typing_imports"]


class _LazyPackage(types.ModuleType):
    """A package whose exports win over its submodules of the same name (see the docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        where = self.__dict__.get("_lazy_where", {})
        if isinstance(value, types.ModuleType) and where.get(name, ("",))[0] == value.__name__:
            value = getattr(value, where[name][1])  # the exported object, not its module
        super().__setattr__(name, value)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def typing_imports(package: str) -> dict[str, tuple[str, str]]:
    """What the ``if TYPE_CHECKING:`` block at the top level of package ``package``'s
    ``__init__`` imports: exported name -> (absolute module, name in that module)."""
    module = sys.modules[package]
    spec = module.__spec__
    source = spec.loader.get_source(package) if spec and spec.loader else None
    if source is None:
        raise ImportError(f"{package}: attach() needs the package's source to read its exports")
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                raise ImportError(f"{package}: write each export as 'from MODULE import NAME'")
            relative = "." * statement.level + (statement.module or "")
            absolute = importlib.util.resolve_name(relative, package)
            for alias in statement.names:
                found[alias.asname or alias.name] = (absolute, alias.name)
    return found


def attach(
    package: str,
    exports: Mapping[str, Iterable[str]] | None = None,
    public: Iterable[str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of package ``package``.

    Without ``exports``, the names are those its ``if TYPE_CHECKING:`` block imports
    (:func:`typing_imports`), and they become the package's ``__all__``. ``exports`` instead maps
    a module (absolute, or relative to the package: ``".estimate"``) to the names it provides,
    and every name of ``public`` must be provided by some module: a name listed there but mapped
    nowhere raises ImportError at import time, not at first use.
    Other attributes resolve to the package's submodules (``memory.track``), imported then."""
    namespace = sys.modules[package]
    if exports is None:
        where = typing_imports(package)
        namespace.__dict__["__all__"] = sorted(where)
    else:
        where = {}
        for module, names in exports.items():
            absolute = importlib.util.resolve_name(module, package)
            for name in names:
                where[name] = (absolute, name)
        missing = sorted(set(public or ()) - set(where))
        if missing:
            raise ImportError(f"{package}: __all__ names {missing} are mapped to no module")
    namespace.__dict__["_lazy_where"] = where
    namespace.__class__ = _LazyPackage

    def __getattr__(name: str) -> Any:
        if name in where:
            module, attribute = where[name]
            value = getattr(importlib.import_module(module), attribute)
            namespace.__dict__[name] = value  # cache: the next access skips __getattr__
            return value
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")  # binds itself on the package
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace.__dict__) | set(where))

    return __getattr__, __dir__
