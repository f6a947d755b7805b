"""The record of one mutant (see tests/test_mutants.py); the lists live in tests/mutants_*.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    task: str  # the task whose graded tests must catch it
    mistake: str  # a short name, the test id
    target: str  # "module:Class.method" or "module:function" it replaces
    wrong: Callable  # the wrong implementation
    message: str  # regex: a failing test's output must name the mistake
    # every failing test names it (its line in the score table too), not only one of them
    every: bool = False
