"""The record of one mutant (see tests/test_mutants.py; the lists live in tests/mutants_*.py), and
the runner that grades a task with wrong code in place of its reference (mutants, and the
lookup and sample "solutions" of tests/test_no_reference.py)."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from minitorch_dist.course.grade import TestResult, grade, lab_files
from minitorch_dist.course.markers import BEGIN, TASK

ROOT = Path(__file__).resolve().parent.parent


def package_tasks() -> list[str]:
    """Every task with a solution block in the package (``# BEGIN SOLUTION labNN.k`` markers,
    the course machinery left out): the tasks a release stubs and the grader grades, sorted."""
    found: set[str] = set()
    for path in (ROOT / "minitorch_dist").rglob("*.py"):
        if "course" in path.relative_to(ROOT).parts:
            continue
        for line in path.read_text().splitlines():
            begin = BEGIN.match(line)
            if begin and TASK.match(begin.group(2)):
                found.add(begin.group(2))
    return sorted(found)


@dataclass(frozen=True)
class Mutant:
    task: str  # the task whose graded tests must catch it
    mistake: str  # a short name, the test id
    target: str  # "module:Class.method" or "module:function" it replaces
    wrong: Callable  # the wrong implementation
    message: str  # regex: a failing test's output must name the mistake
    # every failing test names it (its line in the score table too), not only one of them
    every: bool = False


def owner_of(target: str) -> tuple[object, str]:
    """``(object, attribute)`` that ``"module:Class.method"`` names."""
    module, _, path = target.partition(":")
    owner: object = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    assert hasattr(owner, name), f"{target} does not exist"
    return owner, name


_SAID = re.compile(r"^E\s+(\S.*)$")  # pytest's lines of an exception (the source has none)


def failure_text(result: TestResult) -> str:
    """What a failed test said: its one-line reason and the exception lines of its traceback
    (pytest's ``E`` lines), not the test's source, which the traceback also shows: a message
    written in the test but not raised must not count as naming the mistake."""
    said = [m.group(1) for m in map(_SAID.match, result.output.splitlines()) if m]
    return "\n".join([result.reason, *said])


def named(results: list[TestResult], message: str) -> list[TestResult]:
    """The failed results whose failure text matches ``message``."""
    return [r for r in results if r.status == "failed" and re.search(message, failure_text(r))]


def grade_replaced(
    task: str,
    replacements: dict[str, Callable],
    monkeypatch: pytest.MonkeyPatch,
    message: str,
    *,
    every: bool = False,
) -> list[TestResult]:
    """Grade ``task`` with each ``{target: wrong}`` in place of its reference (the forked ranks
    inherit the replacement). Stops at the first failure, and grades every test only when that
    one does not match ``message`` (or when ``every`` failure must)."""
    # Only the files that write the lab's marker can hold its graded tests (lab_files, as the
    # grader collects them): collecting the other hundred files for every mutant took most of a
    # cheap one's time. They are imported before the patch, so that the loop below replaces what
    # they imported (a test module first imported under a mutant would keep that mutant for good).
    files = lab_files(ROOT / "tests", [task.split(".")[0]])
    for f in files:
        importlib.import_module(f.stem)
    for target, wrong in replacements.items():
        owner, name = owner_of(target)
        original = getattr(owner, name)
        monkeypatch.setattr(owner, name, wrong)
        if not isinstance(owner, type):  # a function: also where ``from ... import`` bound it
            for module in list(sys.modules.values()):
                if module is not None and getattr(module, name, None) is original:
                    monkeypatch.setattr(module, name, wrong)
    results = grade(ROOT, tasks=[task], extra_args=None if every else ["-x"], files=files)
    if not every and not any(
        r.status == "failed" and re.search(message, r.output) for r in results
    ):
        results = grade(ROOT, tasks=[task], files=files)
    assert results and all(r.task == task for r in results)
    return results
