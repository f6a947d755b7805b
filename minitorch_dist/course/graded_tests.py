"""Which tests are graded, and for which task: the convention of minitorch_dist/course/grade.py's
docstring (a lab marker and exactly one task marker of that lab), read from collected pytest
items, the selection of one task's tests (``grade --task``, ``pytest --task``), and the list of
a tree's graded tests that the release records and the autograder runs (:func:`collect_graded`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from .renamed_tasks import current_tasks

__all__ = [
    "LAB_MARKER",
    "TASK_ID",
    "check_task_ids",
    "collect_graded",
    "lab_files",
    "lab_of",
    "select_tasks",
    "task_of",
    "task_problem",
]

LAB_MARKER = re.compile(r"^lab\d\d$")
TASK_ID = re.compile(r"^(lab\d\d)\.\d+$")


def lab_files(tests: str | os.PathLike, labs: list[str]) -> list[Path]:
    """The test files under ``tests`` that write the marker of one of ``labs``
    (``mark.lab05``): the only files whose tests can be that lab's graded tests, so grading a
    lab collects those alone, not the ~100 files of ``tests/`` (~10 s of CPU in a fresh process).
    tests/test_grading.py checks that no graded test lives in a file this leaves out."""
    if not labs:
        return []
    words = re.compile(r"\bmark\.(" + "|".join(map(re.escape, labs)) + r")\b")
    return [p for p in sorted(Path(tests).rglob("test_*.py")) if words.search(p.read_text())]


def lab_of(item: Any) -> str | None:
    """The ``labNN`` marker of a collected test (None: not graded)."""
    marks = [m.name for m in item.iter_markers() if LAB_MARKER.match(m.name)]
    return marks[0] if marks else None


def task_of(item: Any) -> str | None:
    """The task id of a graded test: the argument of its (single) ``task`` marker."""
    tasks = [m.args[0] if m.args else "" for m in item.iter_markers("task")]
    return tasks[0] if len(tasks) == 1 else None


def task_problem(item: Any) -> str | None:
    """Why a test breaks the convention (None when it keeps it)."""
    labs = sorted({m.name for m in item.iter_markers() if LAB_MARKER.match(m.name)})
    tasks = [m.args[0] if m.args else "" for m in item.iter_markers("task")]
    if not labs:
        return "a task marker without a lab marker" if tasks else None
    if len(labs) > 1:
        return f"several lab markers {labs}"
    if len(tasks) != 1:
        return f"{len(tasks)} task markers {tasks} (needs exactly one)"
    match = TASK_ID.match(str(tasks[0]))
    if not match or match.group(1) != labs[0]:
        return f"task {tasks[0]!r} does not belong to its lab marker {labs[0]}"
    return None


def check_task_ids(tasks: list[str]) -> None:
    for task in tasks:
        if not TASK_ID.match(task):
            raise ValueError(f"task ids look like 'lab05.1', got {task!r}")


def select_tasks(items: list, config: Any, tasks: list[str]) -> None:
    """Keep only the graded tests of ``tasks`` (in place), reporting the rest as deselected.
    A renamed task's old id selects its new one (:mod:`.renamed_tasks`)."""
    tasks = current_tasks(tasks, say=True)
    keep = [item for item in items if task_of(item) in tasks]
    dropped = [item for item in items if task_of(item) not in tasks]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


_COLLECT = """
import json, sys
import pytest
from minitorch_dist.course.grade import lab_files, task_of

class Graded:
    tests = {}
    def pytest_collection_finish(self, session):
        for item in session.items:
            gpu = any(True for _ in item.iter_markers("gpu"))
            drawn = any(True for _ in item.iter_markers("drawn_per_run"))
            self.tests[item.nodeid] = {"task": task_of(item), "gpu": gpu, "drawn": drawn}

plugin = Graded()
files = [str(f) for f in lab_files("tests", sys.argv[1:])] or ["tests"]
code = pytest.main([*files, "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "--rootdir", ".", "-m", " or ".join(sys.argv[1:])], plugins=[plugin])
print("GRADED=" + json.dumps(plugin.tests))
sys.exit(0 if code == 0 else 1)
"""


def collect_graded(root: str | os.PathLike, labs: list[str]) -> dict[str, dict]:
    """Each graded test of ``labs`` in the tree at ``root``: nodeid -> its task, whether it
    needs a GPU, whether its inputs are drawn per run (``drawn_per_run``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root)
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT, *labs],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("GRADED=")]
    if done.returncode != 0 or not lines:
        raise ValueError(
            f"collecting the graded tests of {labs} with {sys.executable} failed:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return json.loads(lines[-1].removeprefix("GRADED="))
