"""The solution markers every course tool reads: a line ``# BEGIN`` + ``SOLUTION labNN.k:
<task>`` opens a block (group 1: its indent, 2: its task ID, 3: the one-line task), ``# END``
+ ``SOLUTION`` closes it. (Written in two parts here, so that no edition file carries the
marker itself.) :func:`strip_solutions` replaces each block with the stub the student sees.
Standard library only: the release, the autograder and the book's course mode import it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

__all__ = ["BEGIN", "END", "TASK", "SolutionBlockError", "strip_solutions"]

_WORD = "SOLUTION"
BEGIN = re.compile(r"^([ \t]*)# BEGIN " + _WORD + r"\b[ \t]*([^:\s]*)(?::[ \t]*(.*?))?[ \t]*$")
TASK = re.compile(r"^lab\d\d\.\d+$")  # labNN.k: chapter NN, task k
END = re.compile(r"^[ \t]*# END " + _WORD + r"\b")


class SolutionBlockError(ValueError):
    """A block's begin marker without its end marker (or the reverse), or nested blocks."""


def strip_solutions(
    text: str, where: str = "<text>", keep: Callable[[str], bool] | None = None
) -> tuple[str, list[str]]:
    """Replace every solution block in ``text`` by a stub; return the new text and the task ids
    stubbed. A block whose task ``keep(task)`` accepts keeps its code, without the markers."""
    out: list[str] = []
    tasks: list[str] = []
    inside = None  # (line number, task) of the open block
    kept = False  # the open block's code stays
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        begin, end = BEGIN.match(line.rstrip("\n")), END.match(line)
        if begin:
            if inside:
                raise SolutionBlockError(
                    f"{where}:{number}: BEGIN {_WORD} inside the block opened at line {inside[0]}"
                )
            indent, task, what = begin.groups()
            if not TASK.match(task):
                raise SolutionBlockError(
                    f"{where}:{number}: task id {task!r} must look like lab01.2 (labNN.k)"
                )
            message = f"{task}: {what}" if what else task
            inside, kept = (number, task), keep is not None and keep(task)
            if not kept:
                out.append(f"{indent}raise NotImplementedError({json.dumps(message)})\n")
                tasks.append(task)
        elif end:
            if not inside:
                raise SolutionBlockError(f"{where}:{number}: END {_WORD} without a BEGIN")
            inside = None
        elif not inside or kept:
            out.append(line)
    if inside:
        raise SolutionBlockError(f"{where}:{inside[0]}: BEGIN {_WORD} {inside[1]} is never ended")
    return "".join(out), tasks


def _strip_notebook(path: Path, keep: Callable[[str], bool] | None = None) -> list[str]:
    nb = json.loads(path.read_text())
    tasks: list[str] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        new, found = strip_solutions(source, f"{path.name}", keep)
        tasks += found
        cell["source"] = new.splitlines(keepends=True)
        cell["outputs"] = []
        cell["execution_count"] = None
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return tasks
