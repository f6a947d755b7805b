"""The book without its solutions: a Sphinx extension, and the check that proves it.

Chapters show the package's code (``literalinclude``, ``inspect.getsource`` in a cell) and lab
pages show their exercise cells; where that code holds a solution block, the rendered book would
hand the answer to every reader. In *course mode* (the default) the extension rewrites every
code block of every page after it is read -- cell inputs, cell outputs, included files alike --
so that each solution block (between the markers :mod:`minitorch_dist.release` stubs) shows as
the student edition's stub, with a line saying which lab writes it. The pages still execute against the
reference package, so every figure and number stays. An instructor who wants the solutions in
their own build sets ``MINITORCH_DIST_SOLUTIONS=show``.

:func:`solution_lines_in_html` is the proof: it lists every line of every solution block (in the
package and the lab notebooks) that appears in the built HTML; ``make test`` fails unless it
finds none.

    sphinx: extra_extensions: [minitorch_dist.course.course_book]     # _config.yml
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitorch_dist.course.release import _BEGIN, _END, SolutionBlockError, strip_solutions

__all__ = ["hide_solutions", "setup", "solution_lines", "solution_lines_in_html"]

_STUB = re.compile(r'^([ \t]*)raise NotImplementedError\("(lab(\d\d)\.\d+)[^\n]*$', re.MULTILINE)
_END_LINE = "# END " + "SOLUTION\n"  # spelled apart: the edition's package holds no marker
MIN_LINE = 24  # shorter solution lines ("return out", "x = y") are too common to prove a leak


def hide_solutions(code: str) -> str:
    """``code`` with each solution block replaced by its stub and a note of the lab that writes
    it; code without markers comes back unchanged. A block cut off by the end of an excerpt is
    hidden to the end."""
    if not any(_BEGIN.match(line) for line in code.splitlines()):
        return code
    try:
        stubbed, _ = strip_solutions(code)
    except SolutionBlockError:
        lines = code.splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if _BEGIN.match(line.rstrip("\n")))
        stubbed, _ = strip_solutions("".join(lines[: cut + 1]) + _END_LINE)
    return _STUB.sub(
        lambda m: (
            f"{m.group(1)}# you write this in lab {int(m.group(3))} (task {m.group(2)})\n"
            + m.group(0)
        ),
        stubbed,
    )


def rewrite_code_blocks(doctree: Any, transform: Callable[[str], str]) -> None:
    """Show every code block of a page's doctree as ``transform`` of its text (the sources and
    what executes are untouched: only what the reader sees changes)."""
    from docutils import nodes

    for node in list(doctree.findall(nodes.literal_block)):
        text = node.astext()
        shown = transform(text)
        if shown != text:
            node.rawsource = shown
            node.children = [nodes.Text(shown)]


def _rewrite(app: Any, doctree: Any) -> None:
    if os.environ.get("MINITORCH_DIST_SOLUTIONS") != "show":
        rewrite_code_blocks(doctree, hide_solutions)


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point: rewrite code blocks once each page's doctree is read; the chapters'
    kernels get ports no forked rank takes (:mod:`minitorch_dist.course.kernel_ports`) and
    freeze what their imports made (:mod:`minitorch_dist.course.kernel_gc`)."""
    from minitorch_dist.course.kernel_gc import use
    from minitorch_dist.course.kernel_ports import install

    install()
    use()
    app.connect("doctree-read", _rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _split(text: str) -> tuple[list[str], list[str]]:
    """(lines inside solution blocks, lines outside them), stripped."""
    inside, solution, other = False, [], []
    for line in text.splitlines():
        if _BEGIN.match(line):
            inside = True
        elif _END.match(line):
            inside = False
        else:
            (solution if inside else other).append(line.strip())
    return solution, other


def solution_lines(root: str | os.PathLike) -> set[str]:
    """The distinctive lines of every solution block in the package and the lab notebooks under
    ``root``: stripped, at least ``MIN_LINE`` characters, not comments, and found nowhere outside
    a solution block (a chapter or a check cell may well call what a solution calls)."""
    root = Path(root)
    texts = [
        p.read_text()
        for p in (root / "minitorch_dist").rglob("*.py")
        if p.name not in ("release.py", "course_book.py")
    ]
    texts += [p.read_text() for p in (root / "chapters").glob("*.md")]
    for nb in (root / "labs").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        texts += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    solution, other = set(), set()
    for text in texts:
        inside, outside = _split(text)
        solution.update(line for line in inside if len(line) >= MIN_LINE and line[0] != "#")
        other.update(outside)
    return solution - other


def solution_lines_in_html(root: str | os.PathLike, html_dir: str | os.PathLike) -> dict:
    """``{page: [solution lines it shows]}`` for the built book in ``html_dir`` (empty: no leak).
    Tags are stripped and entities decoded, so highlighted code matches its source."""
    wanted = solution_lines(root)
    leaks: dict[str, list[str]] = {}
    for page in sorted(Path(html_dir).rglob("*.html")):
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(errors="replace")))
        shown = {line.strip() for line in text.splitlines()} & wanted
        if shown:
            leaks[str(page.relative_to(html_dir))] = sorted(shown)
    return leaks
