"""The grading convention and the grader's behaviour (minitorch_dist/course/grade.py, tests/conftest.py).

Every graded test names one task of its lab; every task the package asks for is graded; a task
can be graded alone (``grade --task``, ``pytest --task``); the terminal gets a short table and one
line per failure while results.json keeps the tracebacks; a collective that cannot complete fails
a graded test within seconds, and the task's later tests do not wait again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from minitorch_dist.course.grade import grade, gradescope_json, lab_files
from minitorch_dist.course.release import MARKER_FILE, strip_solutions

ROOT = Path(__file__).resolve().parent.parent
# A child process's hang guard, not a speed bound: a child importing torch at nice 10 beside
# make test's other jobs can wait minutes for the CPU (past 120 s seen on the newest torch).
CHILD_TIMEOUT_S = 600
instructor_only = pytest.mark.skipif(
    (ROOT / MARKER_FILE).exists(), reason="needs the reference solutions (instructor's source)"
)

_COLLECT = """
import json, pytest
from minitorch_dist.course.grade import lab_of, task_of, task_problem
out = {}
class Plugin:
    def pytest_collection_modifyitems(self, items):
        for i in items:
            out[i.nodeid] = [lab_of(i), task_of(i), task_problem(i)]
pytest.main(["tests", "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[Plugin()])
print("JSON" + json.dumps(out))
"""


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root)
    return env


@pytest.fixture(scope="module")
def collected() -> dict[str, list]:
    """nodeid -> [lab, task, problem] of every test in tests/ (collected in a subprocess)."""
    run = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        cwd=ROOT,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    line = [x for x in run.stdout.splitlines() if x.startswith("JSON")]
    assert line, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(line[-1][4:])


def _solution_tasks(root: Path) -> dict[str, str]:
    """task -> a file of the package holding a ``# BEGIN SOLUTION`` block of it."""
    tasks = {}
    for path in sorted((root / "minitorch_dist").rglob("*.py")):
        if path.name == "release.py":
            continue  # the tool's docstring shows the markers
        for task in strip_solutions(path.read_text())[1]:
            tasks.setdefault(task, str(path.relative_to(root)))
    return tasks


def test_every_graded_test_names_exactly_one_task_of_its_lab(collected: dict) -> None:
    """Catches a graded test without a task (it would not count in any task's row), with two,
    or with a task of another lab (``@pytest.mark.lab06`` + ``task("lab05.2")``)."""
    graded = {k: v for k, v in collected.items() if v[0]}
    assert len(graded) > 100, "the graded tests were not collected"
    problems = {k: v[2] for k, v in collected.items() if v[2]}
    assert not problems, "\n".join(f"{k}: {p}" for k, p in problems.items())


def test_grading_a_lab_collects_every_file_of_its_graded_tests(collected: dict) -> None:
    """Catches a graded test that ``grade --labs`` or ``--task`` would never collect: one in a
    file that does not write its lab's marker as ``mark.labNN`` (a marker built at run time)."""
    files: dict[str, set[str]] = {}
    for nodeid, (lab, _, _) in collected.items():
        if lab:
            files.setdefault(lab, set()).add(nodeid.split("::")[0])
    assert len(files) == 13, sorted(files)  # lab00 to lab12
    for lab, needed in sorted(files.items()):
        found = {p.relative_to(ROOT).as_posix() for p in lab_files(ROOT / "tests", [lab])}
        assert needed <= found, f"{lab}: graded tests in {sorted(needed - found)}, not collected"
    assert lab_files(ROOT / "tests", []) == []


@instructor_only
def test_every_task_of_the_package_has_a_graded_test(collected: dict) -> None:
    """Catches a task a student writes that no test grades (its stub would score full marks).
    Notebook exercises (``BEGIN SOLUTION`` in labs/*.ipynb) are checked in the notebook."""
    asked = _solution_tasks(ROOT)
    assert {"lab05.1", "lab06.1", "lab09.1"} <= set(asked)
    graded = {v[1] for v in collected.values() if v[0]}
    missing = {t: f for t, f in asked.items() if t not in graded}
    assert not missing, f"tasks with a solution block but no graded test: {missing}"


_SYNTHETIC = """
import pytest
import torch.distributed as dist
from minitorch_dist import launch


def _stuck(rank, world_size):
    if rank == 0:
        dist.barrier()  # rank 1 never joins: the collective cannot complete


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
def test_a_pass():
    pass


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
def test_b_deadlock():
    launch(_stuck, 2, timeout=120)


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
def test_c_after_the_deadlock():
    launch(_stuck, 2, timeout=120)


@pytest.mark.lab07
@pytest.mark.task("lab07.2")
def test_d_other_task():
    raise NotImplementedError("lab07.2: do it")


@pytest.mark.lab08
@pytest.mark.task("lab08.1")
@pytest.mark.parametrize("n", [pytest.param(1, marks=pytest.mark.skip(reason="needs a GPU")), 2])
def test_e_lab08(n):
    assert n == 3, "a long " + "x" * 30000 + " message"
"""


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    """A repository with the real conftest and a few graded tests: passing, deadlocking,
    failing with a stub, skipped for a GPU, and failing with a huge message."""
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_synthetic_tasks.py").write_text(textwrap.dedent(_SYNTHETIC))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["lab07", "lab08", "task(id)"]\n'
    )
    return tmp_path


def test_a_deadlocked_task_fails_in_seconds_and_stops_its_other_tests(synthetic: Path) -> None:
    """Catches a deadlock waiting out the launch's 120 s (twice): the graded collective timeout
    fails the first test within seconds, naming the stuck rank, and the task's next test fails
    at once; the other task and lab are graded as usual. The terminal shows the table first and
    one line per failure; the tracebacks (capped) are in results.json."""
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--results", "r.json"],
        cwd=synthetic,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - start
    assert run.returncode == 0, run.stdout + run.stderr
    # Not timed (115 s seen on a loaded 2-core VM): the messages below show that the 10-s
    # collective timeout fired, the launch's 120 s did not, and the next test never waited.
    print(f"the synthetic repository graded in {seconds:.0f} s")
    report = json.loads((synthetic / "r.json").read_text())
    tests = {t["name"].split("::")[-1]: t for t in report["tests"]}
    assert tests["test_a_pass"]["status"] == "passed"
    assert "did not finish" in tests["test_b_deadlock"]["output"]
    assert "a collective timed out after 10 s" in tests["test_b_deadlock"]["output"]
    assert "within timeout=120 s" not in tests["test_b_deadlock"]["output"]
    assert "rank 0 was stuck at" in tests["test_b_deadlock"]["output"]
    assert (
        "not run: lab07.1 deadlocked in test_b_deadlock"
        in (tests["test_c_after_the_deadlock"]["output"])
    )
    assert "lab07.2: do it" in tests["test_d_other_task"]["output"]
    assert tests["test_e_lab08[1]"]["max_score"] == 0
    assert 2000 < len(tests["test_e_lab08[2]"]["output"]) < 12_000  # capped, not dropped
    assert {t["number"] for t in report["tests"]} == {"lab07.1", "lab07.2", "lab08.1"}
    assert report["score"] == 1 and sum(t["max_score"] for t in report["tests"]) == 5
    # the terminal: table first (labs, then their tasks), one line per failure, no traceback
    lines = run.stdout.splitlines()
    assert lines[0].startswith("lab / task")
    rows = [re.sub(r"\s+", " ", x).strip() for x in lines[1:7]]
    assert rows == [
        "lab07 1 3 0 1/4",
        "lab07.1 1 2 0 1/3",
        "lab07.2 0 1 0 0/1",
        "lab08 0 1 1 0/1",
        "lab08.1 0 1 1 0/1",
        "total 1 4 1 1/5",
    ]
    failures = [x for x in lines if " FAILED " in x]
    assert len(failures) == 4 and all(len(x) < 400 for x in failures)
    assert "Traceback" not in run.stdout and "line 1" not in run.stdout
    assert len(run.stdout) < 3000


def test_one_task_alone_with_grade_and_with_plain_pytest(synthetic: Path) -> None:
    """Catches --task that grades the whole lab (or nothing): both ways run lab07.2 alone."""
    results = grade(synthetic, tasks=["lab07.2"])
    assert [r.name.split("::")[-1] for r in results] == ["test_d_other_task"]
    assert results[0].task == "lab07.2" and "lab07.2: do it" in results[0].reason
    assert "lab07.2" in gradescope_json(results, 1.0)["output"]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "-m",
            "lab07",
            "--task",
            "lab07.2",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=synthetic,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert "1 failed, 5 deselected" in run.stdout, run.stdout[-2000:]
    with pytest.raises(ValueError, match="task ids look like"):
        grade(synthetic, tasks=["lab7.1"])


_STUCK = """
    if rank == n - 1:  # the mistake: this rank waits for a message nobody sends, never sending
        dist.recv(torch.empty(1), src=dist.get_global_rank(group, 0) if group else 0, tag=99)
"""


@instructor_only
@pytest.mark.slow
def test_a_deadlocked_ring_costs_lab05_one_collective_timeout(tmp_path: Path) -> None:
    """Catches a grader that waits out every test's launch timeout (14 tests of 60-120 s: 18
    minutes) or every test's collective timeout (14 x 10 s) when lab05.1's ring deadlocks: in a
    copy whose ring_reduce_scatter has one rank that never sends, the first of lab05.1's tests
    fails on the 10-s collective timeout, at most one more waits, the others fail without
    running, and lab05.2 and lab05.3 still pass. The wall time is only a loose guard (it
    depends on the machine's load); the counts carry the check."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("minitorch_dist", "tests"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    ring = tmp_path / "minitorch_dist" / "comm" / "ring.py"
    text = ring.read_text()
    anchor = "    # BEGIN SOLUTION lab05.1: the reduce-scatter phase of the ring\n"
    assert anchor in text
    ring.write_text(
        text.replace(
            anchor,
            anchor + textwrap.dedent(_STUCK).replace("\n", "\n    ").lstrip("\n").rstrip(" "),
        )
    )
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--labs", "lab05", "--results", "r.json"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    seconds = time.monotonic() - start
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # The wall time is printed, not asserted: on a loaded 2-core machine grading lab 5 alone
    # takes minutes. What bounds it is counted below (at most two tests wait out the 10-s
    # collective timeout, the rest of the task is not run) and the subprocess's own timeout.
    print(f"lab 5 with a deadlocked ring graded in {seconds:.0f} s")
    tests = json.loads((tmp_path / "r.json").read_text())["tests"]
    ring_tests = [t for t in tests if t["number"] == "lab05.1"]
    assert len(ring_tests) == 14 and all(t["status"] == "failed" for t in ring_tests)
    waited = [t for t in ring_tests if "did not finish" in t["output"]]
    assert 1 <= len(waited) <= 2, [t["output"][:300] for t in ring_tests]
    assert all("timed out after 10 s" in t["output"] for t in waited), waited[0]["output"][:2000]
    assert sum("not run: lab05.1 deadlocked" in t["output"] for t in ring_tests) >= 12
    others = [t for t in tests if t["number"] != "lab05.1"]
    assert others and all(t["status"] == "passed" for t in others), "lab05.2/3 use the ring?"


def test_a_test_file_that_does_not_import_is_reported_not_hidden(tmp_path: Path) -> None:
    """Catches a grader that stops at a collection error and says "no graded tests found": the
    other files are graded, and the broken file is named with its error (terminal and
    results.json); with nothing else to grade, it says that files failed to import."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_tooling.py").write_text("import not_installed_here\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["lab07", "task(id)"]\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--results", "r.json"],
        cwd=tmp_path,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert run.returncode == 1 and "no graded tests found" not in run.stderr, run.stderr
    assert "test_tooling.py" in run.stderr and "not_installed_here" in run.stderr, run.stderr
    assert "failed to import" in run.stderr
    (tmp_path / "tests" / "test_graded.py").write_text(
        'import pytest\n\n@pytest.mark.lab07\n@pytest.mark.task("lab07.1")\n'
        "def test_ok():\n    pass\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--results", "r.json"],
        cwd=tmp_path,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 1 and "1/1" in run.stdout
    assert "test_tooling.py" in report["output"] and "not_installed_here" in report["output"]


def test_a_test_past_the_timeout_stops_its_task_not_the_others(tmp_path: Path) -> None:
    """Catches a local grade that waits out ``--timeout`` in every test of an endless task: the
    first test times out, the task's next test fails at once naming it, another task runs."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_loop.py").write_text(
        textwrap.dedent(
            """
            import time
            import pytest

            @pytest.mark.lab07
            @pytest.mark.task("lab07.1")
            def test_a_forever():
                while True:
                    time.sleep(0.05)

            @pytest.mark.lab07
            @pytest.mark.task("lab07.1")
            def test_b_forever_again():
                while True:
                    time.sleep(0.05)

            @pytest.mark.lab07
            @pytest.mark.task("lab07.2")
            def test_c_other():
                pass
            """
        )
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["lab07", "task(id)"]\n'
    )
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--timeout", "3", "--results", "r.json"],
        cwd=tmp_path,
        env=_env(ROOT),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    tests = {
        t["name"].split("::")[-1]: t for t in json.loads((tmp_path / "r.json").read_text())["tests"]
    }
    assert "Timeout" in tests["test_a_forever"]["output"]
    assert "not run: lab07.1 timed out in test_a_forever" in tests["test_b_forever_again"]["output"]
    assert tests["test_c_other"]["status"] == "passed"
    print(f"graded in {time.monotonic() - start:.0f} s")


_RANKS_WORK = """
import torch
import torch.distributed as dist


def split_work(t, n):
    sizes = [1] * (n + 1)  # the mistake: one split too many
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, sizes, sizes)
    return out


def spin(rank):
    x = 0
    while True:  # the mistake: never ends
        x += 1
"""
_RANKS_TESTS = """
import pytest
import torch
from minitorch_dist import launch
from course_pkg.work import spin, split_work


def _split(rank, world_size):
    return split_work(torch.ones(3), world_size)


def _spin(rank, world_size):
    return spin(rank)


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
def test_a_rank_raises():
    launch(_split, 3)


@pytest.mark.lab07
@pytest.mark.task("lab07.2")
def test_b_ranks_never_end():
    launch(_spin, 2)
"""


def test_a_multi_rank_failure_shows_the_students_line_not_the_launchers(tmp_path: Path) -> None:
    """Catches a multi-rank test's report that points at the launcher (its ``poll``, its
    ``_raise_if_failed``) instead of the student's code: the score table's line names the
    student's file, line and function, for a rank that raised (inside torch) and for ranks
    stopped by the time limit; the report in results.json shows neither the launcher's source
    nor its waiting loop."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "course_pkg").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "course_pkg" / "__init__.py").write_text("")
    (tmp_path / "course_pkg" / "work.py").write_text(_RANKS_WORK)
    (tmp_path / "tests" / "test_ranks.py").write_text(_RANKS_TESTS)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["lab07", "task(id)"]\n'
    )
    env = _env(ROOT)
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{ROOT}"
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--timeout", "8", "--results", "r.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = {
        x.split(" FAILED ")[1].split(":")[0]: x for x in run.stdout.splitlines() if " FAILED " in x
    }
    raised, looped = lines["test_a_rank_raises"], lines["test_b_ranks_never_end"]
    assert "(at course_pkg/work.py:9 in split_work)" in raised, raised
    assert "Timeout" in looped and re.search(r"at course_pkg/work\.py:1[56] in spin\)$", looped)
    tests = {
        t["name"].split("::")[-1]: t["output"]
        for t in json.loads((tmp_path / "r.json").read_text())["tests"]
    }
    for output in tests.values():
        assert "def _raise_if_failed" not in output and "launching/launcher.py" not in output
        assert "selectors.py" not in output and "poll" not in output, output[-3000:]
    assert "dist.all_to_all_single(out, t, sizes, sizes)" in tests["test_a_rank_raises"]
    assert "where the ranks were" in tests["test_b_ranks_never_end"]
    assert re.search(
        r"rank 0: \S*course_pkg/work\.py:1[56] in spin: ", tests["test_b_ranks_never_end"]
    )


@instructor_only
def test_the_instructors_guide_lists_the_points_of_every_task() -> None:
    """Catches a points table typed by hand or left stale: instructors.md holds the table that
    the graded tests and the lab notebooks give today, and it names every task, the notebook
    exercises (no points on Gradescope) included."""
    from minitorch_dist.course.points import BEGIN, END, current_table, notebook_tasks

    table = current_table(ROOT)
    guide = (ROOT / "instructors.md").read_text()
    assert f"{BEGIN}\n\n{table}\n{END}" in guide, "run python -m minitorch_dist.course.points"
    tasks = set(_solution_tasks(ROOT)) | set(notebook_tasks(ROOT))
    assert len(tasks) > 60 and set(notebook_tasks(ROOT)) - set(_solution_tasks(ROOT))
    missing = [t for t in sorted(tasks) if not re.search(rf"\b{re.escape(t)}\b", table)]
    assert not missing, missing
