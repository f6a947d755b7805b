"""Grade the labs: run the graded tests, print a score table per task, write results.json.

    python -m minitorch_dist.grade                          # every lab
    python -m minitorch_dist.grade --labs lab01 lab02 --results results.json
    python -m minitorch_dist.grade --task lab05.1 --task lab05.2     # one task or a few
    python -m minitorch_dist.grade --task lab11.2    # a renamed task's old id: lab12.1
    pytest -m lab05 --task lab05.1                          # the same selection, plain pytest
    python -m minitorch_dist.grade --labs lab05 --timeout 60   # each test at most 60 s

A test file that does not import (a missing package, a syntax error) is named with its error,
in the terminal and in results.json, and the other files are graded all the same.

The convention (tests/test_grading.py enforces it). A graded test carries its lab's marker and
exactly one task marker whose id starts with that lab::

    @pytest.mark.lab05
    @pytest.mark.task("lab05.1")        # the task whose solution block it exercises
    def test_ring_all_reduce_equals_dist_all_reduce(...): ...

A test parametrized over several tasks marks each parameter set instead:
``pytest.param(1, marks=pytest.mark.task("lab06.1"))``. Every task that has a
solution block in the package has at least one graded test. Each graded test
(each parameter set) is worth one point. A test skipped because it needs a GPU is reported as
"skipped: needs a GPU" and left out of the maximum, so a student without one is not marked down.

The terminal gets the score table first (tasks within labs), then one line per failed test; the
tracebacks go, size-capped, into each test's ``output`` in results.json, which follows
Gradescope's autograder format (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
In graded tests (tests/conftest.py) every collective times out after a few seconds
(``$MINITORCH_DIST_COLLECTIVE_TIMEOUT``), and once a test of a task deadlocked, that task's other
tests fail at once without running, so a deadlocked lab still grades in a minute or two.
A test that fails because another task's stub raised (lab06.2's tests before lab06.1 is written) is
reported as "needs lab06.1 first", in its row of the table and in results.json (grade_report.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .grade_report import TestResult, _cap, failure_reason, gradescope_json, needs_first
from .graded_tests import (
    LAB_MARKER,
    TASK_ID,
    check_task_ids,
    lab_files,
    lab_of,
    select_tasks,
    task_of,
    task_problem,
)
from .renamed_tasks import current_tasks

__all__ = [
    "LAB_MARKER",
    "TASK_ID",
    "TestResult",
    "check_task_ids",
    "grade",
    "gradescope_json",
    "lab_files",
    "lab_of",
    "main",
    "select_tasks",
    "task_of",
    "task_problem",
]


@dataclass(eq=False)  # pluggy keeps plugins in sets
class _Collector:
    """A pytest plugin that remembers each graded test's lab, task and outcome."""

    tasks: list[str] | None = None
    graded: dict[str, tuple[str, str]] = field(default_factory=dict)  # nodeid -> (lab, task)
    results: dict[str, TestResult] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # collection errors, one line each
    timed_out: dict[str, str] = field(default_factory=dict)  # task -> its test past --timeout

    def pytest_runtest_setup(self, item: Any) -> None:
        task = self.graded.get(item.nodeid, ("", ""))[1]
        if task in self.timed_out:
            pytest.fail(
                f"not run: {task} timed out in {self.timed_out[task]} (it ran past --timeout); "
                "fix that test first",
                pytrace=False,
            )

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            self.errors.append(f"{report.nodeid}: {text[-1] if text else 'collection failed'}")

    def pytest_collection_modifyitems(self, config: Any, items: list) -> None:
        if self.tasks:
            select_tasks(items, config, self.tasks)
        for item in items:
            lab = lab_of(item)
            if lab:
                self.graded[item.nodeid] = (lab, task_of(item) or f"{lab}.?")

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid not in self.graded:
            return
        lab, task = self.graded[report.nodeid]
        previous = self.results.get(report.nodeid)
        if report.failed:
            if report.when == "call" and "Timeout (>" in report.longreprtext:  # pytest-timeout
                self.timed_out.setdefault(task, report.nodeid.split("::", 1)[-1])
            reason = needs_first(task, report.longreprtext) or failure_reason(report)
            text = _cap(report.longreprtext)
            output = f"{reason}\n\n{text}"
            self.results[report.nodeid] = TestResult(
                lab,
                report.nodeid,
                "failed",
                output,
                task,
                reason if report.when == "call" else f"(in {report.when}) {reason}",
            )
        elif report.skipped and previous is None:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            reason = reason.removeprefix("Skipped: ")
            self.results[report.nodeid] = TestResult(
                lab, report.nodeid, "skipped", reason, task, reason
            )
        elif report.when == "call" and report.passed and previous is None:
            self.results[report.nodeid] = TestResult(lab, report.nodeid, "passed", "", task)


def grade(
    root: str | os.PathLike = ".",
    labs: list[str] | None = None,
    extra_args: list[str] | None = None,
    tasks: list[str] | None = None,
    log: io.TextIOBase | None = None,
    errors: list[str] | None = None,
    files: list[str | os.PathLike] | None = None,
) -> list[TestResult]:
    """Run the graded tests under ``root/tests`` (only ``labs`` / ``tasks`` if given).

    Returns their results; pytest's own terminal output goes to ``log`` (default: discarded),
    and one character per test (``.`` passed, ``F`` failed, ``s`` skipped) to stderr. A test file
    that fails to import does not stop the others; its error (file and exception) is printed and
    appended to ``errors`` when given. ``files`` collects only those test files (default: the
    files that mark the chosen labs, :func:`lab_files`, or every file under ``root/tests``)."""
    root = Path(root).resolve()
    for lab in labs or []:
        if not LAB_MARKER.match(lab):
            raise ValueError(f"lab names look like 'lab01', got {lab!r}")
    check_task_ids(tasks or [])
    tasks = current_tasks(tasks, say=True) if tasks else tasks
    loaded = sys.modules.get("minitorch_dist")
    if (
        loaded is not None
        and (root / "minitorch_dist").is_dir()
        and root not in Path(loaded.__file__).resolve().parents
    ):
        raise ValueError(
            f"this process already imported minitorch_dist from {Path(loaded.__file__).parent}; "
            f"grade from inside the repository you grade: cd {root} && python -m minitorch_dist.grade"
        )
    chosen = sorted(set(labs or []) | {t.split(".")[0] for t in tasks or []})
    expression = " or ".join(chosen or [f"lab{i:02d}" for i in range(100)])
    collector = _Collector(tasks=list(tasks) if tasks else None)
    if files is None and chosen:  # a few labs: only their files (lab_files), else all tests/
        files = lab_files(root / "tests", chosen) or ["tests"]
    args = [
        *(str(root / f) for f in files or ["tests"]),
        "-m",
        expression,
        "-q",
        "-rN",
        "--continue-on-collection-errors",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(root),
        "-o",
        "addopts=",
        *(extra_args or []),
    ]
    cwd = os.getcwd()
    os.chdir(root)
    sys.path.insert(0, str(root))  # grade the package in root, not an installed copy
    progress = _Progress(collector)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            code = pytest.main(args, plugins=[collector, progress])
    finally:
        os.chdir(cwd)
        sys.path.remove(str(root))
        print(file=sys.stderr)
        if log is not None:
            log.write(buffer.getvalue())
    if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        print(buffer.getvalue()[-3000:], file=sys.stderr)
    if collector.errors:
        print("collection errors (these tests did not run):", file=sys.stderr)
        print("\n".join(f"  {e}" for e in collector.errors), file=sys.stderr)
        if errors is not None:
            errors.extend(collector.errors)
    return [collector.results[k] for k in sorted(collector.results)]


@dataclass(eq=False)
class _Progress:
    collector: _Collector

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        result = self.collector.results.get(nodeid)
        if result is not None:
            mark = {"passed": ".", "failed": "F", "skipped": "s"}[result.status]
            print(mark, end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labs", nargs="*", help="labs to grade, e.g. lab01 lab02 (default: all)")
    parser.add_argument(
        "--task",
        action="append",
        nargs="+",
        default=[],
        help="tasks to grade, e.g. --task lab05.1 (repeatable; several after one --task too)",
    )
    parser.add_argument("--root", default=".", help="repository to grade (default: here)")
    parser.add_argument("--results", default="results.json", help="where to write the JSON")
    parser.add_argument(
        "--timeout", type=float, help="fail a test that runs longer (seconds; needs pytest-timeout)"
    )
    args = parser.parse_args(argv)
    tasks = [t for group in args.task for t in group]
    start = time.monotonic()
    extra = ["--timeout", f"{args.timeout:g}"] if args.timeout else None
    errors: list[str] = []
    results = grade(args.root, args.labs, extra_args=extra, tasks=tasks or None, errors=errors)
    if not results:
        if errors:
            print(
                f"no graded test ran: {len(errors)} test file(s) failed to import (above)",
                file=sys.stderr,
            )
        else:
            print("no graded tests found", file=sys.stderr)
        return 1
    report = gradescope_json(results, time.monotonic() - start)
    if errors:
        report["output"] += "\n\ncollection errors (these tests did not run):\n" + "\n".join(
            f"  {e}" for e in errors
        )
    Path(args.results).write_text(json.dumps(report, indent=2) + "\n")
    print(report["output"])
    print(f"results written to {args.results} (each failed test's traceback is in its output)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
