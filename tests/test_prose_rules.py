"""What readers read says what is true now, to them: no history of the book, no tracker, no diary.

The prose of every Markdown page at the repository's top (the README, the contributors' and
instructors' guides, the landing page ...), every chapter page (the changelog included) and the
Markdown cells of every lab must not

- tell the reader that the book was wrong before ("an earlier version of this page", "an
  earlier draft") or quote notes the reader has never seen ("our notes", "our source notes");
- name an issue number ("issue 28", "issue #28"): readers cannot see the tracker;
- narrate dated runs ("On 2026-12-01 the machine was slower ..."): measurements live in
  ``benchmarks/results/``. A release date in a version heading ("## 0.3.0 (2026-12-05)") is
  not a run and is allowed;
- hold an admonition titled "Correction": a box that corrects something corrects a claim that
  is widely repeated, and says so in its title ("Common misconception: ...").

Only prose is checked: fenced code (code cells, ``literalinclude``, shell blocks), inline code
(which is also where ``{cite}`` and ``{glue}`` roles keep their keys) and link targets are left
out, so a file name or a citation key with a date in it is not a narrative. Prose inside an
admonition, a note or a margin is checked like the rest. A phrase inside quotation marks on its
line is a mention (a guide stating the rule quotes what it forbids), not a use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Files whose rewrite is under way elsewhere: checked, but expected to fail until it lands
# (strict, so the entry must be removed once the file passes). Empty when every file passes.
PENDING: dict[str, str] = {}

# Directives whose body is prose (checked); any other fenced block is code (skipped).
PROSE_DIRECTIVES = {
    "admonition",
    "attention",
    "caution",
    "danger",
    "dropdown",
    "epigraph",
    "error",
    "hint",
    "important",
    "margin",
    "note",
    "seealso",
    "sidebar",
    "tip",
    "topic",
    "warning",
}

PHRASES = re.compile(
    r"earlier versions? of this (?:page|chapter|book)|an earlier version|earlier drafts?"
    r"|source notes|our notes",
    re.IGNORECASE,
)
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
)
DATE = re.compile(
    rf"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b|\b\d{{1,2}} {_MONTH} (?:19|20)\d\d\b"
    rf"|\b{_MONTH} \d{{1,2}}, (?:19|20)\d\d\b"
)
VERSION_HEADING = re.compile(r"^#+ .*\b\d+\.\d+(?:\.\d+)?\b")
CORRECTION_BOX = re.compile(r"^\s*(`{3,}|:{3,})\{admonition\}\s*Correction\b", re.IGNORECASE)
FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{[\w:-]+\})?(.*)$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK_TARGET = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, text) of the prose of a MyST page or Markdown cell, code left out."""
    out: list[tuple[int, str]] = []
    stack: list[tuple[str, bool]] = []  # (fence, is code) of the open fenced blocks
    for number, line in enumerate(markdown.splitlines(), start=1):
        fence = FENCE.match(line)
        if stack:
            closer, code = stack[-1]
            if fence and fence.group(1)[0] == closer[0] and len(fence.group(1)) >= len(closer):
                if not fence.group(2) and not fence.group(3).strip():
                    stack.pop()
                    continue
            if code:
                continue
        if fence:
            directive = (fence.group(2) or "").strip("{}")
            is_code = directive not in PROSE_DIRECTIVES
            stack.append((fence.group(1), is_code))
            if is_code:
                continue
        if line.lstrip().startswith(":") and re.match(r"^\s*:[\w-]+:", line):
            continue  # a directive's option (":class: warning")
        text = LINK_TARGET.sub("]", INLINE_CODE.sub("", line))
        out.append((number, text))
    return out


def _quoted(text: str, start: int) -> bool:
    """Whether ``text[start]`` lies inside a quotation opened on its line: a rule that names the
    phrase it forbids ('no "an earlier version of this page"') mentions it, it does not use it."""
    before = text[:start]
    return before.count('"') % 2 == 1 or before.count("\u201c") > before.count("\u201d")


def violations(markdown: str) -> list[str]:
    """Every breach of the rules in one page's Markdown, as 'line N: what: text'."""
    found = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        if CORRECTION_BOX.match(line):
            found.append(f"line {number}: an admonition titled 'Correction': {line.strip()}")
    for number, text in prose_lines(markdown):
        for rule, pattern in (("history or unseen notes", PHRASES), ("issue number", ISSUE)):
            for hit in pattern.finditer(text):
                if not _quoted(text, hit.start()):
                    found.append(f"line {number}: {rule} {hit.group(0)!r}: {text.strip()[:120]}")
        if not VERSION_HEADING.match(text):
            for hit in DATE.finditer(text):
                if not _quoted(text, hit.start()):
                    found.append(f"line {number}: dated {hit.group(0)!r}: {text.strip()[:120]}")
    return found


def page_markdown(path: Path) -> str:
    """A page's Markdown: the file itself, or a notebook's Markdown cells one after another."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in cells
        if c["cell_type"] == "markdown"
    )


def prose_files() -> list[Path]:
    """Every top-level Markdown page, every chapter page and every lab."""
    return (
        sorted(ROOT.glob("*.md"))
        + sorted((ROOT / "chapters").glob("*.md"))
        + sorted((ROOT / "labs").glob("*.ipynb"))
    )


def _param(path: Path):
    name = path.relative_to(ROOT).as_posix()
    if name in PENDING:
        return pytest.param(
            path, id=name, marks=pytest.mark.xfail(reason=PENDING[name], strict=True)
        )
    return pytest.param(path, id=name)


def test_every_kind_of_prose_file_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in prose_files()}
    assert {"README.md", "intro.md", "chapters/changelog.md"} <= names
    assert any(n.startswith("chapters/0") for n in names)
    assert any(n.startswith("labs/lab") for n in names)


@pytest.mark.parametrize("path", [_param(p) for p in prose_files()])
def test_prose_names_no_history_issue_or_dated_run(path: Path):
    found = violations(page_markdown(path))
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


def test_the_rules_catch_what_they_name_and_spare_code():
    """Each rule fires on a sentence it exists for, and not on the same text as code."""
    bad = {
        "An earlier version of this page put the flush at the smallest subnormal.": "history",
        "Our source notes read the figure as a share of time.": "history",
        "No collection while importing (issue 28).": "issue",
        "See Issue #30 for the list.": "issue",
        "On 2026-12-01 the same kind of machine was much slower.": "dated",
        "Measured on 1 December 2026, the jobs took longer.": "dated",
        "```{admonition} Correction: the ring is not the last word": "Correction",
        ":::{admonition} correction": "Correction",
    }
    for sentence, rule in bad.items():
        found = violations(sentence + "\n")
        assert found and rule in found[0], (sentence, found)
    spared = [
        "```bash\ngit log --since 2026-12-01  # issue 28, our notes\n```\n",
        "```{code-cell} ipython3\n# An earlier version used 2026-11-28\nx = 1\n```\n",
        "The table `benchmarks/results/2026-12-02_make.md` holds the times.\n",
        "See [the run](https://example.org/2026-12-02/issue-28).\n",
        "## 0.3.0 (2026-12-05)\n",
        'No issue numbers, no dated runs, no "an earlier version of\nthis page" in prose.\n',
        "Write \u201cissue 28\u201d nowhere a reader looks.\n",
        "```{admonition} Common misconception: the ring all-reduce is optimal\n:class: warning\n"
        "\nIt is often quoted without its condition {cite:p}`patarasuk2009bandwidth`.\n```\n",
    ]
    for text in spared:
        assert violations(text) == [], text


def test_prose_inside_a_box_is_checked():
    box = "```{admonition} Common misconception: x\n:class: note\n\nOur notes said so.\n```\n"
    assert violations(box), "an admonition's body is prose"
    nested = (
        "````{note}\nA note.\n```python\nissue_28 = 1  # issue 28\n```\nIssue 28 again.\n````\n"
    )
    found = violations(nested)
    assert len(found) == 1 and "line 6" in found[0], found
