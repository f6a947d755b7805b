"""Mutants of labs 1–6's tasks (see tests/test_mutants.py for what a mutant is and how it is run)."""

from __future__ import annotations

from mutants_common import Mutant

MUTANTS_LABS01_06: list[Mutant] = []
