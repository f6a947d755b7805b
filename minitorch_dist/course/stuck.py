"""Where a stuck test is, for the judge (judge.py): the grading child's processes dump their
Python stacks on SIGUSR2, each into its own file (record.py), and the innermost frame that lies
in a task's file names the task and the student's line."""

from __future__ import annotations

import os
import re
import signal
import stat
import time
from pathlib import Path
from typing import Any

__all__ = ["open_plain", "stuck_at"]


def open_plain(path: Path) -> Any:
    """``path`` opened for reading, not through a link (the child may plant one)."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")


_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')
_STUCK_WAIT_S = 6.0


def stuck_at(pid: int, out: Path, tree: Path, targets: dict[str, str]) -> tuple[str, str] | None:
    """Where a stuck test is: the child's processes dump their stacks, each into its own file
    (record.py registers SIGUSR2 with faulthandler); the innermost frame in a task's file gives
    (task, " at file:line in function: the line"). None when no frame is in a task's file. On
    a busy machine a rank may dump late, or not have reached the task's code yet: the child is
    asked again, for up to ``_STUCK_WAIT_S`` seconds in all."""
    owners = _owners(targets)
    root = tree.resolve()
    deadline = time.monotonic() + _STUCK_WAIT_S
    while time.monotonic() < deadline:
        before = _stack_files(out)
        try:
            os.killpg(pid, signal.SIGUSR2)
        except OSError:
            return None
        time.sleep(0.5)
        for path, size in _stack_files(out).items():
            if size <= before.get(path, 0):
                continue
            try:
                with open_plain(path) as f:
                    f.seek(before.get(path, 0))
                    text = f.read(1 << 20).decode(errors="replace")
            except OSError:
                continue
            found = _task_frame(text, root, owners)
            if found is not None:
                return found
    return None


def _stack_files(out: Path) -> dict[Path, int]:
    """The child's stack files (stacks-<pid>.txt, plain files only) and their sizes."""
    sizes = {}
    for path in sorted(out.glob("stacks-*.txt")):
        try:
            st = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            sizes[path] = st.st_size
    return sizes


def _owners(targets: dict[str, str]) -> dict[tuple[str, str | None], str]:
    """Which task a frame in a task's file belongs to: (file, function) -> its task, and
    (file, None) -> the file's only task (a helper of that task), from ``targets``
    (``module:Qualname`` -> task)."""
    owners: dict[tuple[str, str | None], str] = {}
    by_file: dict[str, set[str]] = {}
    for target, task in targets.items():
        module, _, qualname = target.partition(":")
        rel = module.replace(".", "/") + ".py"
        owners[(rel, qualname.split(".")[-1])] = task
        by_file.setdefault(rel, set()).add(task)
    for rel, tasks in by_file.items():
        if len(tasks) == 1:
            owners[(rel, None)] = next(iter(tasks))
    return owners


def _task_frame(
    text: str, root: Path, owners: dict[tuple[str, str | None], str]
) -> tuple[str, str] | None:
    """(task, " at file:line in function: the line") of the first frame of stack dumps
    ``text`` in a task's file under ``root`` (:func:`_owners`, :func:`stuck_at`)."""
    for file, number, function in _FRAME.findall(text):
        try:
            rel = Path(file).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        task = owners.get((rel, function)) or owners.get((rel, None))
        if task is None:
            continue
        try:
            source = (root / rel).read_text(errors="replace").splitlines()[int(number) - 1]
        except (OSError, IndexError):
            source = ""
        return task, f" at {rel}:{number} in {function}: {source.strip()[:120]}"
    return None
