"""Renamed task ids (minitorch_dist/course/renamed_tasks.py): an old id, as notebooks and
instructions already handed out write it, grades and checks the task it became; no old id is
still in use, and every new one exists."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from minitorch_dist.course.answers import Answer, check_answer, load_digests, make_digests
from minitorch_dist.course.grade import grade, main
from minitorch_dist.course.renamed_tasks import TASK_ALIASES, current_tasks

ROOT = Path(__file__).resolve().parent.parent

_GRADED = """
import pytest


@pytest.mark.lab11
@pytest.mark.task("lab11.1")
def test_grid():
    pass


@pytest.mark.lab12
@pytest.mark.task("lab12.1")
def test_fit():
    pass


@pytest.mark.lab12
@pytest.mark.task("lab12.3")
def test_exercise():
    pass
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the real conftest and one graded test for each of three tasks."""
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_graded.py").write_text(textwrap.dedent(_GRADED))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["lab11", "lab12", "task(id)"]\n'
    )
    return tmp_path


def test_an_old_task_id_grades_the_task_it_became(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Catches an old id that grades nothing (or lab 11's tests): lab11.2 runs lab12.1's test,
    and ``grade --task lab11.6`` on the command line runs lab12.3's."""
    results = grade(repo, tasks=["lab11.2"])
    assert [(r.name.split("::")[-1], r.task) for r in results] == [("test_fit", "lab12.1")]
    monkeypatch.chdir(repo)
    assert main(["--task", "lab11.6", "--results", "r.json"]) == 0
    tests = json.loads((repo / "r.json").read_text())["tests"]
    assert [(t["name"].split("::")[-1], t["number"]) for t in tests] == [
        ("test_exercise", "lab12.3")
    ]
    assert "lab11.6 is now lab12.3" in capsys.readouterr().err


def test_an_old_exercise_id_checks_the_new_answer(capsys: pytest.CaptureFixture) -> None:
    """Catches check_answer("lab11.9", ...) from a notebook handed out before the rename
    failing with "no stored answer"."""
    digests = make_digests({"lab12.6": Answer(value=28672)})
    check_answer("lab11.9", 28672, digests)
    assert "lab12.6: correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="not the expected answer"):
        check_answer("lab11.9", 28673, digests)
    check_answer("lab11.9", 14 * 64 * 256 // 2)  # the stored digest of the real exercise


def test_no_old_id_is_in_use_and_every_new_one_exists() -> None:
    """Catches an alias that would hide a task (its old id still defined) or point at nothing
    (its new id defined nowhere): the ids of the solution blocks, graded tests and answers."""
    files = [*(ROOT / "minitorch_dist").rglob("*.py"), *(ROOT / "labs").glob("*.ipynb")]
    files += [p for p in (ROOT / "tests").glob("test_*.py") if p.name != Path(__file__).name]
    text = "\n".join(p.read_text() for p in files)
    ids = r'\\?"?(lab\d\d\.\d+)'
    defined = set(re.findall(r"BEGIN SOLUTION " + ids, text))
    defined |= set(re.findall(r"mark\.task\(" + ids, text)) | set(load_digests())
    assert not defined & set(TASK_ALIASES), sorted(defined & set(TASK_ALIASES))
    assert set(TASK_ALIASES.values()) <= defined, sorted(set(TASK_ALIASES.values()) - defined)
    assert current_tasks(["lab11.2", "lab12.1", "lab11.1"]) == ["lab12.1", "lab11.1"]
