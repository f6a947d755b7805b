"""Gradescope's autograder for one assignment: the bundle ``release --autograder ZIP`` writes, and
what its ``run_autograder`` runs.

The bundle (unzipped by Gradescope into ``/autograder/source``) holds ``setup.sh`` and
``run_autograder`` at its root, the edition's own tree (``course/``: what the students have,
stubs, tests and grader, no solution), the manifest (``submission.json``: the labs, each task's
package files, each graded test, the functions that hold the tasks) and the reference recordings
(``reference.pt``: what those functions returned in each graded test on the instructor's tree,
the only thing of the instructor's code the bundle carries).

``run_autograder`` honours ``$AUTOGRADER_ROOT`` (default ``/autograder``). It copies the edition's
tree to a fresh folder, copies over it from ``$AUTOGRADER_ROOT/submission`` only the manifest's
files (a missing one keeps its stub, and its tasks score 0 with a message naming it), and hands
the grading to the judge (judge.py): the tests run in children that cannot read the bundle, a
test scores only when the child says it passed and the task's recorded results match the
reference's (verify.py), and ``results/results.json`` is written by this process, which never
imports a submitted file, after the children are gone.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from . import judge, verify
from .edition import _SKIP_DIRS, MANIFEST_FILE, _source_files, read_manifest
from .grade_report import TestResult, gradescope_json, needs_first
from .graded_tests import collect_graded

__all__ = ["collect_graded", "record_reference", "run", "task_targets", "write_bundle"]

REFERENCE_FILE = "reference.pt"  # the reference recordings: in the bundle only

TEST_TIMEOUT_S = 60  # one graded test; the slowest takes under 10 s on 2 CPU cores
TOTAL_TIMEOUT_S = 40 * 60  # Gradescope's default limit for a whole run

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when the image is built (Ubuntu, as root).
set -euo pipefail
apt-get update -q && apt-get install -y -q python3 python3-venv python3-pip git
python3 -m venv /autograder/venv
# the graded tests run as nobody: it must reach the Python and the packages
chmod o+x /autograder && chmod -R o+rX /autograder/venv
# the CPU build of torch (the autograder has no GPU), then the course with its grader
/autograder/venv/bin/pip install -q torch --index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
/autograder/venv/bin/pip install -q "/autograder/source/course[grade]"
chmod -R o+rX /autograder/venv
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grades $AUTOGRADER_ROOT/submission (default
# /autograder) and writes $AUTOGRADER_ROOT/results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PY" ] || PY=python3
cd "$ROOT/source/course" && exec "$PY" -m minitorch_dist.autograder --root "$ROOT"
"""


def task_targets(root: str | os.PathLike, manifest: dict) -> dict[str, str]:
    """``module:Qualname`` -> task, for each function that holds a solution block of the
    manifest's tasks (in the instructor's tree at ``root``): the functions whose calls the judge
    compares."""
    from .markers import BEGIN as _BEGIN  # the release's own marker syntax

    found: dict[str, str] = {}
    for task, files in manifest["tasks"].items():
        for rel in files:
            text = (Path(root) / rel).read_text()
            tree, lines = ast.parse(text), text.splitlines()
            module = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
            for number, line in enumerate(lines, start=1):
                begin = _BEGIN.match(line)
                if not begin or begin.group(2) != task:
                    continue
                qualname = _enclosing(tree, number)
                if qualname:
                    found[f"{module}:{qualname}"] = task
    return dict(sorted(found.items()))


def _enclosing(tree: ast.AST, line: int, prefix: str = "") -> str | None:
    """The qualified name of the innermost function around ``line`` (classes included)."""
    for node in getattr(tree, "body", []):
        if not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        if isinstance(node, ast.ClassDef):
            return _enclosing(node, line, f"{prefix}{node.name}.")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"{prefix}{node.name}"  # a function nested in it is not reachable by name
    return None


def references(tests: dict, first: dict, second: dict) -> dict:
    """Each test's reference from two runs' recordings (verify.reference); a test whose inputs
    are drawn per run (``drawn_per_run``) has none to compare, even where the two runs happened
    to draw the same inputs and a submission's run draws others."""
    return {
        n: {k: verify.UNSTABLE for k in first[n]}
        if tests[n].get("drawn")
        else verify.reference(first[n], second[n])
        for n in tests
    }


def record_reference(root: str | os.PathLike, tests: dict, targets: dict[str, str]) -> dict:
    """The reference recordings of ``tests`` on the instructor's tree: each test run twice,
    a value that differed between the runs marked not to compare (judge.reference)."""
    base = Path(tempfile.mkdtemp(prefix="reference-"))
    try:
        runs, claims = [], {}
        for i in range(2):
            out = base / str(i)
            claims = judge.run_tests(
                Path(root), tests, out, targets, test_timeout=600, total_timeout=TOTAL_TIMEOUT_S
            )
            runs.append({n: verify.read_recordings(judge.folder_of(out, n)) for n in tests})
        failing = sorted(n for n, o in claims.items() if o.status == "failed")
        if failing:
            raise ValueError(
                f"the reference fails {len(failing)} graded test(s), e.g. {failing[0]}: "
                f"{claims[failing[0]].reason}"
            )
        return references(tests, runs[0], runs[1])
    finally:
        shutil.rmtree(base, ignore_errors=True)


def write_bundle(
    root: str | os.PathLike, edition: str | os.PathLike, manifest: dict, zip_path: str | os.PathLike
) -> Path:
    """Write the autograder zip for the assignment whose edition is at ``edition``: the
    edition's own tree (what the students have), the manifest with the graded tests and the
    task's functions, and the reference recordings (the only thing from the instructor's code)."""
    root, edition, zip_path = Path(root), Path(edition), Path(zip_path).resolve()
    tests = collect_graded(root, manifest["labs"])
    if not tests:
        raise ValueError(f"no graded tests for {manifest['labs']} in {root}/tests")
    targets = task_targets(root, manifest)
    references = record_reference(root, tests, targets)
    unchecked = sorted(n for n, ref in references.items() if not verify.checks_anything(ref))
    if unchecked:
        print(
            f"warning: {len(unchecked)} graded test(s) record no call of a task's function and "
            "are scored on the child's claim alone:\n  " + "\n  ".join(unchecked),
            file=sys.stderr,
        )
    bundled = dict(manifest, tests=tests, targets=targets)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        verify.save_reference(references, Path(tmp) / REFERENCE_FILE)
        with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (stat.S_IFREG | 0o755) << 16
                z.writestr(info, text)
            z.writestr(MANIFEST_FILE, json.dumps(bundled, indent=1) + "\n")
            z.write(Path(tmp) / REFERENCE_FILE, REFERENCE_FILE)
            for src in _source_files(edition):
                rel = src.relative_to(edition)
                if rel.parts[0] not in _SKIP_DIRS and src.resolve() != zip_path:
                    z.write(src, f"course/{rel.as_posix()}")
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


def run(
    root: str | os.PathLike = "/autograder",
    test_timeout: float = TEST_TIMEOUT_S,
    total_timeout: float = TOTAL_TIMEOUT_S,
) -> dict:
    """Grade ``root/submission`` with the bundle in ``root/source``; write and return
    ``root/results/results.json``. This process never imports a submitted file (judge.py)."""
    start = time.monotonic()
    root = Path(root).resolve()
    manifest = read_manifest(root / "source")
    ids = judge.sandbox_ids()
    if ids is not None:  # the children cannot read the bundle (its reference recordings)
        os.chmod(root / "source", 0o700)
    base = Path(tempfile.mkdtemp(prefix="autograder-"))
    os.chmod(base, 0o711)
    work = base / "course"
    shutil.copytree(root / "source" / "course", work, symlinks=False)
    missing: dict[str, list[str]] = {}  # file -> its tasks
    for rel in manifest["files"]:
        found = _find(root / "submission", rel)
        if found is not None:  # else the edition's stub stays
            shutil.copyfile(found, work / rel)
        else:
            missing[rel] = [t for t, fs in manifest["tasks"].items() if rel in fs]
    judge.give_to(work, ids)
    out = base / "out"
    outcomes = judge.run_tests(
        work,
        manifest["tests"],
        out,
        manifest.get("targets", {}),
        test_timeout=test_timeout,
        total_timeout=total_timeout,
        ids=ids,
    )
    references = verify.load_reference(root / "source" / REFERENCE_FILE)
    results = []
    for name, expected in sorted(manifest["tests"].items()):
        task = expected["task"]
        outcome = outcomes[name]
        status, reason, output = outcome.status, outcome.reason, outcome.output
        gone = [rel for rel, tasks in missing.items() if task in tasks]
        if gone:
            status, reason = "failed", f"missing {', '.join(gone)} in your submission"
        elif status == "skipped" and not expected["gpu"]:
            status, reason = (
                "failed",
                f"skipped, but only a test that needs a GPU may skip: {reason}",
            )
        elif status == "passed":
            recorded = verify.read_recordings(
                judge.folder_of(out, name), ids[0] if ids is not None else None
            )
            why = verify.verify(references.get(name), recorded)
            if why:
                status = "failed"
                reason = f"not scored: your task's results differ from the reference's ({why})"
        elif status == "failed":
            reason = needs_first(task, output) or reason
        text = output if status == "skipped" else f"{reason}\n\n{output}".strip()
        results.append(TestResult(task[:5], name, status, text, task, reason))
    report = gradescope_json(results, time.monotonic() - start)
    notes = [
        f"missing {rel} in your submission: {', '.join(ts)} score 0" for rel, ts in missing.items()
    ]
    report["output"] = "\n".join([*notes, report["output"]]).strip()
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(base, ignore_errors=True)
    return report


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
