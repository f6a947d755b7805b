"""Make the student edition of the book from this, the instructor's, source.

    python -m minitorch_dist.release DEST

Solutions live in the package (and in lab notebooks) between two comments::

    # BEGIN SOLUTION lab01.1: per-rank bytes of params, grads and optimizer states
    ...reference code...
    # END SOLUTION

The release copies the repository to DEST and replaces each block with
``raise NotImplementedError("lab01.1: per-rank bytes of params, grads and optimizer states")`` at
the block's indentation, so signatures, docstrings and input checks stay. Lab notebooks lose
their outputs and have their solution blocks replaced the same way; tests/test_mutants.py (the
reference with one mistake per mutant) is left out. Nothing is kept by hand: the
student edition is always generated, and the test suite checks that in it the package imports and
every graded test fails with NotImplementedError.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["MARKER_FILE", "SolutionBlockError", "make_release", "strip_solutions"]

MARKER_FILE = ".student_release"  # present at the root of every generated student edition
_BEGIN = re.compile(r"^([ \t]*)# BEGIN SOLUTION\b[ \t]*([^:\s]*)(?::[ \t]*(.*?))?[ \t]*$")
_TASK = re.compile(r"^lab\d\d\.\d+$")  # labNN.k: chapter NN, task k
_END = re.compile(r"^[ \t]*# END SOLUTION\b")
_THIS = Path(__file__).resolve()  # the tool itself: its docstring shows the markers
_SKIP_DIRS = {".git", ".venv", "_build", "__pycache__", ".pytest_cache", ".ruff_cache", "release"}
# Files the edition leaves out: the mutants are the reference solutions with one mistake each.
_INSTRUCTOR_ONLY = frozenset({"tests/test_mutants.py"})


class SolutionBlockError(ValueError):
    """A BEGIN SOLUTION without its END (or the reverse), or blocks nested in each other."""


def strip_solutions(text: str, where: str = "<text>") -> tuple[str, list[str]]:
    """Replace every solution block in ``text`` by a stub; return the new text and the task ids."""
    out: list[str] = []
    tasks: list[str] = []
    inside = None  # (line number, task) of the open block
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        begin, end = _BEGIN.match(line.rstrip("\n")), _END.match(line)
        if begin:
            if inside:
                raise SolutionBlockError(
                    f"{where}:{number}: BEGIN SOLUTION inside the block opened at line {inside[0]}"
                )
            indent, task, what = begin.groups()
            if not _TASK.match(task):
                raise SolutionBlockError(
                    f"{where}:{number}: task id {task!r} must look like lab01.2 (labNN.k)"
                )
            message = f"{task}: {what}" if what else task
            out.append(f"{indent}raise NotImplementedError({json.dumps(message)})\n")
            inside = (number, task)
            tasks.append(task)
        elif end:
            if not inside:
                raise SolutionBlockError(f"{where}:{number}: END SOLUTION without a BEGIN")
            inside = None
        elif not inside:
            out.append(line)
    if inside:
        raise SolutionBlockError(f"{where}:{inside[0]}: BEGIN SOLUTION {inside[1]} is never ended")
    return "".join(out), tasks


def _strip_notebook(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    tasks: list[str] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        new, found = strip_solutions(source, f"{path.name}")
        tasks += found
        cell["source"] = new.splitlines(keepends=True)
        cell["outputs"] = []
        cell["execution_count"] = None
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return tasks


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


def make_release(root: str | os.PathLike, dest: str | os.PathLike, force: bool = False) -> dict:
    """Write the student edition of the repository at ``root`` into ``dest``.

    Returns ``{task id: number of stubbed blocks}``. ``dest`` must not exist unless ``force``.
    """
    root, dest = Path(root).resolve(), Path(dest).resolve()
    if (root / MARKER_FILE).exists():
        raise ValueError(f"{root} is already a student release; release from the instructor source")
    if dest == root or root in dest.parents:
        raise ValueError(f"dest={dest} must lie outside the source tree {root}")
    if dest.exists():
        if not force:
            raise ValueError(f"dest={dest} already exists (pass force=True / --force to replace)")
        shutil.rmtree(dest)
    counts: dict[str, int] = {}
    for src in _source_files(root):
        rel = src.relative_to(root)
        if (rel.parts and rel.parts[0] in _SKIP_DIRS) or rel.as_posix() in _INSTRUCTOR_ONLY:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        if target.suffix == ".py" and rel.parts[0] == "minitorch_dist" and src != _THIS:
            new, tasks = strip_solutions(target.read_text(), str(rel))
            target.write_text(new)
        elif target.suffix == ".ipynb":
            tasks = _strip_notebook(target)
        else:
            continue
        for t in tasks:
            counts[t] = counts.get(t, 0) + 1
    (dest / MARKER_FILE).write_text(
        "Student edition generated by `python -m minitorch_dist.release`.\n"
        "Tasks to implement: " + ", ".join(sorted(counts)) + "\n"
    )
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", help="folder to write the student edition into")
    parser.add_argument(
        "--source",
        default=Path(__file__).resolve().parent.parent,
        help="instructor repository (default: the one this package lives in)",
    )
    parser.add_argument("--force", action="store_true", help="replace dest if it exists")
    args = parser.parse_args(argv)
    try:
        counts = make_release(args.source, args.dest, force=args.force)
    except (ValueError, SolutionBlockError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"student edition written to {args.dest}")
    for task, n in counts.items():
        print(f"  {task}: {n} block(s) stubbed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
