"""A student's first hour, replayed: clone the edition from its URL, run the one install line
its README gives in a fresh virtual environment, grade a task. Slow (a real pip install: about
a minute from pip's cache, a few minutes the first time); torch comes from CI's CPU pin."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from minitorch_dist.course.release import MARKER_FILE, make_release

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


@pytest.mark.slow
@pytest.mark.skipif((ROOT / MARKER_FILE).exists(), reason="needs the instructor's source")
def test_the_readmes_install_line_gives_a_student_everything(tmp_path: Path) -> None:
    """Catches an install that lacks the grader's or the tests' dependencies (a collection error
    reported as "no graded tests found"), or JupyterLab."""
    remote = tmp_path / "hw0.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    make_release(ROOT, tmp_path / "edition", labs=["lab00"], repo=remote.as_uri())
    subprocess.run(["git", "push", "-q", "origin", "main"], cwd=tmp_path / "edition", check=True)
    readme = (tmp_path / "edition" / "README.md").read_text()
    clone_line = next(line for line in readme.splitlines() if line.startswith("git clone "))
    install = [line for line in readme.splitlines() if "pip install" in line and "&&" in line]
    assert len(install) == 1, f"the README must give one install line, got {install}"
    # a student's shell: none of our paths (make's bytecode folder, PYTHONPYCACHEPREFIX, included)
    ours = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONPYCACHEPREFIX")
    env = {k: v for k, v in os.environ.items() if k not in ours}
    if CONSTRAINTS.is_file():
        env["PIP_CONSTRAINT"] = str(CONSTRAINTS)  # CI's CPU torch: seconds, not gigabytes
    subprocess.run(["bash", "-c", clone_line], cwd=tmp_path, env=env, check=True)
    clone = tmp_path / "hw0"
    assert (clone / "tests" / "conftest.py").is_file()
    run = subprocess.run(
        ["bash", "-c", install[0]],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    python = clone / ".venv" / "bin" / "python"
    assert python.is_file()
    lab = subprocess.run(
        [str(clone / ".venv" / "bin" / "jupyter"), "lab", "--version"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert lab.returncode == 0 and re.match(r"\d+\.", lab.stdout), lab.stderr
    grade = subprocess.run(
        [str(python), "-m", "minitorch_dist.grade", "--task", "lab00.1"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = grade.stdout + grade.stderr
    assert grade.returncode == 0, out[-3000:]
    assert "collection errors" not in out and "no graded test" not in out, out[-3000:]
    assert "NotImplementedError: lab00.1" in out and "0/4" in out, out[-3000:]
    assert (clone / "results.json").is_file()
