"""ARCHITECTURE.md's table of what a student opens, lab by lab, against the package.

* Every file the table lists (writes and reads) exists.
* Every package file that holds a solution block of lab NN (``minitorch_dist.course.markers``)
  is among lab NN's *writes*, and every file in a lab's *writes* holds one of its blocks: a
  task moved to another file, or a new lab, shows here before a student looks in the wrong file.
* Every lab, 0 to 12, has a row.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from minitorch_dist.course.markers import BEGIN

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minitorch_dist"
LABS = range(13)


def _student_lines() -> ModuleType:
    """benchmarks/student_lines.py, whose ``lab_files`` reads the table for its count too."""
    spec = importlib.util.spec_from_file_location(
        "student_lines", ROOT / "benchmarks" / "student_lines.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab_files = _student_lines().lab_files  # {lab: (writes, reads)}, paths under minitorch_dist/


def solution_files() -> dict[int, set[str]]:
    """{lab: package files holding its solution blocks} (the course wing left out: it names the
    markers, it does not hold a lab's answer)."""
    found: dict[int, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("course/"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            m = BEGIN.match(line)
            if m and re.fullmatch(r"lab\d\d\.\d+", m.group(2) or ""):
                found.setdefault(int(m.group(2)[3:5]), set()).add(rel)
    return found


ROWS = lab_files((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def test_every_lab_has_a_row():
    """Catches a lab missing from the table (a new lab added without its files named)."""
    assert sorted(ROWS) == list(LABS)


def test_every_listed_file_exists():
    """Catches a file renamed or moved while the table still sends students to the old path."""
    missing = [
        (lab, f)
        for lab, (writes, reads) in ROWS.items()
        for f in writes + reads
        if not (PACKAGE / f).is_file()
    ]
    assert not missing, missing


def test_solution_files_are_the_labs_writes():
    """Catches a solution block in a file the table does not list for its lab (a task moved),
    and a file listed as written that holds none of the lab's blocks."""
    found = solution_files()
    for lab in LABS:
        writes = set(ROWS[lab][0])
        assert found.get(lab, set()) == writes, (lab, sorted(found.get(lab, set())), writes)


def test_the_parser_sees_the_blocks():
    """The check above can fail: it finds the blocks of lab 6 where lab 6 writes them."""
    assert {"zero/stage1.py", "zero/stage3.py"} <= solution_files()[6]
    assert lab_files("## What a student opens, lab by lab\n| 0 | `a.py` | |\n") == {
        0: (["a.py"], [])
    }
