"""Where a stuck graded test is (minitorch_dist/course/stuck.py): the judge signals the grading
child's process group, every process (the child and the ranks it forked) writes its stack into
a file of its own, and the student's line is found in them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from minitorch_dist.course.record import RECORD_DIR_ENV
from minitorch_dist.course.stuck import stuck_at

ROOT = Path(__file__).resolve().parents[1]

_WORK = """
def spin(rank):
    x = 0
    while True: x += rank  # one line: the stack shows it, wherever it stops
"""

# The grading child's side: record.py set up as pytest would, then four ranks forked (as the
# launcher does) that spin at once in the student's function.
_CHILD = """
import os, sys, time
from minitorch_dist.course import record
record.pytest_configure(None)
sys.path.insert(0, sys.argv[1])
from work import spin
for rank in range(4):
    if os.fork() == 0:
        spin(rank + 1)
open(os.path.join(sys.argv[1], "ready"), "w").close()
while True:
    time.sleep(0.01)
"""

# faulthandler's dump: a header, then one "  File ..., line N in f" per frame
_DUMP_LINE = re.compile(
    r'^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$|^  File "'
)


def test_every_forked_rank_dumps_its_own_readable_stack(tmp_path: Path) -> None:
    """Catches ranks that share one stack file: dumping at once, their lines interleave
    ('File File "/a.py/a.py"') and no frame can be read, so a timed-out test loses the
    student's line. Each of the five processes gets its own file, every line of which is whole,
    and the judge finds the line."""
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir()
    out.mkdir()
    (tree / "work.py").write_text(textwrap.dedent(_WORK))
    env = {**os.environ, RECORD_DIR_ENV: str(out), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tree)], env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not (tree / "ready").exists():
            assert child.poll() is None and time.monotonic() < deadline, "the child did not start"
            time.sleep(0.05)
        found = stuck_at(child.pid, out, tree, {"work:spin": "lab00.1"})
        stacks = sorted(out.glob("stacks-*.txt"))
        assert len(stacks) == 5, [p.name for p in stacks]
        for path in stacks:
            lines = path.read_text().splitlines()
            assert lines and all(_DUMP_LINE.match(line) for line in lines), lines[:6]
    finally:
        os.killpg(child.pid, 9)
        child.wait()
    assert found == (
        "lab00.1",
        " at work.py:4 in spin: while True: x += rank  # one line: the stack shows it, "
        "wherever it stops",
    ), found
