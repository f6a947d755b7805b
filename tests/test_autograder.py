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
import tempfile
import textwrap
import time
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


# Submissions that try to forge their score. Each is appended to the edition's stub (the task not
# done, a real score of 0) or to the instructor's file (the task done, 4), and must score that.
_FORGE_CLAIMS = """
import _pytest.reports as _reports

_init = _reports.TestReport.__init__


def _passed(self, *args, **kwargs):  # every test's report says passed
    _init(self, *args, **kwargs)
    self.outcome, self.longrepr = "passed", None


_reports.TestReport.__init__ = _passed
"""
_TAMPERING = {
    # an exit hook rewriting results.json wherever it may be
    "exit-hook": """
import atexit as _atexit, glob as _glob, json as _json


def _forge():
    for path in _glob.glob("{base}/*/results/results.json"):
        try:
            open(path, "w").write(_json.dumps({{"score": 100, "tests": []}}))
        except OSError:
            pass


_atexit.register(_forge)
"""
    + _FORGE_CLAIMS,
    # the grader's own plugin and the launcher changed at import: no recording, fake results
    "grader-and-launcher": """
import minitorch_dist as _package
from minitorch_dist.course import record as _record

_record._save = lambda *args, **kwargs: None
_package.launch = lambda fn, world_size, *args, **kwargs: [None] * world_size
"""
    + _FORGE_CLAIMS,
    # writes into every file and folder of the grading root it can reach
    "write-anywhere": """
import glob as _glob, os as _os

for _path in _glob.glob("{base}/*/*") + _glob.glob("{base}/*/*/*"):
    try:
        if _os.path.isdir(_path):
            open(_os.path.join(_path, "forged.json"), "w").write("{{}}")
        else:
            open(_path, "a").write("forged")
    except OSError:
        pass
"""
    + _FORGE_CLAIMS,
    # the test's process leaves with exit status 0 in the middle of each test
    "os-exit": """
import os as _os
import minitorch_dist as _package


def _leave(*args, **kwargs):
    _os._exit(0)


_package.launch = _leave
""",
}
# the expected values read from the test's own inputs, with every claim forged: no collective
_FROM_THE_TESTS = """
    import sys
    test = sys.modules.get("tests.test_lab00_hello") or sys.modules.get("test_lab00_hello")
    n = dist.get_world_size()
    tensor.copy_(sum(test._rank_tensor(r, n) for r in range(n)).view_as(tensor))
    return tensor
"""


def _open_folder() -> Path:
    """A folder every user may enter and write (pytest's own are its user's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="gradescope-"))
    folder.chmod(0o777)
    return folder


def _submission(course: dict, name: str, text: str) -> dict:
    rel = "minitorch_dist/comm/halves.py"
    return _run_autograder(_gradescope(course, name, {rel: text}), AUTOGRADER_TEST_TIMEOUT="20")


@pytest.mark.slow
@pytest.mark.parametrize("done", [False, True], ids=["stub", "solved"])
@pytest.mark.parametrize("how", sorted(_TAMPERING))
def test_a_forging_submission_scores_its_real_work(course: dict, how: str, done: bool) -> None:
    """Catches a score the submission can write: an exit hook rewriting results.json, pytest's
    reports, the grader's plugin or the launcher monkeypatched at import, files written all over
    the grading root, ``os._exit(0)`` mid-test. On the stub each scores 0 of 4; on the solved
    file the forging changes nothing (4 of 4), except ``os._exit``, which loses its tests."""
    rel = "minitorch_dist/comm/halves.py"
    base = _open_folder()  # the submission may look around, as in /autograder
    text = (ROOT if done else course["edition"]).joinpath(rel).read_text()
    try:
        results = _submission(
            {**course, "base": base}, "root", text + _TAMPERING[how].format(base=base)
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    tests = results["tests"]
    assert len(tests) == 4 and sum(t["max_score"] for t in tests) == 4
    # a solved file that also stops its own recording (or its test's process) proves nothing
    earned = 4 if done and how in ("exit-hook", "write-anywhere") else 0
    assert results["score"] == earned == sum(t["score"] for t in tests), results["output"]
    assert "forged" not in json.dumps(results) and results["tests"][0]["name"] != "x"


@pytest.mark.slow
def test_the_expected_values_read_from_the_tests_score_nothing(course: dict) -> None:
    """Catches a "solution" that returns what the test expects (here the sum, computed from the
    test's own inputs instead of by collectives) and forges the outcome: its results are right,
    but it calls no reduce-scatter and no all-gather, as the reference does."""
    stub = (course["edition"] / "minitorch_dist" / "comm" / "halves.py").read_text()
    anchor = '    raise NotImplementedError("lab00.1'
    assert anchor in stub
    text = stub.replace(anchor, _FROM_THE_TESTS + anchor) + _FORGE_CLAIMS
    results = _submission(course, "from-the-tests", text)
    assert results["score"] == 0, results["output"]
    assert all("called no all_gather, reduce_scatter" in t["output"] for t in results["tests"])


_WHO = """
import json as _json, os as _os, sys as _sys

with open("{path}", "a") as _f:
    _f.write(_json.dumps([_os.getuid(), _sys.argv]) + "\\n")
"""


@pytest.mark.slow
def test_the_judge_never_imports_a_submitted_file(course: dict) -> None:
    """Catches an autograder process that imports the submission (then it could rewrite the
    score): the submitted file notes each process that imports it; none is the autograder, and
    where the autograder runs as root, each runs as the unprivileged user."""
    folder = _open_folder()
    marker = folder / "who.jsonl"
    marker.touch()
    marker.chmod(0o666)
    solved = (ROOT / "minitorch_dist" / "comm" / "halves.py").read_text()
    try:
        results = _submission(course, "who", solved + _WHO.format(path=marker))
        seen = [json.loads(line) for line in marker.read_text().splitlines()]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert results["score"] == 4, results["output"]
    assert seen, "the submission never ran"
    assert not [argv for _, argv in seen if "minitorch_dist.autograder" in " ".join(argv)]
    if os.geteuid() == 0:
        import pwd

        assert {uid for uid, _ in seen} == {pwd.getpwnam("nobody").pw_uid}


def _solution_lines() -> dict[str, set[str]]:
    """task -> the distinctive lines (normalised) of its solution blocks, package and notebooks:
    long lines that no shipped file holds outside a solution block (not an idiom)."""
    from test_no_reference import LONG, _shipped, _split, _texts, _trivial, normalise

    found: dict[str, set[str]] = {}
    elsewhere: set[str] = set()
    for path in _shipped():
        for text in _texts(path):
            blocks, outside = _split(text)
            elsewhere |= set(map(normalise, outside))
            for task, found_blocks in blocks.items():
                for lines in found_blocks:
                    for norm in map(normalise, lines):
                        if len(norm) >= LONG and not _trivial(norm):
                            found.setdefault(task, set()).add(norm)
    return {task: lines - elsewhere for task, lines in found.items()}


def test_the_bundle_holds_no_solution_line(course: dict) -> None:
    """Catches an autograder zip that carries the instructor's tree: unzipped, none of its
    files holds a distinctive line of any task's solution block (the assignment's and later
    labs': the bundle of lab 0 may hold none at all), and it holds no reference module."""
    lines = _solution_lines()
    assert len(lines) > 30, sorted(lines)
    with zipfile.ZipFile(course["bundle"]) as z:
        names = z.namelist()
        texts = {
            n: z.read(n).decode("utf-8", errors="replace")
            for n in names
            if n.endswith((".py", ".ipynb", ".md", ".json", ".txt", ".toml", ".cfg", ".yml"))
        }
    assert "course/minitorch_dist/comm/halves.py" in names
    found = []
    for name, text in texts.items():
        body = {normalise_line(line) for line in _bundle_lines(name, text)}
        for task, solution in lines.items():
            found += [f"{name}: {task}: {line}" for line in solution & body]
    assert not found, "\n".join(found[:20])


def normalise_line(line: str) -> str:
    from test_no_reference import normalise

    return normalise(line)


def _bundle_lines(name: str, text: str) -> list[str]:
    if not name.endswith(".ipynb"):
        return text.splitlines()
    cells = json.loads(text).get("cells", [])
    return [line for c in cells for line in "".join(c["source"]).splitlines()]


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
            while True: _time.sleep(0.01)  # one line: the stack shows it, wherever it stops


        all_reduce_by_halves = _forever
        """
    )
    root = _gradescope(course, "endless", {rel: solved[rel] + body})
    results = _run_autograder(root, AUTOGRADER_TEST_TIMEOUT="4")
    tests = results["tests"]
    assert len(tests) == 4 and results["score"] == 0
    timed_out = [t for t in tests if t["output"].startswith("timed out: ran past 4 s")]
    assert len(timed_out) == 1, [t["output"][:200] for t in tests]
    assert " at minitorch_dist/comm/halves.py:" in timed_out[0]["output"], timed_out[0]["output"]
    assert "in _forever: while True: _time.sleep(0.01)" in timed_out[0]["output"], "their line"
    name = timed_out[0]["name"].split("::")[-1]
    others = [t for t in tests if t is not timed_out[0]]
    assert all(f"not run: lab00.1 timed out in {name}" in t["output"] for t in others), [
        t["output"][:200] for t in others
    ]


@pytest.fixture(scope="module")
def assignment(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An edition of lab 2 (four tasks, 38 graded tests; lab02.3's optimizer calls lab02.2's
    loss scaler) and its autograder bundle."""
    base = tmp_path_factory.mktemp("lab02")
    edition, bundle = base / "edition", base / "autograder.zip"
    make_release(ROOT, edition, labs=["lab02"], autograder=bundle)
    return {"base": base, "edition": edition, "bundle": bundle}


_NEVER_ENDS = "        while inv_scale > 0: found_inf = False  # the mistake: never ends\n"


@pytest.mark.slow
def test_an_endless_loop_in_one_task_costs_that_task_alone(assignment: dict) -> None:
    """Catches a submission whose endless loop in one task (lab02.2's unscale_) costs the
    per-test limit (60 s) in every test that calls it: the whole lab is graded in under five
    minutes, lab02.2's first test names the student's line and its other tests fail at once
    naming it, lab02.3's tests that call the loss scaler report "needs lab02.2 first", and the
    other tasks score what the correct files score (all their tests)."""
    files = _submit_instructors_files(assignment)
    rel, anchor = "minitorch_dist/precision/loss_scaling.py", "        for g in grads:\n"
    assert files[rel].count(anchor) == 1
    files[rel] = files[rel].replace(anchor, _NEVER_ENDS + anchor)
    start = time.monotonic()
    results = _run_autograder(_gradescope(assignment, "endless", files))
    seconds = time.monotonic() - start
    print(f"lab 2 with an endless loop in lab02.2 graded in {seconds:.0f} s")
    print(results["output"])
    by_task: dict[str, list[dict]] = {}
    for t in results["tests"]:
        by_task.setdefault(t["number"], []).append(t)
    assert sorted(by_task) == ["lab02.1", "lab02.2", "lab02.3", "lab02.4"]
    for task in ("lab02.1", "lab02.4"):
        failed = [t["output"][:300] for t in by_task[task] if t["status"] != "passed"]
        assert not failed, f"{task} lost points to lab02.2's loop: {failed}"
    stuck = [t for t in by_task["lab02.2"] if t["output"].startswith("timed out: ran past 60 s")]
    assert len(stuck) == 1, [t["output"][:200] for t in by_task["lab02.2"]]
    assert f" at {rel}:" in stuck[0]["output"], stuck[0]["output"][:500]
    assert "in unscale_: while inv_scale > 0: found_inf = False" in stuck[0]["output"]
    name = stuck[0]["name"].split("::")[-1]
    others = [t["output"] for t in by_task["lab02.2"] if t is not stuck[0]]
    assert others and all(o.startswith(f"not run: lab02.2 timed out in {name}") for o in others)
    mixed = [t["output"] for t in by_task["lab02.3"] if t["status"] != "passed"]
    assert mixed, "lab02.3's optimizer calls the loss scaler"
    assert all(o.startswith("needs lab02.2 first") for o in mixed), [o[:300] for o in mixed]
    assert seconds < 300, f"{seconds:.0f} s: one stuck task must not cost every test the limit"


def test_the_editions_texts_speak_of_its_own_labs_and_stubs(course: dict) -> None:
    """Catches an edition README with another lab's examples, or lab text that sends students
    to solution markers the edition does not have."""
    edition = course["edition"]
    readme = (edition / "README.md").read_text()
    assert "--task lab00.1" in readme and "lab05" not in readme
    assert readme.count("pip install -e") == 1 and '".[student]"' in readme
    words = " ".join(readme.split())
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in words
    assert "the whole install takes a few minutes" in words, "how long the install takes"
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


_SYNC = """
import torch


class Sync:
    def __init__(self, module):
        self.module = module

    def finish(self):
        {body}
"""
_SYNC_TEST = """
import pytest
import torch
from course_pkg.sync import Sync


@pytest.mark.lab07
@pytest.mark.task("lab07.1")
def test_finish_halves_the_gradients():
    torch.manual_seed(0)
    m = torch.nn.Linear(2, 2)
    m.weight.grad, m.bias.grad = torch.ones(2, 2), torch.ones(2)
    Sync(m).finish()
    assert torch.equal(m.weight.grad, torch.full((2, 2), 0.5))
"""


def test_a_method_that_does_nothing_does_not_pass_on_a_forged_claim(tmp_path: Path) -> None:
    """Catches a judge that checks only what a task's function returns: a method whose work is
    a side effect (here, halving its module's gradients; it returns None either way) left
    empty, with pytest's reports forged, is not scored, because the parameters and gradients
    its object holds after the call differ from the reference's."""
    from minitorch_dist.course import judge, verify

    def tree(name: str, body: str) -> Path:
        root = tmp_path / name
        (root / "course_pkg").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "course_pkg" / "__init__.py").write_text("")
        (root / "course_pkg" / "sync.py").write_text(_SYNC.format(body=body))
        (root / "tests" / "test_sync.py").write_text(_SYNC_TEST)
        (root / "pyproject.toml").write_text(
            '[tool.pytest.ini_options]\nmarkers = ["lab07", "task(id)"]\n'
        )
        (root / "minitorch_dist").symlink_to(ROOT / "minitorch_dist")
        return root

    node = "tests/test_sync.py::test_finish_halves_the_gradients"
    tests, targets = {node: {"task": "lab07.1"}}, {"course_pkg.sync:Sync.finish": "lab07.1"}
    right = "for p in self.module.parameters():\n            p.grad = p.grad / 2"
    runs = []
    for i in range(2):
        out = tmp_path / f"ref{i}"
        claims = judge.run_tests(
            tree(f"ref{i}", right), tests, out, targets, test_timeout=120, total_timeout=300
        )
        assert claims[node].status == "passed", claims[node]
        runs.append(verify.read_recordings(judge.folder_of(out, node)))
    expected = verify.reference(*runs)
    assert verify.checks_anything(expected)
    forged = tree("forged", "pass\n" + textwrap.indent(_FORGE_CLAIMS, ""))
    (forged / "course_pkg" / "sync.py").write_text(_SYNC.format(body="pass") + _FORGE_CLAIMS)
    out = tmp_path / "forged-out"
    claims = judge.run_tests(forged, tests, out, targets, test_timeout=120, total_timeout=300)
    assert claims[node].status == "passed", "the claim is forged"
    why = verify.verify(expected, verify.read_recordings(judge.folder_of(out, node)))
    assert why and "self.module after the call" in why, why
