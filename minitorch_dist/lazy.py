"""Lazy package exports (PEP 562): a package's names are imported when first used.

A package ``__init__`` that imported every module eagerly made ``import minitorch_dist.memory``
import torch (through the tracker), even for a caller that wants only the closed forms. With
:func:`attach`, the ``__init__`` lists which module defines each name instead::

    _EXPORTS = {".estimate": ("activation_bytes", ...), ".track": ("MemoryTracker", ...)}
    __all__ = [...]
    __getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)

``from minitorch_dist.memory import MemoryTracker`` imports ``memory.track`` (and torch) at that
moment; ``from minitorch_dist.memory.prediction import predict`` imports no torch at all. This is
what lets the arithmetic layer (:mod:`minitorch_dist.arithmetic`) run where torch is absent.

One subtlety: a package may export a name equal to one of its modules (``pipeline.simulate``,
the function, defined in ``pipeline/simulate.py``). The import system binds a loaded submodule
on its package by name, which would shadow the function with the module; the package's module
type binds the exported object instead, as the eager ``from .simulate import simulate`` did.
A leaf: standard library only.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["attach"]


class _LazyPackage(types.ModuleType):
    """A package whose exports win over its submodules of the same name (see the docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        where = self.__dict__.get("_lazy_where", {})
        if isinstance(value, types.ModuleType) and where.get(name) == value.__name__:
            value = getattr(value, name)  # the exported object, not the module defining it
        super().__setattr__(name, value)


def attach(
    package: str, exports: Mapping[str, Iterable[str]], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of package ``package``: ``exports`` maps a module
    (absolute, or relative to the package: ``".estimate"``) to the names it provides.

    Every name of ``public`` (the package's ``__all__``) must be provided by some module: a name
    listed there but mapped nowhere raises ImportError at import time, not at first use.
    Other attributes resolve to the package's submodules (``memory.track``), imported then."""
    where: dict[str, str] = {}
    for module, names in exports.items():
        absolute = importlib.util.resolve_name(module, package)
        for name in names:
            where[name] = absolute
    missing = sorted(set(public) - set(where))
    if missing:
        raise ImportError(f"{package}: __all__ names {missing} are mapped to no module")
    namespace = sys.modules[package]
    namespace.__dict__["_lazy_where"] = where
    namespace.__class__ = _LazyPackage

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
            namespace.__dict__[name] = value  # cache: the next access skips __getattr__
            return value
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")  # binds itself on the package
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace.__dict__) | set(where))

    return __getattr__, __dir__
