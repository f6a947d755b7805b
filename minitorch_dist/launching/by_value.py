"""Send a notebook's own functions to ranks that were not forked: pickle them by value.

``launch(fn, 2, start_method="spawn")`` starts each rank as a fresh interpreter. Such a process
gets a function by its module and name, and a function defined in a notebook or a script (module
``__main__``) has no module there to be found in. So :func:`dumps` writes such a function by value:

* its code object (``marshal``: the parent and its ranks run the same Python), name, defaults,
  keyword defaults, ``__dict__`` and the contents of its closure cells;
* the globals its code reads (``LOAD_GLOBAL`` and friends, in nested code too): another
  ``__main__`` function by value again (recursion and mutual recursion included), a module by
  its name, anything else by plain pickle.

A lambda or a nested function (``<locals>`` in its name) of any module goes by value too; a
function that its module still holds under its name goes by reference, as pickle does.
A class defined in ``__main__`` cannot be sent: :func:`dumps` says so and what to do.
Standard library only; the functions rebuilt in one process share one globals dict per
original one, so two functions that share globals in the notebook share them in the rank.
"""

from __future__ import annotations

import builtins
import dis
import importlib
import io
import marshal
import pickle
import sys
import types
from typing import Any

from minitorch_dist.launching.report import LaunchError

__all__ = ["ByValue", "dumps", "loads"]

_GLOBAL_OPS = {"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME"}
_SHARED: dict[int, dict[str, Any]] = {}  # the rebuilt globals, by the original dict's id


def dumps(obj: Any) -> bytes:
    """Pickle ``obj``, writing ``__main__`` functions, lambdas and closures by value."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """Unpickle what :func:`dumps` wrote (plain :func:`pickle.loads` does the same)."""
    return pickle.loads(data)


class ByValue:
    """``fn`` and its arguments pickled by value now; rebuilt and called in the rank.

    Pickled now, so that what cannot be sent fails in the caller with its name. Rebuilt when
    called, inside the rank's own error handling, so that a failure to rebuild is reported like
    any other failure of the rank. Plain pickle, as fork would copy: a tensor argument is each
    rank's own copy, never memory shared between ranks.
    """

    def __init__(self, fn: Any, args: tuple) -> None:
        try:
            self.data = dumps((fn, args))
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            name = getattr(fn, "__qualname__", repr(fn))
            raise LaunchError(
                f"a rank started without fork gets {name} and its arguments by pickle, and "
                f"they do not pickle: {e}"
            ) from e

    def __call__(self, rank: int, world_size: int) -> Any:
        fn, args = loads(self.data)
        return fn(rank, world_size, *args)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and _by_value(obj):
            return _reduce_function(obj)
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, type) and obj.__module__ == "__main__":
            raise pickle.PicklingError(
                f"class {obj.__qualname__} is defined in __main__ (this notebook or script), "
                "and a rank started without fork cannot import it: move the class into a module "
                "file next to the notebook and import it from there"
            )
        return NotImplemented


def _by_value(fn: types.FunctionType) -> bool:
    """True unless pickle could find ``fn`` again by its module and qualified name."""
    module = sys.modules.get(fn.__module__ or "")
    if fn.__module__ == "__main__" or module is None:
        return True
    found: Any = module
    for part in fn.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is not fn


def _global_names(code: types.CodeType) -> set[str]:
    names = {i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _reduce_function(fn: types.FunctionType) -> tuple:
    # The skeleton is created (and memoised) before its state is pickled, so the state may refer
    # back to the function itself: recursion, mutual recursion, a closure over itself.
    module = fn.__module__
    if module != "__main__" and module in sys.modules:
        where, shared = ("module", module), {}  # its module's own globals, imported by name
    else:
        where = ("shared", id(fn.__globals__))
        shared = {n: fn.__globals__[n] for n in _global_names(fn.__code__) if n in fn.__globals__}
    cells = fn.__closure__ or ()
    state = {
        "globals": shared,
        "defaults": fn.__defaults__,
        "kwdefaults": fn.__kwdefaults__,
        "closure": [_cell_value(c) for c in cells],
        "qualname": fn.__qualname__,
        "module": module,
        "doc": fn.__doc__,
        "dict": dict(fn.__dict__),
    }
    args = (marshal.dumps(fn.__code__), fn.__name__, where, len(cells))
    return _skeleton, args, state, None, None, _fill


def _cell_value(cell: types.CellType) -> tuple[bool, Any]:
    try:
        return True, cell.cell_contents
    except ValueError:  # an empty cell: a name assigned later in the enclosing function
        return False, None


def _skeleton(code: bytes, name: str, where: tuple[str, Any], ncells: int) -> types.FunctionType:
    if where[0] == "module":
        scope = importlib.import_module(where[1]).__dict__
    else:
        scope = _SHARED.setdefault(where[1], {"__builtins__": builtins, "__name__": "__main__"})
    closure = tuple(types.CellType() for _ in range(ncells)) or None
    return types.FunctionType(marshal.loads(code), scope, name, None, closure)


def _fill(fn: types.FunctionType, state: dict[str, Any]) -> None:
    fn.__globals__.update(state["globals"])
    fn.__defaults__ = state["defaults"]
    fn.__kwdefaults__ = state["kwdefaults"]
    for cell, (full, value) in zip(fn.__closure__ or (), state["closure"]):
        if full:
            cell.cell_contents = value
    fn.__qualname__ = state["qualname"]
    fn.__module__ = state["module"]
    fn.__doc__ = state["doc"]
    fn.__dict__.update(state["dict"])
