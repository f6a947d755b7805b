"""What a student edition carries besides the stubbed code (for :mod:`minitorch_dist.course.release`):
the repository URL it points at, the submission manifest, the student README, and the edition's
own git repository (one commit, ready to push).

The manifest (``submission.json`` at the edition's root) lists the assignment's labs, its tasks
and, for each task, the package files that hold its stub: exactly what ``python -m
minitorch_dist.submit`` zips and what the Gradescope autograder (minitorch_dist/course/autograder.py)
copies from a submission over the instructor's tree.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "MANIFEST_FILE",
    "check_environment",
    "check_repo_url",
    "commit_edition",
    "read_manifest",
    "student_readme",
    "write_manifest",
]

MANIFEST_FILE = "submission.json"
# https://host/path, ssh://[user@]host/path, file:///path, or scp-like git@host:org/repo.git
_URL = re.compile(r"^(?:(?:https|ssh|file)://[^\s\"'{}]+|[\w.-]+@[\w.-]+:[^\s\"'{}]+)$")
_SKIP_DIRS = {".git", ".venv", "_build", "__pycache__", ".pytest_cache", ".ruff_cache", "release"}
_AUTHOR = [
    "-c",
    "user.name=minitorch_dist release",
    "-c",
    "user.email=release@minitorch-dist",
    "-c",
    "commit.gpgsign=false",
]


def _source_files(root: Path) -> list[Path]:
    """The files to ship: git's tracked files when this is a checkout, else a filtered walk."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        return [root / p for p in listed if (root / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [
                d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
            ]
            files += [Path(dirpath) / f for f in filenames]
        return files


def check_environment(autograder: bool) -> None:
    """ValueError naming what the release needs and this environment lacks: git (the edition
    is a repository) and, for ``--autograder``, pytest and torch in this Python (the release
    collects and runs the graded tests with it)."""
    missing = [] if shutil.which("git") else ["git on PATH"]
    if autograder:
        missing += [
            f"the Python package {name!r} in {sys.executable}"
            for name in ("pytest", "torch")
            if importlib.util.find_spec(name) is None
        ]
    if missing:
        raise ValueError(
            "the release needs " + ", ".join(missing) + ": run it in the course's environment "
            '(pip install -e ".[grade]" in the instructor\'s repository, then .venv/bin/python '
            "-m minitorch_dist.release ...)"
        )


def check_repo_url(repo: str) -> str:
    """``repo`` without a trailing slash; ValueError unless it is an https, ssh or file URL."""
    if not isinstance(repo, str) or not _URL.match(repo):
        raise ValueError(
            "repo must be an https://, ssh:// (or git@host:org/repo.git) or file:// URL, "
            f"got {repo!r}"
        )
    return repo.rstrip("/")


def repo_folder(repo: str) -> str:
    """The folder ``git clone repo`` makes: the URL's last part without ``.git``."""
    return re.split(r"[/:]", repo.rstrip("/"))[-1].removesuffix(".git")


def write_manifest(dest: Path, labs: Sequence[str], files_of: dict[str, set[str]]) -> dict:
    """Write ``submission.json``: the labs, their tasks, each task's package files, all files."""
    tasks = {t: sorted(files_of[t]) for t in sorted(files_of) if t[:5] in labs}
    manifest = {
        "labs": sorted(labs),
        "tasks": tasks,
        "files": sorted({f for fs in tasks.values() for f in fs}),
    }
    (dest / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(root: str | Path) -> dict:
    """The manifest of the edition (or autograder bundle) at ``root``; a clear error without one."""
    path = Path(root) / MANIFEST_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"no {MANIFEST_FILE} in {Path(root).resolve()}: run this in a student edition made "
            "by `python -m minitorch_dist.release`"
        )
    manifest = json.loads(path.read_text())
    for rel in manifest["files"]:
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"{MANIFEST_FILE} names a file outside the edition: {rel!r}")
    return manifest


def commit_edition(dest: Path, repo: str | None) -> str:
    """Make ``dest`` a git repository with one commit on ``main`` (remote ``origin`` = ``repo``
    when given); return the commit's id."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *_AUTHOR, *args], cwd=dest, capture_output=True, text=True, check=True
            )
        except FileNotFoundError as e:
            raise ValueError(
                "the release needs git on PATH to make the edition a repository"
            ) from e
        except subprocess.CalledProcessError as e:
            raise ValueError(f"git {' '.join(args)} failed in {dest}: {e.stderr.strip()}") from e
        return done.stdout.strip()

    git("init", "-q")
    git("symbolic-ref", "HEAD", "refs/heads/main")
    git("add", "-A")
    git("commit", "-q", "-m", "Student edition (python -m minitorch_dist.release)")
    if repo is not None:
        git("remote", "add", "origin", repo)
    return git("rev-parse", "HEAD")


def student_readme(
    counts: dict[str, int],
    labs: Sequence[str] | None,
    repo: str,
    autograded: bool = True,
    notebook_tasks: Sequence[str] = (),
    lang: str | None = None,
) -> str:
    """The edition's README: what a student does (the instructor's README stays behind).
    ``notebook_tasks``: the tasks answered in a lab notebook, which Gradescope does not grade.
    ``lang`` (``"zh_CN"``): in that language, from the catalogue ``edition.po``
    (:mod:`minitorch_dist.course.edition_readme`); a message it lacks stays English."""
    from .edition_readme import README, readme

    chosen = sorted(set(labs)) if labs else sorted({task[:5] for task in counts})
    tasks = [t for t in sorted(counts) if t[:5] in chosen]
    values = {
        "labs": ", ".join(chosen),
        "lab_args": " ".join(chosen),
        "first": tasks[0] if tasks else f"{chosen[0]}.1",
        "repo": repo,
        "name": repo_folder(repo),
        "zip": f"submission_{'_'.join(chosen)}.zip",
        "manifest": MANIFEST_FILE,
    }
    known = None
    if lang:
        from .catalogues import translations

        known = translations(README, language=lang)
    return readme(
        values,
        tasks=[t for t in tasks if t not in notebook_tasks],
        exercises=[t for t in tasks if t in notebook_tasks],
        notebook_tasks=notebook_tasks,
        autograded=autograded,
        translations=known,
    )
