"""The grader's report: each graded test's result, the score table (tasks within labs), one
line per failure, and Gradescope's results.json (for :mod:`minitorch_dist.course.grade`).

A test of task A that fails because another task B is not written yet (B's stub raised
``NotImplementedError("labNN.k: ...")``, as the release writes it) is reported as "needs B first",
not as a failure of A's own: lab06.2's tests need lab06.1's, lab05's tests need lab05.2's wrapper.
A failure of a multi-rank test ends with the student's line ("(at minitorch_dist/x.py:12 in f)"),
read from the failing rank's traceback, not the launcher's frames.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["TestResult", "failure_reason", "gradescope_json", "needs_first", "students_line"]

# The exception line of a stub that raised (pytest's "E   NotImplementedError: lab06.1: ..." or a
# rank's "failed with NotImplementedError: lab06.1: ..."), not the stub's source line.
_STUB_RAISED = re.compile(r"NotImplementedError: (lab\d\d\.\d+)\b")
_TASK_STOPPED = re.compile(r"TaskStopped: (lab\d\d\.\d+) timed out in (\S+): not run again")


@dataclass
class TestResult:
    lab: str
    name: str
    status: str  # "passed" | "failed" | "skipped"
    output: str = ""
    task: str = ""
    reason: str = ""  # one line: why it failed or was skipped


def _one_line(text: str, limit: int = 300) -> str:
    """The first line of an exception's text, shortened: the reason shown in the terminal."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else "failed"
    return line if len(line) <= limit else line[: limit - 3] + "..."


_RANK_TRACEBACK = "--- traceback of rank "
_INTERRUPTED = "where the ranks were when the launch was interrupted:"
_NOTE_ROW = re.compile(r"^\s*(rank \d+): (\S+:\d+ in [^\s:]+)")


def students_line(text: str) -> str | None:
    """Where a multi-rank test failed in the reader's code, from its report ``text``: the
    innermost frame of the failing rank's traceback that is not torch's, Python's or the
    launcher's ("minitorch_dist/comm/halves.py:37 in all_reduce_by_halves"), or, for a launch
    stopped by the time limit, where the first rank was ("rank 0 at ..."). None otherwise."""
    lines = [re.sub(r"^E ?", "", line) for line in text.splitlines()]
    body = "\n".join(lines)
    if _RANK_TRACEBACK in body:
        from minitorch_dist.launching.frames import innermost

        rank_part = body.split(_RANK_TRACEBACK, 1)[1]
        frame = innermost(rank_part)
        if frame is None:
            return None
        here = os.getcwd() + os.sep  # the graded tree: its files by their relative names
        return f"{frame[0].removeprefix(here)}:{frame[1]} in {frame[2]}"
    if _INTERRUPTED in body:
        for line in body.split(_INTERRUPTED, 1)[1].splitlines():
            row = _NOTE_ROW.match(line)
            if row:
                return f"{row.group(1)} at {row.group(2).removeprefix(os.getcwd() + os.sep)}"
    return None


def failure_reason(report: Any) -> str:
    """A failed pytest report's one line: the exception's own line (pytest's, or a rank's), and
    for a multi-rank test the reader's line it failed at (:func:`students_line`)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    reason = crash.message if crash is not None else str(report.longrepr)
    reason = re.sub(r"^minitorch_dist\.launching\.report\.", "", reason.strip())
    where = students_line(report.longreprtext)
    if where is None:
        return _one_line(reason)
    where = f" ({where})" if where.startswith("rank ") else f" (at {where})"
    return _one_line(reason, 300 - len(where)) + where


def _cap(text: str, head: int = 2000, tail: int = 8000) -> str:
    """A traceback's start and end (where the exception is), at most about 10,000 characters."""
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n... ({cut} characters cut) ...\n{text[-tail:]}"


def needs_first(task: str, text: str) -> str | None:
    """The reason for a failure of ``task`` whose ``text`` (the traceback) shows only other
    tasks' stubs raising: "needs lab06.1 first (its stub raised NotImplementedError)", or
    another task's function refused because that task timed out earlier (the autograder's
    ``TaskStopped``): "needs lab06.1 first (it timed out in test_x)". None when the task's own
    stub raised, or no stub did."""
    stopped = [(t, test) for t, test in _TASK_STOPPED.findall(text) if t != task]
    if stopped:
        return f"needs {stopped[0][0]} first (it timed out in {stopped[0][1]})"
    raised = set(_STUB_RAISED.findall(text))
    if not raised or task in raised:
        return None
    others = sorted(raised, key=_task_key)
    its = "its stub" if len(others) == 1 else "their stubs"
    return f"needs {', '.join(others)} first ({its} raised NotImplementedError)"


def _score(results: list[TestResult]) -> tuple[int, int, int, int]:
    p = sum(r.status == "passed" for r in results)
    f = sum(r.status == "failed" for r in results)
    return p, f, sum(r.status == "skipped" for r in results), p + f


def _table(results: list[TestResult]) -> str:
    """Labs, each followed by its tasks (indented): passed, failed, skipped, score; a task whose
    failures all wait on other tasks says which ("needs lab06.1 first")."""
    rows = [f"{'lab / task':<12}{'passed':>8}{'failed':>8}{'skipped':>9}{'score':>10}"]
    for lab in sorted({r.lab for r in results}):
        mine = [r for r in results if r.lab == lab]
        p, f, s, n = _score(mine)
        rows.append(f"{lab:<12}{p:>8}{f:>8}{s:>9}{f'{p}/{n}':>10}")
        for task in sorted({r.task for r in mine}, key=_task_key):
            p, f, s, n = _score([r for r in mine if r.task == task])
            rows.append(f"{'  ' + task:<12}{p:>8}{f:>8}{s:>9}{f'{p}/{n}':>10}" + _needs(mine, task))
    p, f, s, n = _score(results)
    rows.append(f"{'total':<12}{p:>8}{f:>8}{s:>9}{f'{p}/{n}':>10}")
    return "\n".join(rows)


def _needs(results: list[TestResult], task: str) -> str:
    """``  needs lab06.1 first`` when every failed test of ``task`` waits on other tasks."""
    failed = [r.reason for r in results if r.task == task and r.status == "failed"]
    if not failed or not all(reason.startswith("needs ") for reason in failed):
        return ""
    first = sorted(
        {x for reason in failed for x in re.findall(r"lab\d\d\.\d+", reason.split(" first")[0])},
        key=_task_key,
    )
    return f"  needs {', '.join(first)} first"


def _task_key(task: str) -> tuple:
    lab, _, k = task.partition(".")
    return (lab, int(k) if k.isdigit() else 10**6)


def _failure_key(group: tuple[tuple[str, str], list[str]]) -> tuple:
    (task, reason), _ = group
    return (_task_key(task), "not run: " in reason)  # a task's own failure before its not-runs


def _failures(results: list[TestResult]) -> str:
    """One line per failed test (task, name, reason); tests of a task that failed for the same
    reason (a deadlocked task's tests not run) share one line."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r.status == "failed":
            groups.setdefault((r.task, r.reason), []).append(r.name.split("::")[-1])
    lines = []
    for (task, reason), names in sorted(groups.items(), key=_failure_key):
        who = names[0] if len(names) == 1 else f"{len(names)} tests ({names[0]}, ...)"
        lines.append(f"{task} FAILED {who}: {reason}")
    return "\n".join(lines)


def gradescope_json(results: list[TestResult], seconds: float) -> dict:
    """Gradescope's results.json: one entry per graded test, one point each, named by task."""
    tests = []
    for r in results:
        entry = {
            "name": r.name,
            "number": r.task or r.lab,
            "output": r.output,
            "visibility": "visible",
        }
        if r.status == "skipped":
            entry.update(score=0, max_score=0, status="passed", output=f"skipped: {r.output}")
        else:
            passed = r.status == "passed"
            entry.update(score=int(passed), max_score=1, status="passed" if passed else "failed")
        tests.append(entry)
    failures = _failures(results)
    return {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(seconds),
        "output": _table(results) + ("\n\n" + failures if failures else ""),
        "stdout_visibility": "visible",
        "tests": tests,
    }
