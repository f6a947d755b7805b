"""Mutants of labs 7–10's tasks (see tests/test_mutants.py for what a mutant is and how it is run)."""

from __future__ import annotations

from mutants_common import Mutant

MUTANTS_LABS07_10: list[Mutant] = []
