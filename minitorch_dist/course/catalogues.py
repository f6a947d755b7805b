"""The Chinese edition's catalogues: one gettext catalogue per page of the book
(``locales/<language>/LC_MESSAGES/<page>.po``), what a translation must keep of its English, and
the labs' translated twins. :mod:`minitorch_dist.course.i18n` extracts and builds with them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LANGUAGE = "zh_CN"
#: The share of each page's messages that must be translated (not fuzzy, not empty).
REQUIRED_SHARE = 1.0


@dataclass(frozen=True)
class Book:
    """Where a book's sources, catalogues and builds are (this repository's, or a test's)."""

    root: Path = ROOT

    @property
    def locales(self) -> Path:
        return self.root / "locales"

    @property
    def build(self) -> Path:
        return self.root / "_build"

    @property
    def executed(self) -> Path:  # myst-nb writes each page it executed here
        return self.build / "jupyter_execute"

    @property
    def cache(self) -> Path:
        return self.build / ".jupyter_cache_translations"

    def catalogue(self, page: str, language: str = LANGUAGE) -> Path:
        return self.locales / language / "LC_MESSAGES" / f"{page}.po"


BOOK = Book()  # this repository's


_CODE_LIKE = re.compile(r"`[^`]*`|\$[^$]*\$|\{[a-z:]+\}`[^`]*`|https?://\S+")
_LATEX = re.compile(r"\\text\{[^}]*\}|\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_NAME = re.compile(r"[\w.\-/]*[\d_./][\w.\-/]*|[A-Z][A-Za-z]*[A-Z]\w*")


def is_code_only(msgid: str) -> bool:
    """A message with nothing to translate: inline code, math, names and numbers only
    ("`zero/stage1.py`", "lab06.1", "$2\\Psi$", "ZeRO-1"); its translation is itself."""
    rest = _CODE_LIKE.sub(" ", msgid)
    if "$" not in msgid and _LATEX.search(msgid):  # a displayed formula, its \text{} included
        rest = _LATEX.sub(" ", rest)
    words = [w for w in rest.split() if _WORD.search(w) and not _NAME.fullmatch(w.strip(".,;:()"))]
    return not words


def merge(template: Any, po: Path, language: str = LANGUAGE, *, drop: bool = True) -> Any:
    """The catalogue ``po`` brought up to ``template`` (a babel Catalog of the English page):
    new messages empty, changed ones fuzzy with the old translation as a suggestion (but one
    whose numbers alone changed, translated with its new numbers: :func:`with_new_numbers`),
    removed ones gone (kept with ``drop=False``: a template that cannot see every message, as
    the prose alone, without the outputs' words), messages with nothing to translate filled with
    themselves."""
    from babel.messages.pofile import read_po

    if po.exists():
        with po.open("rb") as f:
            catalog = read_po(f, locale=language)
        catalog.update(template, update_header_comment=False)
        if not drop:
            for message in list(catalog.obsolete.values()):
                catalog[message.id] = message
            catalog.obsolete.clear()
    else:
        catalog = template
        catalog.locale = language
    for message in catalog:
        if message.id and not message.string and is_code_only(message.id):
            message.string = message.id
        if message.fuzzy and message.previous_id and isinstance(message.id, str):
            # changed in its numbers alone (a description quoting what ran): not fuzzy
            now = with_new_numbers(message.id, {message.previous_id[0]: message.string})
            if now is not None:
                message.string, message.previous_id = now, []
                message.flags.discard("fuzzy")
        # babel reads back a wrapped "#| msgid" (a fuzzy message's old English) as comments
        message.user_comments = [c for c in message.user_comments if not c.startswith("|")]
    return catalog


def stats(book: Book = BOOK, language: str = LANGUAGE) -> dict[str, tuple[int, int, int]]:
    """Per page: (translated, fuzzy, total) messages of its catalogue."""
    from babel.messages.pofile import read_po

    out = {}
    base = book.locales / language / "LC_MESSAGES"
    for po in sorted(base.rglob("*.po")):
        with po.open("rb") as f:
            catalog = read_po(f, locale=language)
        messages = [m for m in catalog if m.id]
        done = sum(1 for m in messages if m.string and not m.fuzzy)
        fuzzy = sum(1 for m in messages if m.fuzzy)
        out[po.relative_to(base).with_suffix("").as_posix()] = (done, fuzzy, len(messages))
    return out


def translations(page: str, book: Book = BOOK, language: str = LANGUAGE) -> dict[str, str]:
    """A page's finished translations: English message -> its translation (no fuzzy ones)."""
    from babel.messages.pofile import read_po

    po = book.catalogue(page, language)
    if not po.exists():
        return {}
    with po.open("rb") as f:
        catalog = read_po(f, locale=language)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


def translate_markdown(text: str, translations: dict[str, str]) -> tuple[str, int]:
    """``text`` (a Markdown cell) with every message of ``translations`` found in it replaced,
    longest first; a message matches across the line breaks and indentation that Sphinx folds
    into one space, and only as a whole block, list item, heading or table cell. Returns the
    text and how many messages were replaced."""
    count = 0
    for msgid in sorted(translations, key=len, reverse=True):
        if translations[msgid] == msgid:
            continue
        words = [re.escape(w) for w in msgid.split()]
        pattern = re.compile(
            r"(?<![^\s|#>*\-(])" + r"\s+".join(words) + r"(?=\s*(?:\||$))", re.MULTILINE
        )
        text, n = pattern.subn(lambda _m, t=translations[msgid]: t, text)
        count += n
    return text, count


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def with_new_numbers(text: str, messages: dict[str, str]) -> str | None:
    """The translation of ``text`` from a message that differs from it in its numbers alone,
    those numbers replaced by ``text``'s; None where no message fits.

    A figure's description can quote what ran ("39 all-reduces, 0% of their time under
    backward"), so each execution writes a new English sentence. A translation may move the
    numbers ("rank 0 of 4" is "4 个 rank 中的 rank 0"), so each is found by its value: an old
    number that became one new number is replaced wherever the translation quotes it; one that
    became several ("rank 0" stays 0, "0%" becomes 12%) must be quoted as often as the English
    quotes it, and its occurrences are taken in the English's order."""
    shape, new = _NUMBER.sub("#", text), _NUMBER.findall(text)
    for msgid, msgstr in messages.items():
        if not (isinstance(msgid, str) and msgstr) or _NUMBER.sub("#", msgid) != shape:
            continue
        became: dict[str, list[str]] = {}
        for old, now in zip(_NUMBER.findall(msgid), new):
            became.setdefault(old, []).append(now)
        quoted = _NUMBER.findall(msgstr)
        if any(
            quoted.count(old) != len(nows)
            if len(set(nows)) > 1
            else old not in quoted and nows[0] != old
            for old, nows in became.items()
        ):
            continue
        queues = {old: iter(nows) for old, nows in became.items() if len(set(nows)) > 1}

        def one(m: re.Match, became: dict = became, queues: dict = queues) -> str:
            old = m.group(0)
            if old in queues:
                return next(queues[old])
            return became[old][0] if old in became else old

        return _NUMBER.sub(one, msgstr)
    return None


def lab_twin(lab: Path, language: str = LANGUAGE, *, deeper: bool = True) -> tuple[Any, int, int]:
    """The lab notebook with its Markdown cells translated; its code cells, outputs and metadata
    are the English lab's. Returns the notebook, the messages replaced and the messages known."""
    import nbformat

    nb = nbformat.read(lab, as_version=4)
    known = translations(f"labs/{lab.stem}", Book(lab.parents[1]), language)
    replaced = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            text, n = translate_markdown(cell.source, known)
            # a twin in labs/<language>/ is one folder deeper than its lab
            cell.source = text.replace("](../", "](../../") if deeper else text
            replaced += n
    nb.metadata["language_info_book"] = language
    return nb, replaced, sum(1 for k, v in known.items() if k != v)


def write_twins(book: Book = BOOK, language: str = LANGUAGE) -> list[Path]:
    """Write every lab's translated twin into ``labs/<language>/`` (for Colab and
    ``release --lang``)."""
    import nbformat

    out = []
    for lab in sorted((book.root / "labs").glob("lab*.ipynb")):
        nb, _, _ = lab_twin(lab, language)
        path = book.root / "labs" / language / lab.name
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        out.append(path)
    return out


_MARKUP = re.compile(
    r"\{[\w:-]+\}`[^`]*`"  # a role: {glue:text}`key`, {cite:p}`key`, {numref}`label`
    r"|``[^`]+``|`[^`]+`"  # inline code
    r"|\$\$[^$]+\$\$|\$[^$]+\$"  # math
    r"|\]\([^)\s]+\)"  # a link's target (its text is translated)
)


_TITLED_ROLE = re.compile(r"(\{[\w:-]+\})`[^`<]*<([^>`]+)>`")  # {doc}`the guide <../instructors>`


def markup(text: str) -> list[str]:
    """What a translation must keep as it is, sorted: roles, inline code, math, link targets.
    A role's own title is text (``{doc}`教师指南 <../instructors>```): only its target counts."""
    return sorted(_TITLED_ROLE.sub(r"\1`<\2>`", m) for m in _MARKUP.findall(text))


def check_translation(msgid: str, msgstr: str) -> str | None:
    """Why ``msgstr`` cannot stand for ``msgid`` (None if it can): it must keep every role,
    code span, formula and link target of the English, and no more of them."""
    want, got = markup(msgid), markup(msgstr)
    if want != got:
        missing = [m for m in want if m not in got]
        extra = [m for m in got if m not in want]
        return f"markup differs: missing {missing}, added {extra}"
    return None


def fill(page: str, translations: dict[str, str], book: Book = BOOK) -> tuple[int, list[str]]:
    """Write ``translations`` (English message -> Chinese) into ``page``'s catalogue; a message
    the catalogue lacks, or a translation that loses markup, is reported, not written.
    Returns the number written and the problems."""
    from babel.messages.pofile import read_po

    po = book.catalogue(page)
    with po.open("rb") as f:
        catalog = read_po(f, locale=LANGUAGE)
    problems, written = [], 0
    for msgid, msgstr in translations.items():
        message = catalog.get(msgid)
        if message is None:
            problems.append(f"not in the catalogue (changed in English?): {msgid[:80]!r}")
            continue
        why = check_translation(msgid, msgstr)
        if why:
            problems.append(f"{why}: {msgid[:80]!r}")
            continue
        message.string = msgstr
        message.flags.discard("fuzzy")
        message.previous_id = []
        message.user_comments = [c for c in message.user_comments if not c.startswith("|")]
        written += 1
    write_catalogue(po, catalog)
    return written, problems


def write_catalogue(po: Path, catalog: Any) -> None:
    """Write ``catalog`` to ``po`` as every catalogue here is written: no header (no dates: a
    catalogue changes only with its messages), no line numbers (a paragraph moved down its page
    changes nothing), lines not wrapped, obsolete messages and fuzzy ones' old English dropped."""
    from babel.messages.pofile import write_po

    po.parent.mkdir(parents=True, exist_ok=True)
    with po.open("wb") as f:
        write_po(f, catalog, width=0, omit_header=True, ignore_obsolete=True,
                 include_previous=False, include_lineno=False, sort_output=False)  # fmt: skip


WIDGETS = "widgets"  # the live widgets' catalogue: locales/<language>/LC_MESSAGES/widgets.po


def widget_messages() -> list[str]:
    """What the live widgets say in words of their own: each control's label, the yes/no of a
    yes/no control and the line under the controls (their answers are program output)."""
    from minitorch_dist.viz.live import KINDS, controls
    from minitorch_dist.viz.live_html import STATUS

    labels = [label for kind in KINDS for label, _, _ in controls(kind).values()]
    return list(dict.fromkeys([*labels, "yes", "no", STATUS]))


def widget_translations(language: str = LANGUAGE, book: Book = BOOK) -> dict[str, str]:
    """The widgets' words in ``language`` (English word -> translation; {} for none)."""
    return translations(WIDGETS, book, language)
