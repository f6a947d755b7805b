"""What the book and the labs display, made to fit the page (88 characters of code or text).

``Table``: column titles, rows of cells and an alignment, shown as a real table. A chapter or lab
builds one row by row and displays it (or glues it with myst-nb's ``glue``): Jupyter and the book
render its Markdown as an HTML table, and ``str`` gives the Markdown text, for a README or a
result file.

``show(fn)``: what a lab asks you to implement, its signature and the first paragraph of its
docstring, wrapped to the page. Nothing here imports torch or matplotlib.

    >>> t = Table(["ranks", "sent (B)"])
    >>> t.add(2, f"{4096:,}")
    >>> print(t)
    | ranks | sent (B) |
    |---|---:|
    | 2 | 4,096 |
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence

__all__ = ["Table", "doc", "markdown_table", "show", "signature_lines"]

WIDTH = 88

_RULES = {"l": "---", "r": "---:", "c": ":---:"}


def _cell(value: object) -> str:
    """A cell's text on one line: a ``|`` escaped so that it does not end the cell."""
    return " ".join(str(value).split()).replace("|", r"\|")


class Table:
    """A table with column titles, rows and an alignment per column.

    ``align`` has one letter per column: ``"l"`` (left), ``"r"`` (right) or ``"c"`` (centre);
    by default the first column is left-aligned and the others, which usually hold numbers,
    right-aligned. Cells are shown as ``str`` shows them: format numbers before adding them.
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[object]] = (),
        align: str | None = None,
    ) -> None:
        self.columns = [str(c) for c in columns]
        if not self.columns:
            raise ValueError("a table needs at least one column")
        if align is None:
            align = "l" + "r" * (len(self.columns) - 1)
        if len(align) != len(self.columns) or set(align) - set(_RULES):
            raise ValueError(
                f"align needs one of l, r, c per column ({len(self.columns)}), got {align!r}"
            )
        self.align = align
        self.rows: list[list[str]] = []
        for row in rows:
            self.add(*row)

    def add(self, *cells: object) -> None:
        """Append one row: one cell per column."""
        if len(cells) != len(self.columns):
            raise ValueError(f"a row needs {len(self.columns)} cells, got {len(cells)}")
        self.rows.append([_cell(c) for c in cells])

    def markdown(self) -> str:
        """The table as Markdown: the titles, the alignment rule, one line per row."""
        lines = [
            "| " + " | ".join(_cell(c) for c in self.columns) + " |",
            "|" + "|".join(_RULES[a] for a in self.align) + "|",
        ]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in self.rows])

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return self.markdown()

    def __len__(self) -> int:
        return len(self.rows)


def markdown_table(
    columns: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None
) -> str:
    """The Markdown text of a table: ``str(Table(columns, rows, align))``."""
    return Table(columns, rows, align).markdown()


# Module paths a reader does not need in a signature: ``collections.abc.Sequence`` -> ``Sequence``.
_PATHS = [
    (re.compile(r"\btorch\.nn\.modules(?:\.\w+)*\.(\w+)"), r"nn.\1"),
    (re.compile(r"\btorch\.optim\.optimizer\.(\w+)"), r"torch.optim.\1"),
    (
        re.compile(
            r"\b(?:collections\.abc|typing|torch\.distributed\.distributed_c10d"
            r"|minitorch_dist(?:\.\w+)*)\.(\w+)"
        ),
        r"\1",
    ),
]


def _short(text: str) -> str:
    for pattern, repl in _PATHS:
        text = pattern.sub(repl, text)
    return text


def signature_lines(fn: Callable, width: int = WIDTH) -> list[str]:
    """``def name(...) -> ...:`` of ``fn`` in at most ``width`` characters a line: on one line
    when it fits, else one parameter a line (as ruff and black format a long ``def``).
    A class (an autograd ``Function``) shows as ``class Name(Base):``."""
    name = fn.__qualname__.rsplit("<locals>.", 1)[-1]  # ``Class.method``, not its enclosure
    if inspect.isclass(fn):
        return [f"class {name}({fn.__bases__[0].__qualname__}):"]
    sig = inspect.signature(fn, eval_str=True)
    text = _short(str(sig))
    ret = "" if sig.return_annotation is inspect.Signature.empty else text[text.rindex(" -> ") :]
    one = f"def {name}{text}:"
    if len(one) <= width:
        return [one]
    inner = text[1 : len(text) - len(ret) - 1]  # the parameters, ``*`` and ``/`` included
    parts = _split_top_level(inner) if inner else []
    return [f"def {name}(", *(f"    {p}," for p in parts), f"){ret}:"]


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def doc(obj: object, width: int = WIDTH) -> str:
    """``obj``'s docstring with each paragraph that is wider than ``width`` re-wrapped to it
    (paragraphs that fit, such as lists and code, are kept as they are)."""
    paragraphs = (inspect.getdoc(obj) or "").split("\n\n")
    return "\n\n".join(
        p
        if max(map(len, p.splitlines()), default=0) <= width
        else textwrap.fill(" ".join(p.split()), width, break_on_hyphens=False)
        for p in paragraphs
    )


def show(fn: Callable, width: int = WIDTH) -> None:
    """Print what a lab asks you to implement: ``fn``'s signature and the first paragraph of its
    docstring, wrapped to ``width`` characters."""
    doc = inspect.getdoc(fn) or "(no docstring: see the module docstring)"
    first = " ".join(doc.split("\n\n")[0].split())
    print("\n".join(signature_lines(fn, width)))
    print(
        textwrap.fill(
            first, width, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
        )
        + "\n"
    )
