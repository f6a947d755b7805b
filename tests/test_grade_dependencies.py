"""A graded test of one task that fails because another task's stub raised says so: "needs
lab06.1 first", in the score table and in results.json (minitorch_dist/course/grade_report.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_dist.course.grade import grade, gradescope_json
from minitorch_dist.course.grade_report import TestResult as Result
from minitorch_dist.course.grade_report import needs_first
from minitorch_dist.course.release import MARKER_FILE, make_release, strip_solutions

ROOT = Path(__file__).resolve().parent.parent


def test_needs_first_reads_the_raised_stub_not_its_source_line() -> None:
    pytest_text = (
        'def f():\n>   raise NotImplementedError("lab06.2: b")\nE   NotImplementedError: lab06.1: a'
    )
    assert needs_first("lab06.2", pytest_text) == (
        "needs lab06.1 first (its stub raised NotImplementedError)"
    )
    assert needs_first("lab06.1", pytest_text) is None  # its own stub: an ordinary failure
    rank = "RankError: rank 0 of 2 failed with NotImplementedError: lab01.3: file each new output"
    assert needs_first("lab06.4", rank + "\nNotImplementedError: lab01.1: x").startswith(
        "needs lab01.1, lab01.3 first (their stubs"
    )
    assert needs_first("lab06.2", "AssertionError: not close") is None
    assert needs_first("lab06.2", 'raise NotImplementedError("lab06.1: a")') is None


def test_the_score_table_and_results_json_name_the_task_needed_first(tmp_path: Path) -> None:
    """Task lab07.2's test calls lab07.1's unwritten stub: its row says what to do first."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_synthetic_needs_first.py").write_text(
        textwrap.dedent(
            """
            import pytest

            def first():
                raise NotImplementedError("lab07.1: the first task")

            @pytest.mark.lab07
            @pytest.mark.task("lab07.1")
            def test_first(): first()

            @pytest.mark.lab07
            @pytest.mark.task("lab07.2")
            def test_second_builds_on_the_first(): assert first() == 2

            @pytest.mark.lab07
            @pytest.mark.task("lab07.3")
            def test_third_is_wrong(): assert 1 == 2
            """
        )
    )
    by_name = {r.name.split("::")[-1]: r for r in grade(tmp_path)}
    second = by_name["test_second_builds_on_the_first"]
    assert second.status == "failed"
    assert second.reason == "needs lab07.1 first (its stub raised NotImplementedError)"
    assert by_name["test_first"].reason.startswith("NotImplementedError: lab07.1")
    assert "needs" not in by_name["test_third_is_wrong"].reason
    report = gradescope_json(list(by_name.values()), 1.0)
    table = report["output"].split("\n\n")[0].splitlines()
    rows = {line.split()[0]: line for line in table}
    assert rows["lab07.2"].endswith("needs lab07.1 first") and "needs" not in rows["lab07.1"]
    assert "lab07.2 FAILED test_second_builds_on_the_first: needs lab07.1 first" in report["output"]
    entry = next(t for t in report["tests"] if t["number"] == "lab07.2")
    assert entry["output"].startswith("needs lab07.1 first") and entry["status"] == "failed"


def test_a_table_row_says_needs_only_when_every_failure_waits() -> None:
    results = [
        Result("lab06", "a", "failed", "", "lab06.2", "needs lab06.1 first (its stub ...)"),
        Result("lab06", "b", "failed", "", "lab06.2", "AssertionError: not close"),
    ]
    assert "needs" not in gradescope_json(results, 1.0)["output"].splitlines()[2]


@pytest.mark.skipif((ROOT / MARKER_FILE).exists(), reason="needs the instructor's source")
def test_an_edition_with_lab06_2_written_but_not_lab06_1(tmp_path: Path) -> None:
    """A generated edition of lab 6 in which the student wrote lab06.2 (ZeRO-2) but not lab06.1
    (ZeRO-1, whose machinery ZeRO-2 builds on): lab06.2's failures say "needs lab06.1 first"."""
    dest = tmp_path / "edition"
    make_release(ROOT, dest, labs=["lab06"])
    stage2 = "minitorch_dist/zero/stage2.py"  # lab06.2 written: the reference, without markers
    (dest / stage2).write_text(strip_solutions((ROOT / stage2).read_text(), keep=bool)[0])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(dest)
    results = dest / "results.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "minitorch_dist.grade",
            "--task",
            "lab06.2",
            "--results",
            str(results),
        ],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(results.read_text())
    tests = report["tests"]
    assert tests and all(t["status"] == "failed" for t in tests)
    needs = [t for t in tests if t["output"].startswith("needs lab06.1 first")]
    assert len(needs) == len(tests), "\n".join(t["output"].splitlines()[0] for t in tests)
    assert f"0/{len(tests)}  needs lab06.1 first" in run.stdout  # the task's row in the table


_STUCK_TREE = {
    "course_pkg/__init__.py": "",
    "course_pkg/first.py": "def first(x):\n    while True:  # the mistake: never ends\n        x += 1\n",
    "course_pkg/second.py": "from course_pkg.first import first\n\n\ndef second(x):\n"
    "    return first(x) + 1\n",
    "tests/test_tasks.py": textwrap.dedent(
        """
        import pytest
        from course_pkg.first import first
        from course_pkg.second import second

        @pytest.mark.lab07
        @pytest.mark.task("lab07.2")
        def test_a_second():
            assert second(1) == 3

        @pytest.mark.lab07
        @pytest.mark.task("lab07.2")
        def test_b_second_again():
            assert second(2) == 4

        @pytest.mark.lab07
        @pytest.mark.task("lab07.1")
        def test_c_first():
            assert first(1) == 2

        @pytest.mark.lab07
        @pytest.mark.task("lab07.3")
        def test_d_other():
            pass

        @pytest.mark.lab07
        @pytest.mark.task("lab07.4")
        def test_e_another_calls_the_first():
            assert first(0) + 1 == 2
        """
    ),
    "pyproject.toml": '[tool.pytest.ini_options]\nmarkers = ["lab07", "task(id)"]\n',
}


def test_a_stuck_task_costs_its_task_and_names_the_students_line(tmp_path: Path) -> None:
    """Catches a judge that waits out the time limit in every test that calls an endless loop,
    or blames the test's own task: lab07.2's first test runs into lab07.1's loop, so it fails
    with "needs lab07.1 first" and the student's line (not the grader's), lab07.1's and
    lab07.2's other tests fail at once without running, lab07.3 is graded as usual, and a test
    of lab07.4 that calls lab07.1's function later fails at once with "needs lab07.1 first"."""
    from minitorch_dist.course import judge

    tree = tmp_path / "tree"
    for rel, text in _STUCK_TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "minitorch_dist").symlink_to(ROOT / "minitorch_dist")
    tests = {
        f"tests/test_tasks.py::test_{name}": {"task": task}
        for name, task in (
            ("a_second", "lab07.2"),
            ("b_second_again", "lab07.2"),
            ("c_first", "lab07.1"),
            ("d_other", "lab07.3"),
            ("e_another_calls_the_first", "lab07.4"),
        )
    }
    targets = {"course_pkg.first:first": "lab07.1", "course_pkg.second:second": "lab07.2"}
    outcomes = judge.run_tests(
        tree, tests, tmp_path / "out", targets, test_timeout=5, total_timeout=300
    )
    by_name = {n.split("::")[-1]: o for n, o in outcomes.items()}
    first = by_name["test_a_second"]
    assert first.status == "failed" and first.reason.startswith("needs lab07.1 first"), first
    assert " at course_pkg/first.py:" in first.reason and " in first: " in first.reason, first
    assert by_name["test_b_second_again"].reason.startswith("not run: lab07.2 needs lab07.1 first")
    assert by_name["test_c_first"].reason.startswith("not run: lab07.1 timed out in test_a_second")
    assert by_name["test_d_other"].status == "passed"
    # a later test of another task that calls lab07.1 fails at once, not after the limit again
    later = by_name["test_e_another_calls_the_first"]
    assert later.status == "failed" and "ran past" not in later.reason, later
    assert needs_first("lab07.4", later.output) == (
        "needs lab07.1 first (it timed out in test_a_second)"
    ), later.output[-2000:]
