"""The student release and the grader: grading is real only if the stubs make every test fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_dist.course.grade import grade, gradescope_json
from minitorch_dist.course.release import (
    MARKER_FILE,
    SOURCE_REPO,
    SolutionBlockError,
    make_release,
    strip_solutions,
)

ROOT = Path(__file__).resolve().parent.parent
GRADED = " or ".join(f"lab{i:02d}" for i in range(100))
in_student_release = pytest.mark.skipif(
    (ROOT / MARKER_FILE).exists(), reason="this is a student release; these check the instructor's"
)


def test_stub_keeps_indentation_and_names_the_task() -> None:
    """Catches a stub at the wrong indentation (a SyntaxError) or without its task id."""
    src = textwrap.dedent(
        '''
        def f(x):
            """Doc stays."""
            if x < 0:
                raise ValueError("x must be >= 0")
            # BEGIN SOLUTION lab01.1: square it
            y = x * x
            return y
            # END SOLUTION
        '''
    )
    out, tasks = strip_solutions(src)
    assert tasks == ["lab01.1"]
    assert '    raise NotImplementedError("lab01.1: square it")\n' in out
    assert "x * x" not in out and '"""Doc stays."""' in out and "x must be >= 0" in out
    namespace: dict = {}
    exec(out, namespace)
    with pytest.raises(NotImplementedError, match="lab01.1: square it"):
        namespace["f"](2)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("# BEGIN SOLUTION lab01.1\nx = 1\n", "never ended"),
        ("x = 1\n# END SOLUTION\n", "END SOLUTION without a BEGIN"),
        ("# BEGIN SOLUTION lab1.ex\n# END SOLUTION\n", "must look like lab01.2"),
        (
            "# BEGIN SOLUTION lab01.1\n# BEGIN SOLUTION lab01.2\n# END SOLUTION\n",
            "inside the block",
        ),
    ],
)
def test_malformed_blocks_are_errors(src: str, message: str) -> None:
    """Catches a release that silently ships a solution because a marker was mistyped."""
    with pytest.raises(SolutionBlockError, match=message):
        strip_solutions(src)


def test_grader_scores_and_writes_gradescope_json(tmp_path: Path) -> None:
    """Catches a grader that counts unmarked tests, or fails a student for lacking a GPU."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.lab07
            @pytest.mark.task("lab07.1")
            def test_pass(): pass

            @pytest.mark.lab07
            @pytest.mark.task("lab07.1")
            def test_fail(): raise NotImplementedError("lab07.1: do it")

            @pytest.mark.lab08
            @pytest.mark.task("lab08.1")
            @pytest.mark.skip(reason="needs a GPU")
            def test_gpu(): pass

            def test_not_graded(): raise AssertionError
            """
        )
    )
    results = grade(tmp_path)
    by_name = {r.name.split("::")[-1]: r for r in results}
    assert set(by_name) == {"test_pass", "test_fail", "test_gpu"}
    assert by_name["test_pass"].status == "passed" and by_name["test_fail"].status == "failed"
    assert "lab07.1: do it" in by_name["test_fail"].output
    assert by_name["test_gpu"].status == "skipped" and "needs a GPU" in by_name["test_gpu"].output
    report = gradescope_json(results, 1.0)
    assert report["score"] == 1
    assert sum(t["max_score"] for t in report["tests"]) == 2  # the GPU test is not held against
    assert "lab07" in report["output"] and "1/2" in report["output"]
    assert "lab07.1" in report["output"] and {t["number"] for t in report["tests"]} == {
        "lab07.1",
        "lab08.1",
    }
    for t in report["tests"]:  # Gradescope's fields, with their types
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert isinstance(t["score"], int) and isinstance(t["max_score"], int)
        assert t["status"] in ("passed", "failed") and t["visibility"] == "visible"
    assert isinstance(report["score"], int) and isinstance(report["execution_time"], int)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    dest = tmp_path_factory.mktemp("student") / "edition"
    return dest, make_release(ROOT, dest)


@in_student_release
def test_release_has_no_solutions_left(release: tuple[Path, dict]) -> None:
    """Catches solution code leaking into the student edition, and notebooks shipped executed."""
    dest, counts = release
    assert counts, "no solution blocks found in the instructor source"
    assert (dest / MARKER_FILE).exists()
    assert not (dest / "tests" / "test_mutants.py").exists(), "the mutants hold near-solutions"
    assert not list((dest / "tests").glob("test_*exercises.py")), "they hold worked answers"
    assert not (dest / "tests" / "test_no_reference.py").exists(), "its samples are reference code"
    for path in (dest / "minitorch_dist").rglob("*.py"):
        if path.name == "release.py":
            continue  # the tool's docstring shows the markers
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, path
    for nb in (dest / "labs").glob("*.ipynb"):  # code cells; prose may name the markers
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert "BEGIN SOLUTION" not in "".join(cell["source"]), nb.name
    for nb in (dest / "labs").glob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            assert not cell.get("outputs"), f"{nb.name} ships outputs"


def _graded_ids(root: Path) -> set[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "--collect-only",
            "-q",
            "-m",
            GRADED,
            "-p",
            "no:cacheprovider",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


@in_student_release
def test_every_graded_test_fails_on_the_release(release: tuple[Path, dict]) -> None:
    """The grading is real: in the student edition the package imports, and every graded test
    fails with NotImplementedError (not an import error, not a hang, not a pass)."""
    dest, _ = release
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(dest)
    imports = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
            import importlib, pkgutil, minitorch_dist
            print(minitorch_dist.__file__)
            for m in pkgutil.walk_packages(minitorch_dist.__path__, "minitorch_dist."):
                if m.name != "minitorch_dist.__main__":
                    importlib.import_module(m.name)
            """
            ),
        ],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip().startswith(str(dest)), "imported the instructor's package"

    results_path = dest / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.grade", "--results", str(results_path)],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tests = json.loads(results_path.read_text())["tests"]
    assert {t["name"] for t in tests} == _graded_ids(ROOT), "graded tests differ from the source"
    for t in tests:
        if t["output"].startswith("skipped: "):
            continue  # a GPU test on a machine without one
        assert t["status"] == "failed", f"{t['name']} passes on the student release"
        assert "NotImplementedError" in t["output"], (
            f"{t['name']} failed for another reason:\n{t['output']}"
        )


def test_keep_leaves_a_blocks_code_without_its_markers() -> None:
    src = "def f():\n    # BEGIN SOLUTION lab04.1: add\n    return 1\n    # END SOLUTION\n"
    kept, tasks = strip_solutions(src, keep=lambda task: task.startswith("lab04"))
    assert kept == "def f():\n    return 1\n" and tasks == []
    stubbed, tasks = strip_solutions(src, keep=lambda task: False)
    assert "NotImplementedError" in stubbed and tasks == ["lab04.1"]


COURSE_REPO = "https://github.com/example-course/llm-memory-2027"


@pytest.fixture(scope="module")
def assignment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    dest = tmp_path_factory.mktemp("assignment") / "edition"
    return dest, make_release(ROOT, dest, labs=["lab05"], repo=COURSE_REPO)


@in_student_release
def test_one_assignment_stubs_its_lab_and_later_ones(assignment: tuple[Path, dict]) -> None:
    """--labs lab05: lab 5 and the labs after it are stubbed; labs 0-4 keep reference code."""
    dest, counts = assignment
    labs = {task[:5] for task in counts}
    assert "lab05" in labs and min(labs) == "lab05", sorted(labs)
    for path in (dest / "minitorch_dist").rglob("*.py"):
        text = path.read_text()
        if path.name == "release.py":
            continue  # the tool's docstring shows the markers and a stub
        assert "BEGIN SOLUTION" not in text, path
        assert 'NotImplementedError("lab01' not in text and 'NotImplementedError("lab04' not in text
    readme = (dest / "README.md").read_text()
    assert "lab05" in readme and "--task lab05.1" in readme and "lab06.1" not in readme
    assert "minitorch_dist.release" not in readme, "the instructor's commands stay behind"


@in_student_release
def test_one_assignment_points_at_its_own_repository(assignment: tuple[Path, dict]) -> None:
    dest, _ = assignment
    files = [dest / "_config.yml", dest / "README.md", *sorted((dest / "labs").glob("*.ipynb"))]
    for path in files:
        assert SOURCE_REPO not in path.read_text(), f"{path.name} still names the source repo"
    assert COURSE_REPO in (dest / "_config.yml").read_text()
    installs = [nb for nb in files[2:] if f'REPO = \\"{COURSE_REPO}\\"' in nb.read_text()]
    assert len(installs) == len(files) - 2, "every lab's install cell names the edition"


@in_student_release
def test_one_assignment_grades_its_lab_zero_and_earlier_labs_full(
    assignment: tuple[Path, dict],
) -> None:
    dest, _ = assignment
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(dest)
    results = dest / "results_assignment.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "minitorch_dist.grade",
            "--labs",
            "lab04",
            "lab05",
            "--results",
            str(results),
        ],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tests = json.loads(results.read_text())["tests"]
    by_lab = {lab: [t for t in tests if t["number"].startswith(lab)] for lab in ("lab04", "lab05")}
    assert by_lab["lab04"] and by_lab["lab05"]
    assert all(t["status"] == "passed" for t in by_lab["lab04"]), "lab 4 keeps its reference"
    for t in by_lab["lab05"]:
        assert t["status"] == "failed" and "NotImplementedError" in t["output"], t["name"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"labs": ["lab5"]}, "labs must be names like lab05"),
        ({"labs": []}, "labs must be"),
        ({"repo": "github.com/x/y"}, "repo must be an https://, ssh://"),
        ({"repo": "http://example.org/y"}, "repo must be an https://, ssh://"),
    ],
)
def test_bad_release_arguments_are_value_errors(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_release(ROOT, tmp_path / "edition", **kwargs)


@in_student_release
def test_colab_cell_gets_an_editable_course_that_grades(
    assignment: tuple[Path, dict], tmp_path: Path
) -> None:
    """What a lab's first cell does in Colab, replayed from a local copy of the edition: clone
    the edition's repository (with its tests), import the package from the clone, grade a task."""
    dest, _ = assignment
    lab = next((dest / "labs").glob("lab05_*.ipynb"))
    cell = next(c for c in json.loads(lab.read_text())["cells"] if c["cell_type"] == "code")
    source = "".join(cell["source"])
    assert f'REPO = "{COURSE_REPO}"' in source and "git clone -q {REPO} /content/course" in source
    assert "pip install -q -e /content/course" in source and "--task lab05.1" in source
    git = ["git", "-c", "user.email=ta@example.org", "-c", "user.name=TA"]
    if not (dest / ".git").exists():  # the course's repository, as the instructor pushes it
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "edition"]):
            subprocess.run(git + args, cwd=dest, check=True, capture_output=True)
    course = tmp_path / "content" / "course"
    subprocess.run(git + ["clone", "-q", str(dest), str(course)], check=True, capture_output=True)
    assert (course / "tests" / "conftest.py").exists(), "the clone carries the tests"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(course)  # the cell's sys.path.insert(0, "/content/course")
    where = subprocess.run(
        [sys.executable, "-c", "import minitorch_dist; print(minitorch_dist.__file__)"],
        cwd=course / "labs",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(course)), where
    results = course / "results.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "minitorch_dist.grade",
            "--task",
            "lab05.1",
            "--results",
            str(results),
        ],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tests = json.loads(results.read_text())["tests"]
    assert tests and {t["number"] for t in tests} == {"lab05.1"}
    assert all("NotImplementedError" in t["output"] for t in tests)


def test_a_release_names_what_its_environment_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a release that starts without git, or an autograder release without pytest or
    torch in its Python, and fails halfway (a bare "collecting failed: GRADED={}"): it says
    what is missing before writing anything."""
    import importlib.util

    from minitorch_dist.course import edition

    monkeypatch.setattr(edition.shutil, "which", lambda name: None)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        edition.importlib.util, "find_spec", lambda name: None if name == "pytest" else real(name)
    )
    with pytest.raises(ValueError, match="git on PATH.*'pytest'") as error:
        make_release(ROOT, tmp_path / "edition", labs=["lab00"], autograder=tmp_path / "a.zip")
    assert "'torch'" not in str(error.value), "torch is there"
    assert not (tmp_path / "edition").exists() and not (tmp_path / "a.zip").exists()


@in_student_release
def test_a_failed_release_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a half-written edition (and zip) left by a release whose bundle failed: the
    next release would need --force."""
    from minitorch_dist.course import autograder

    def fail(*args: object, **kwargs: object) -> None:
        (tmp_path / "a.zip").write_text("half")
        raise ValueError("collecting the graded tests failed")

    monkeypatch.setattr(autograder, "write_bundle", fail)
    with pytest.raises(ValueError, match="collecting"):
        make_release(ROOT, tmp_path / "edition", labs=["lab00"], autograder=tmp_path / "a.zip")
    assert not (tmp_path / "edition").exists() and not (tmp_path / "a.zip").exists()


@in_student_release
def test_the_readme_names_the_notebook_tasks_gradescope_does_not_grade(
    assignment: tuple[Path, dict],
) -> None:
    """Catches an edition whose notebook exercises silently carry no points on Gradescope."""
    dest, counts = assignment
    manifest = json.loads((dest / "submission.json").read_text())
    in_notebooks = sorted(t for t in counts if t.startswith("lab05") and t not in manifest["tasks"])
    assert in_notebooks, "lab 5 has notebook exercises"
    words = " ".join((dest / "README.md").read_text().split())
    assert f"notebook exercises ({', '.join(in_notebooks)}) are not part of the submission" in words
    listed = f"notebook exercises {', '.join(in_notebooks)}, which check themselves in their"
    assert f"{listed} notebook and carry no points on Gradescope" in words, "the task list says so"
