"""Gradescope's autograder for one assignment: the bundle ``release --autograder ZIP`` writes, and
what its ``run_autograder`` runs.

The bundle (unzipped by Gradescope into ``/autograder/source``) holds ``setup.sh`` and
``run_autograder`` at its root, the instructor's tree (``course/``: reference code and every
graded test), the edition's stubs of the submitted files (``stubs/``) and the manifest
(``submission.json``: the labs, each task's package files, and each graded test the labs have).

``run_autograder`` honours ``$AUTOGRADER_ROOT`` (default ``/autograder``). It copies the
instructor's tree to a fresh folder, copies over it from ``$AUTOGRADER_ROOT/submission`` only the
manifest's files (a missing one is replaced by its stub, and its tasks score 0 with a message
naming it), grades the released labs with the instructor's tests (each test under a time limit,
so an endless loop costs one test), and writes ``$AUTOGRADER_ROOT/results/results.json`` itself,
from the manifest's list of tests: a test the run did not report scores 0, a skip scores 0
unless the test needs a GPU, and a submission's own tests, conftest, results.json or other
files are never read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from .edition import _SKIP_DIRS, MANIFEST_FILE, _source_files, read_manifest

__all__ = ["collect_graded", "run", "write_bundle"]

TEST_TIMEOUT_S = 60  # one graded test; the slowest takes under 10 s on 2 CPU cores
TOTAL_TIMEOUT_S = 40 * 60  # Gradescope's default limit for a whole run

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when the image is built (Ubuntu, as root).
set -euo pipefail
apt-get update -q && apt-get install -y -q python3 python3-venv python3-pip git
python3 -m venv /autograder/venv
# the CPU build of torch (the autograder has no GPU), then the course with its grader
/autograder/venv/bin/pip install -q torch --index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
/autograder/venv/bin/pip install -q "/autograder/source/course[grade]"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grades $AUTOGRADER_ROOT/submission (default
# /autograder) and writes $AUTOGRADER_ROOT/results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PY" ] || PY=python3
cd "$ROOT/source/course" && exec "$PY" -m minitorch_dist.autograder --root "$ROOT"
"""

_COLLECT = """
import json, sys
import pytest
from minitorch_dist.course.grade import lab_files, task_of

class Graded:
    tests = {}
    def pytest_collection_finish(self, session):
        for item in session.items:
            gpu = any(True for _ in item.iter_markers("gpu"))
            self.tests[item.nodeid] = {"task": task_of(item), "gpu": gpu}

plugin = Graded()
files = [str(f) for f in lab_files("tests", sys.argv[1:])] or ["tests"]
code = pytest.main([*files, "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "--rootdir", ".", "-m", " or ".join(sys.argv[1:])], plugins=[plugin])
print("GRADED=" + json.dumps(plugin.tests))
sys.exit(0 if code == 0 else 1)
"""


def collect_graded(root: str | os.PathLike, labs: list[str]) -> dict[str, dict]:
    """Each graded test of ``labs`` in the tree at ``root``: nodeid -> its task, whether a GPU."""
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
        raise ValueError(f"collecting the graded tests of {labs} failed:\n{done.stdout[-3000:]}")
    return json.loads(lines[-1].removeprefix("GRADED="))


def write_bundle(
    root: str | os.PathLike, edition: str | os.PathLike, manifest: dict, zip_path: str | os.PathLike
) -> Path:
    """Write the autograder zip for the assignment whose edition is at ``edition``."""
    root, edition, zip_path = Path(root), Path(edition), Path(zip_path).resolve()
    tests = collect_graded(root, manifest["labs"])
    if not tests:
        raise ValueError(f"no graded tests for {manifest['labs']} in {root}/tests")
    bundled = dict(manifest, tests=tests)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            z.writestr(info, text)
        z.writestr(MANIFEST_FILE, json.dumps(bundled, indent=1) + "\n")
        for src in _source_files(root):
            rel = src.relative_to(root)
            if rel.parts[0] not in _SKIP_DIRS and src.resolve() != zip_path:
                z.write(src, f"course/{rel.as_posix()}")
        for rel in manifest["files"]:
            z.write(edition / rel, f"stubs/{rel}")
    return zip_path


def _find(submission: Path, rel: str) -> Path | None:
    """``rel`` in the submission: at that path, or (a zip of the edition's folder) below one
    folder level that ends with it; plain files only."""
    inside = submission.resolve()

    def plain(p: Path) -> bool:  # a file of the submission's own, not a link out of it
        return p.is_file() and not p.is_symlink() and p.resolve().is_relative_to(inside)

    exact = submission / rel
    if plain(exact):
        return exact
    found = [
        p for p in submission.rglob(Path(rel).name) if p.as_posix().endswith("/" + rel) and plain(p)
    ]
    return min(found, key=lambda p: len(p.parts)) if found else None


def _grade(course: Path, labs: list[str], test_timeout: float, total: float) -> tuple[dict, str]:
    out = Path(tempfile.mkdtemp(prefix="grade-")) / "results.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(course)
    cmd = [
        sys.executable,
        "-m",
        "minitorch_dist.grade",
        "--labs",
        *labs,
        "--results",
        str(out),
        "--timeout",
        f"{test_timeout:g}",
    ]
    try:
        done = subprocess.run(
            cmd, cwd=course, env=env, capture_output=True, text=True, timeout=total
        )
        log = done.stdout[-4000:] + done.stderr[-4000:]
    except subprocess.TimeoutExpired:
        return {}, f"the grader ran past {total:g} s and was stopped"
    log = "\n".join(x for x in log.splitlines() if not x.startswith("results written to "))
    try:
        return {t["name"]: t for t in json.loads(out.read_text())["tests"]}, log
    except (OSError, ValueError, KeyError, TypeError):
        return {}, f"the grader wrote no results (exit code {done.returncode}):\n{log}"
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def run(
    root: str | os.PathLike = "/autograder",
    test_timeout: float = TEST_TIMEOUT_S,
    total_timeout: float = TOTAL_TIMEOUT_S,
) -> dict:
    """Grade ``root/submission`` with the bundle in ``root/source``; write and return
    ``root/results/results.json``."""
    start = time.monotonic()
    root = Path(root).resolve()
    manifest = read_manifest(root / "source")
    work = Path(tempfile.mkdtemp(prefix="autograder-")) / "course"
    shutil.copytree(root / "source" / "course", work, symlinks=False)
    missing: dict[str, list[str]] = {}  # file -> its tasks
    for rel in manifest["files"]:
        found = _find(root / "submission", rel)
        source = found if found is not None else root / "source" / "stubs" / rel
        shutil.copyfile(source, work / rel)
        if found is None:
            missing[rel] = [t for t, fs in manifest["tasks"].items() if rel in fs]
    reported, log = _grade(work, manifest["labs"], test_timeout, total_timeout)
    tests, notes = [], []
    for rel, tasks in missing.items():
        notes.append(f"missing {rel} in your submission: {', '.join(tasks)} score 0")
    for name, expected in sorted(manifest["tests"].items()):
        task = expected["task"]
        entry = dict(reported.get(name) or {})
        gone = [rel for rel, tasks in missing.items() if task in tasks]
        if gone:
            reason = f"missing {', '.join(gone)} in your submission"
        elif not entry:
            reason = "did not run: its test file did not import, or the run stopped (see above)"
        elif entry.get("max_score") == 0 and not expected["gpu"]:
            reason = f"skipped, but only a test that needs a GPU may skip: {entry.get('output')}"
        else:
            reason = ""
        if reason:
            entry = {"max_score": 1, "status": "failed", "output": reason}
        top = 0 if entry.get("max_score") == 0 else 1  # a GPU test skipped: 0 of 0
        passed = entry.get("status") == "passed"
        tests.append(
            {
                "name": name,
                "number": task,
                "visibility": "visible",
                "score": top * passed,
                "max_score": top,
                "status": "passed" if passed else "failed",
                "output": str(entry.get("output", "")),
            }
        )
    results = {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(time.monotonic() - start),
        "output": "\n".join([*notes, log.strip()[-6000:]]).strip(),
        "stdout_visibility": "visible",
        "tests": tests,
    }
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(work.parent, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Gradescope autograder of a minitorch_dist lab")
    parser.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    default = float(os.environ.get("AUTOGRADER_TEST_TIMEOUT", TEST_TIMEOUT_S))
    parser.add_argument("--test-timeout", type=float, default=default, help="seconds per test")
    args = parser.parse_args(argv)
    results = run(args.root, test_timeout=args.test_timeout)
    print(f"score {results['score']} / {sum(t['max_score'] for t in results['tests'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
