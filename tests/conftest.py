"""Shared test set-up, and the graded tests' rules (see minitorch_dist/grade.py's docstring).

* ``--task lab05.1`` (repeatable) keeps only that task's graded tests: ``pytest -m lab05 --task
  lab05.1`` grades one task, as ``python -m minitorch_dist.grade --task lab05.1`` does.
* In a graded test every collective times out after ``GRADED_COLLECTIVE_TIMEOUT_S`` seconds (the
  tensors are tiny: a collective that takes longer never completes), and once a test of a task
  failed on such a timeout, the task's later tests fail at once, without running.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.course.grade import check_task_ids, lab_of, select_tasks, task_of
from minitorch_dist.launching import COLLECTIVE_TIMEOUT_ENV, RankError, RankTimeoutError

GRADED_COLLECTIVE_TIMEOUT_S = 10
_deadlocked: dict[str, str] = {}  # task -> the test in which it deadlocked


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--task",
        action="append",
        default=[],
        help="run only the graded tests of this task, e.g. --task lab05.1 (repeatable)",
    )


# Tests of the course and book machinery rather than of what the chapters teach: marked ``course``
# so that ``python -m minitorch_dist.make quick`` (``-m "not slow and not course"``) leaves them out.
COURSE_MODULES = {
    "test_autograder",
    "test_book_links",
    "test_browser_check",
    "test_course_book",
    "test_grade_dependencies",
    "test_grading",
    "test_mutants",
    "test_notebooks",
    "test_release",
    "test_student_install",
    "test_vendor",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in COURSE_MODULES:
            item.add_marker(pytest.mark.course)
    tasks = config.getoption("--task")
    if tasks:
        check_task_ids(tasks)
        select_tasks(items, config, tasks)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    """One intra-op thread: on a busy 2-core machine, two threads make small ops 20x slower."""
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _graded_collective_timeout(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graded test's collectives fail within seconds when they cannot complete."""
    if lab_of(request.node):
        monkeypatch.setenv(COLLECTIVE_TIMEOUT_ENV, str(GRADED_COLLECTIVE_TIMEOUT_S))


def pytest_runtest_setup(item: pytest.Item) -> None:
    task = task_of(item) if lab_of(item) else None
    if task in _deadlocked:
        pytest.fail(
            f"not run: {task} deadlocked in {_deadlocked[task]} (a collective never completed); "
            "fix that test first",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call" and call.excinfo is not None and lab_of(item) and task_of(item):
        error = call.excinfo.value
        stuck = isinstance(error, RankTimeoutError) or (  # or a rank's own receive timed out
            isinstance(error, RankError) and error.exc_type == "TimeoutError"
        )
        if stuck:
            _deadlocked.setdefault(task_of(item), item.nodeid.split("::", 1)[-1])
    return report
