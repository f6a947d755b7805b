"""The code a reader sees fits the page: the book's column shows about 88 characters of code.

Every code line the rendered book displays (chapters' ``{code-cell}`` blocks and the labs' code
cells, less those the book hides by their tags) is at most 88 characters long, and so is every
line of text a lab's stored outputs show (and a chapter's, in the last book build). No displayed cell is longer than 40 lines (longer code
belongs in the package, where it has a docstring), no displayed cell assembles a Markdown table
by hand (``minitorch_dist.display.Table`` renders one), and the labs' Colab set-up cell and import
blocks are collapsed in the book (they stay in the notebook).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from minitorch_dist.display import Table, markdown_table, show, signature_lines

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9]*.md"))
LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))
WIDTH = 88
MAX_LINES = 40
# Tags with which myst-nb leaves a cell's source out of the page or folds it away (a folded
# answer, hide-cell, is read when opened, so it is checked).
SOURCE_HIDDEN = {"remove-cell", "remove-input", "hide-input"}
OUTPUT_HIDDEN = {"remove-cell", "remove-output"}
TABLE_BY_HAND = re.compile(r"""["']\|[-: |]*---|["']\| [^"'\n]* \|""")


def _tags(options: list[str]) -> set[str]:
    """The tags in a MyST cell's options (``:tags: [a, b]`` or YAML ``tags: [a, b]``)."""
    for line in options:
        found = re.match(r":?tags:\s*\[(.*)\]", line.strip())
        if found:
            return {t.strip().strip("'\"") for t in found.group(1).split(",") if t.strip()}
    return set()


def chapter_cells(text: str) -> list[tuple[int, set[str], list[str]]]:
    """The code cells of a MyST notebook: (line number, tags, source lines)."""
    lines = text.split("\n")
    cells = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```{code-cell}"):
            i += 1
            continue
        start, i = i + 1, i + 1
        options: list[str] = []
        if lines[i].strip() == "---":
            i += 1
            while lines[i].strip() != "---":
                options.append(lines[i])
                i += 1
            i += 1
        else:
            while lines[i].startswith(":"):
                options.append(lines[i])
                i += 1
        body = []
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        cells.append((start, _tags(options), body))
        i += 1
    return cells


def lab_cells(path: Path) -> list[tuple[int, set[str], list[str], list[dict]]]:
    """The code cells of a lab: (cell index, tags, source lines, outputs)."""
    nb = json.loads(path.read_text())
    return [
        (k, set(c["metadata"].get("tags", [])), "".join(c["source"]).split("\n"), c["outputs"])
        for k, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
    ]


def _shown(path: Path) -> list[tuple[str, list[str]]]:
    """(where, source lines) of each cell whose source the rendered book displays."""
    if path.suffix == ".md":
        cells = [(n, tags, body) for n, tags, body in chapter_cells(path.read_text())]
    else:
        cells = [(k, tags, body) for k, tags, body, _ in lab_cells(path)]
    return [
        (f"{path.name} cell at {n}", body) for n, tags, body in cells if not tags & SOURCE_HIDDEN
    ]


def _too_wide(lines: list[str]) -> list[str]:
    return [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]


def _output_text(output: dict) -> str:
    """The text an output shows as plain text ('' for HTML, images and Markdown)."""
    if output["output_type"] == "stream":
        return "".join(output["text"])
    if output["output_type"] == "error":
        return ""  # a traceback: the error's own message
    data = output.get("data", {})
    if set(data) - {"text/plain"}:
        return ""
    return "".join(data.get("text/plain", ""))


@pytest.mark.parametrize("path", CHAPTERS + LABS, ids=lambda p: p.name)
def test_displayed_code_lines_fit_the_column(path: Path) -> None:
    """Catches a code line the book's column cuts off (1,394 displayed lines were over 80)."""
    wide = [f"{where}: {line}" for where, body in _shown(path) for line in _too_wide(body)]
    assert not wide, f"{len(wide)} displayed code lines over {WIDTH} characters:\n" + "\n".join(
        wide
    )


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_lab_outputs_fit_the_column(path: Path) -> None:
    """Catches printed output wider than the column (a signature on one line of 140)."""
    wide = [
        f"{path.name} cell {k}: {line}"
        for k, tags, _, outputs in lab_cells(path)
        if not tags & OUTPUT_HIDDEN
        for output in outputs
        for line in _too_wide(_output_text(output).split("\n"))
    ]
    assert not wide, f"{len(wide)} output lines over {WIDTH} characters:\n" + "\n".join(wide)


def _built(chapter: Path) -> Path | None:
    """The chapter as the last book build executed it, when that build is newer than it."""
    built = ROOT / "_build" / "jupyter_execute" / "chapters" / f"{chapter.stem}.ipynb"
    if built.exists() and built.stat().st_mtime >= chapter.stat().st_mtime:
        return built
    return None


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_outputs_fit_the_column(path: Path) -> None:
    """Catches a chapter's printed output wider than the column, in the executed notebook the
    last book build left (``make book``); skipped without a build newer than the chapter."""
    built = _built(path)
    if built is None:
        pytest.skip("no book build newer than the chapter: run make book")
    wide = [
        f"{path.name} cell {k}: {line}"
        for k, tags, _, outputs in lab_cells(built)
        if not tags & OUTPUT_HIDDEN
        for output in outputs
        for line in _too_wide(_output_text(output).split("\n"))
    ]
    assert not wide, f"{len(wide)} output lines over {WIDTH} characters:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", CHAPTERS + LABS, ids=lambda p: p.name)
def test_no_displayed_cell_is_longer_than_a_screen(path: Path) -> None:
    """Catches a displayed cell of more than 40 lines (one of 81 opened lab 8)."""
    long = [f"{where}: {len(body)} lines" for where, body in _shown(path) if len(body) > MAX_LINES]
    assert not long, "move the code into the package or split the cell:\n" + "\n".join(long)


@pytest.mark.parametrize("path", CHAPTERS + LABS, ids=lambda p: p.name)
def test_no_displayed_cell_assembles_a_markdown_table(path: Path) -> None:
    """Catches a visible cell that builds a table from '|' strings instead of ``Table``."""
    found = [where for where, body in _shown(path) if TABLE_BY_HAND.search("\n".join(body))]
    assert not found, "use minitorch_dist.display.Table:\n" + "\n".join(found)


def _imports(body: list[str]) -> int:
    """How many import statements a cell holds at its top level (not inside a string)."""
    code = "\n".join(line for line in body if not line.lstrip().startswith(("!", "%")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return sum(bool(re.match(r"(import|from) \S", line)) for line in body)
    return sum(isinstance(node, (ast.Import, ast.ImportFrom)) for node in tree.body)


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_lab_setup_and_imports_are_collapsed(path: Path) -> None:
    """Catches the Colab cell or a block of imports shown in the book before the first task (40-60
    lines of set-up opened every lab); the cells stay in the notebook, folded."""
    cells = lab_cells(path)
    colab = [(k, tags) for k, tags, body, _ in cells if "google.colab" in "\n".join(body)]
    assert colab, f"{path.name}: no Colab set-up cell"
    shown = [k for k, tags in colab if not tags & SOURCE_HIDDEN]
    shown += [k for k, tags, body, _ in cells if _imports(body) > 5 and not tags & SOURCE_HIDDEN]
    assert not shown, f"{path.name}: cells {shown} show the set-up; tag them hide-input"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_imports_are_out_of_sight(path: Path) -> None:
    """Catches a chapter that opens with a visible block of imports."""
    shown = [where for where, body in _shown(path) if _imports(body) > 5]
    assert not shown, "tag the import cell remove-cell or hide-input:\n" + "\n".join(shown)


def test_the_checks_catch_what_they_look_for() -> None:
    """The parsers see a long line, a hand-made table and the tags that hide a cell."""
    text = (
        "```{code-cell} ipython3\n"
        + "x = 1  # "
        + "a" * 90
        + "\n```\n\n"
        + "```{code-cell} ipython3\n:tags: [hide-input]\n\n"
        + "import a\nimport b\nimport c\nimport d\n```\n"
        + "```{code-cell} ipython3\nrows = ['| a | b |', '|---|---:|']\n```\n"
    )
    cells = chapter_cells(text)
    assert [tags for _, tags, _ in cells] == [set(), {"hide-input"}, set()]
    assert _too_wide(cells[0][2]) and not _too_wide(cells[1][2])
    assert _imports(cells[1][2]) == 4
    assert TABLE_BY_HAND.search("\n".join(cells[2][2]))
    assert not TABLE_BY_HAND.search('print(f"{a} | {b}")')


def test_table_renders_markdown_and_escapes_bars() -> None:
    """``Table`` gives the titles, an alignment rule and escaped cells; a short row is refused."""
    table = Table(["what", "n"])
    table.add("|grad|", 3)
    assert table.markdown() == "| what | n |\n|---|---:|\n| \\|grad\\| | 3 |"
    assert table._repr_markdown_() == str(table) == markdown_table(["what", "n"], [["|grad|", 3]])
    with pytest.raises(ValueError, match="2 cells"):
        table.add(1)
    with pytest.raises(ValueError, match="align"):
        Table(["a", "b"], align="l")


def test_show_wraps_a_long_signature_and_its_docstring(capsys) -> None:
    """``show`` prints a signature that fits on one line as one line, a longer one a parameter a
    line, module paths shortened, and the docstring's first paragraph wrapped to 88."""

    def short(x: int) -> int:
        """Twice x."""
        return 2 * x

    def long_one(
        first_argument: Sequence[int] | None = None,
        *,
        second_argument: dict[str, tuple[int, int]] | None = None,
        third: str = "a, b",
    ) -> dict[str, tuple[int, int]]:
        """A docstring whose first paragraph is long enough to need wrapping, as the
        package's are: they are written to a width of a hundred characters and more than that.

        Second paragraph, not shown."""
        return {}

    assert signature_lines(short) == ["def short(x: int) -> int:"]
    lines = signature_lines(long_one)
    assert lines[0].endswith("long_one(") and lines[-1] == ") -> dict[str, tuple[int, int]]:"
    assert "    first_argument: Sequence[int] | None = None," in lines  # not collections.abc.
    assert "    *," in lines and "    third: str = 'a, b'," in lines
    show(long_one)
    out = capsys.readouterr().out
    assert "Second paragraph" not in out and "than that." in out
    assert max(len(line) for line in out.splitlines()) <= WIDTH
