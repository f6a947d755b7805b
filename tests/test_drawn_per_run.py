"""Graded tests whose inputs are drawn afresh each run (so that no table of answers read from
the shipped tests can pass them) carry ``@pytest.mark.drawn_per_run``: the autograder keeps no
reference values for them, since the release's two runs may happen to draw the same inputs and
a submission's run then draws others (minitorch_dist/course/autograder.py ``references``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from minitorch_dist.course.autograder import references
from minitorch_dist.course.verify import UNSTABLE, verify

TESTS = Path(__file__).parent
DRAWS = ("random.randrange", "random.Random(", "random.choice", "random.random(")


def _graded_tests_that_draw() -> list[tuple[str, str, bool]]:
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            marks = [ast.unparse(d) for d in node.decorator_list]
            if any("mark.task" in m for m in marks) and any(d in ast.unparse(node) for d in DRAWS):
                found.append((path.name, node.name, "pytest.mark.drawn_per_run" in marks))
    return found


def test_every_graded_test_that_draws_its_inputs_says_so() -> None:
    """Catches a graded test drawing its inputs per run without the marker: its reference
    would be compared with a submission's other draw, and a correct submission could fail."""
    found = _graded_tests_that_draw()
    assert len(found) >= 6, found  # lab01.1, lab01.2, lab02.1, lab08.4, lab10.1, lab10.2
    unmarked = [f"{file}::{name}" for file, name, marked in found if not marked]
    assert not unmarked, f"draw their inputs per run without @pytest.mark.drawn_per_run: {unmarked}"


@pytest.mark.parametrize("drawn", [False, True])
def test_a_drawn_test_keeps_no_reference_values_even_when_both_runs_drew_alike(
    drawn: bool,
) -> None:
    """Both release runs recorded 64 calls (they drew the same format); a submission's run drew
    another and made 23. A drawn test compares nothing; any other test names the difference."""
    call = {"returned": 1.5}
    run = {"-1|minitorch_dist.precision.formats:decode": [call] * 64}
    refs = references({"t": {"drawn": drawn}}, {"t": run}, {"t": run})
    mine = {"-1|minitorch_dist.precision.formats:decode": [call] * 23}
    if drawn:
        assert refs["t"] == {"-1|minitorch_dist.precision.formats:decode": UNSTABLE}
        assert verify(refs["t"], mine) is None
    else:
        assert (
            verify(refs["t"], mine) == "decode was called 23 time(s) on the test's process, not 64"
        )
