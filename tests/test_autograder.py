"""The course from the instructor's release to a score on Gradescope, replayed in temporary
folders: the edition is a repository one push away from its URL, ``submit`` zips the manifest's
files, and the autograder bundle grades a submission in Gradescope's layout (``source/``,
``submission/``, ``results/`` under ``$AUTOGRADER_ROOT``) without trusting anything else in it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from minitorch_dist.course.edition import check_repo_url, repo_folder
from minitorch_dist.course.release import MANIFEST_FILE, MARKER_FILE, make_release

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    (ROOT / MARKER_FILE).exists(), reason="this is a student release; these check the instructor's"
)
LABS = ["lab00"]  # a cheap lab: four graded tests in a few seconds


@pytest.mark.parametrize(
    "url, folder",
    [
        ("https://github.com/c/hw3", "hw3"),
        ("git@github.com:c/hw3.git", "hw3"),
        ("ssh://git@host.org/c/hw3.git", "hw3"),
        ("file:///srv/git/hw3.git/", "hw3"),
    ],
)
def test_repo_urls_https_ssh_and_file_are_accepted(url: str, folder: str) -> None:
    assert repo_folder(check_repo_url(url)) == folder


@pytest.mark.parametrize("url", ["github.com/c/hw3", "http://x/y", "https://x/y z", "/srv/hw3"])
def test_other_repo_urls_are_value_errors(url: str) -> None:
    with pytest.raises(ValueError, match="https://, ssh://"):
        check_repo_url(url)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An edition of lab 0 with a bare repository as its URL, and its autograder bundle."""
    base = tmp_path_factory.mktemp("course")
    remote = base / "hw0.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    edition, bundle = base / "edition", base / "autograder.zip"
    make_release(ROOT, edition, labs=LABS, repo=remote.as_uri(), autograder=bundle)
    return {"base": base, "remote": remote, "edition": edition, "bundle": bundle}


def test_the_edition_is_one_commit_ready_to_push(course: dict) -> None:
    """Catches an edition that is not a repository, or whose push does not reach its URL."""
    edition, remote = course["edition"], course["remote"]

    def git(*args: str, cwd: Path = edition) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
        ).stdout.strip()

    assert git("rev-list", "--count", "HEAD") == "1"
    assert git("status", "--porcelain") == "", "files left out of the commit"
    assert git("remote", "get-url", "origin") == remote.as_uri()
    git("push", "-q", "origin", "main")
    clone = course["base"] / "clone"
    git("clone", "-q", remote.as_uri(), str(clone), cwd=course["base"])
    assert (clone / MANIFEST_FILE).is_file() and (clone / "tests" / "conftest.py").is_file()
    manifest = json.loads((clone / MANIFEST_FILE).read_text())
    assert manifest["labs"] == LABS and manifest["files"] == ["minitorch_dist/comm/halves.py"]
    stub = (clone / manifest["files"][0]).read_text()
    assert 'raise NotImplementedError("lab00.1' in stub


def _gradescope(course: dict, name: str, files: dict[str, str]) -> Path:
    """A Gradescope root: the bundle unzipped into source/, ``files`` in submission/."""
    root = course["base"] / name
    with zipfile.ZipFile(course["bundle"]) as z:
        z.extractall(root / "source")
    assert {"setup.sh", "run_autograder"} <= {p.name for p in (root / "source").iterdir()}
    for rel, text in files.items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / rel).write_text(text)
    (root / "results").mkdir(exist_ok=True)
    return root


def _run_autograder(root: Path, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ.update(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, **env)
    run = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def _submit_instructors_files(course: dict) -> dict[str, str]:
    """What a student who wrote the reference sends: the edition with the instructor's files,
    zipped by ``python -m minitorch_dist.submit``; returns the zip's files."""
    edition = course["base"] / "solved"
    if not edition.exists():
        shutil.copytree(course["edition"], edition)
    manifest = json.loads((edition / MANIFEST_FILE).read_text())
    for rel in manifest["files"]:
        shutil.copyfile(ROOT / rel, edition / rel)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(edition)
    run = subprocess.run(
        [sys.executable, "-m", "minitorch_dist.submit"],
        cwd=edition,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    path = Path(run.stdout.strip().splitlines()[-1])
    assert path.parent == edition and path.suffix == ".zip", run.stdout
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == manifest["files"], "the zip holds exactly the manifest"
        return {n: z.read(n).decode() for n in z.namelist()}


@pytest.mark.slow
def test_a_correct_submission_scores_full_marks(course: dict) -> None:
    root = _gradescope(course, "correct", _submit_instructors_files(course))
    results = _run_autograder(root)
    tests = results["tests"]
    assert len(tests) == 4 and {t["number"] for t in tests} == {"lab00.1"}
    assert results["score"] == sum(t["max_score"] for t in tests) == 4, results["output"]
    assert all(t["status"] == "passed" for t in tests)


_SKIP_ALL = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="needs a GPU"))
"""
_FORGED = {"score": 100, "tests": [{"name": "x", "score": 100, "max_score": 100}]}


@pytest.mark.slow
def test_a_tampered_submission_scores_zero(course: dict) -> None:
    """Catches an autograder that trusts the submission: the stubs, with a conftest that skips
    every test, a forged results.json and a test of its own, score 0 of 4."""
    stub = (course["edition"] / "minitorch_dist" / "comm" / "halves.py").read_text()
    files = {
        "minitorch_dist/comm/halves.py": stub,
        "tests/conftest.py": _SKIP_ALL,
        "conftest.py": _SKIP_ALL,
        "results.json": json.dumps(_FORGED),
        "results/results.json": json.dumps(_FORGED),
        "tests/test_lab00_mine.py": "import pytest\n\n@pytest.mark.lab00\n"
        '@pytest.mark.task("lab00.1")\ndef test_free_point():\n    pass\n',
    }
    results = _run_autograder(_gradescope(course, "tampered", files))
    tests = results["tests"]
    assert results["score"] == 0 and len(tests) == 4
    assert sum(t["max_score"] for t in tests) == 4, "a skip must not lower the maximum"
    assert all("NotImplementedError" in t["output"] for t in tests), tests[0]["output"]


@pytest.mark.slow
def test_a_missing_file_scores_its_tasks_zero_and_names_it(course: dict) -> None:
    results = _run_autograder(_gradescope(course, "empty", {"notes.txt": "I forgot"}))
    assert results["score"] == 0
    assert "missing minitorch_dist/comm/halves.py" in results["output"]
    assert all("missing minitorch_dist/comm/halves.py" in t["output"] for t in results["tests"])


@pytest.mark.slow
def test_an_endless_loop_costs_its_tests_not_the_results(course: dict) -> None:
    """Catches a submission that hangs the autograder: each test stops at the per-test limit,
    and results.json is written with every test scored."""
    solved = _submit_instructors_files(course)
    rel = "minitorch_dist/comm/halves.py"
    body = textwrap.dedent(
        """
        import time as _time


        def _forever(*args, **kwargs):
            while True:
                _time.sleep(0.01)


        all_reduce_by_halves = _forever
        """
    )
    root = _gradescope(course, "endless", {rel: solved[rel] + body})
    results = _run_autograder(root, AUTOGRADER_TEST_TIMEOUT="4")
    tests = results["tests"]
    assert len(tests) == 4 and results["score"] == 0
    assert any("Timeout" in t["output"] for t in tests), tests[0]["output"]


def test_the_editions_texts_speak_of_its_own_labs_and_stubs(course: dict) -> None:
    """Catches an edition README with another lab's examples, or lab text that sends students
    to solution markers the edition does not have."""
    edition = course["edition"]
    readme = (edition / "README.md").read_text()
    assert "--task lab00.1" in readme and "lab05" not in readme
    assert readme.count("pip install") == 1 and '".[student]"' in readme
    assert "python -m minitorch_dist.submit" in readme
    for nb in sorted((edition / "labs").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells)
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, nb.name
        first = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
        assert first.startswith("import sys\n\nKEEP_IN_DRIVE = False"), nb.name
        assert 'drive.mount("/content/drive")' in first and "minitorch_dist.submit" in first


def test_a_submitted_file_is_found_below_one_folder_and_links_are_ignored(tmp_path: Path) -> None:
    """Catches a zip of the edition's folder scored as missing, or a link that reads a file
    from outside the submission."""
    from minitorch_dist.course.autograder import _find

    rel = "minitorch_dist/comm/halves.py"
    nested = tmp_path / "hw0" / rel
    nested.parent.mkdir(parents=True)
    nested.write_text("x = 1\n")
    assert _find(tmp_path, rel) == nested
    (tmp_path / "minitorch_dist" / "comm").mkdir(parents=True)
    (tmp_path / rel).symlink_to("/etc/hostname")
    assert _find(tmp_path, rel) == nested, "a link is not a submitted file"
    assert _find(tmp_path, "minitorch_dist/comm/ring.py") is None
