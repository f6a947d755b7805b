"""Argument checks that every module shares: one wording, one treatment of ``True``.

A bad argument should fail at the call that passed it, with a ``ValueError`` that names the
argument, the constraint and the value given -- not three frames deeper as a shape error, and not
silently. Each check returns the value it accepted, so a check and an assignment are one line:

    self.layers = check_int("layers", layers)    # "layers must be an integer >= 1, got 0"
    check_choice("recompute", recompute, RECOMPUTE)  # "recompute must be one of none, ..."
    check_divisible("heads", heads, "tp", tp)     # "heads=12 is not divisible by tp=8"

``bool`` is a subclass of ``int`` in Python, so ``isinstance(True, int)`` holds and ``True``
would pass for a count of 1 (and ``True in (0, 1, 2, 3)`` holds too). These checks refuse a bool
wherever a number or a choice among non-bools is asked for. Only the standard library is used:
this module is a leaf that any module of the package may import.
"""

from __future__ import annotations

from collections.abc import Iterable
from numbers import Real
from typing import Any, TypeVar

__all__ = ["check_bool", "check_choice", "check_divisible", "check_int", "check_positive"]

T = TypeVar("T")


def check_int(name: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an ``int`` (not a bool) with ``minimum <= value`` (and ``<= maximum``
    when given); otherwise a ValueError such as "micro_batch must be an integer >= 1, got True"."""
    if maximum is None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValueError(f"{name} must be an integer in [{minimum}, {maximum}], got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float | int:
    """``value`` if it is a real number (not a bool) > 0; NaN is refused, infinity accepted."""
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_choice(name: str, value: T, choices: Iterable[Any]) -> T:
    """``value`` if it is one of ``choices`` (the keys, for a dict); otherwise a ValueError that
    lists them in order: "recompute must be one of none, selective, full, got 'some'".

    Membership is by ``==``, but a bool is accepted only where a bool is among the choices, so
    ``True`` is not taken for the choice ``1``."""
    options = choices if isinstance(choices, tuple) else tuple(choices)
    # ``in`` compares with ``==`` (after identity), as the rule says; in C, so the planner's
    # hundreds of thousands of checks stay cheap
    found = value in options and (
        not isinstance(value, bool) or any(isinstance(c, bool) for c in options)
    )
    if not found:
        names = ", ".join(str(c) for c in options)
        raise ValueError(f"{name} must be one of {names}, got {value!r}")
    return value


def check_divisible(name: str, value: int, by_name: str, by: int) -> int:
    """``value // by`` if ``by`` divides ``value``; otherwise a ValueError such as
    "heads=12 is not divisible by tp=8" (how many heads, say, each of ``by`` ranks gets)."""
    if value % by:
        raise ValueError(f"{name}={value} is not divisible by {by_name}={by}")
    return value // by
