"""The Chinese edition's machinery (minitorch_dist.course.i18n, i18n_book): catalogues that follow
the English pages, glued numbers and figure descriptions through translation, a build that
executes nothing twice, the language switch and the labs' twins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_dist.course.catalogues import is_code_only, merge, translate_markdown
from minitorch_dist.course.i18n_book import page_glue, switch_target

FIXTURE = Path(__file__).parent / "fixtures" / "i18n_book"


def test_a_translated_paragraph_glues_from_its_own_page() -> None:
    text = "值为 {glue:text}`bytes`，{glue:text}`ratio:.2f` 与 {glue:}`fig` 和 {glue:text}`a.md::k`"
    assert page_glue(text, "/chapters/x.md") == (
        "值为 {glue:text}`/chapters/x.md::bytes:s`，{glue:text}`/chapters/x.md::ratio:.2f` 与 "
        "{glue:}`/chapters/x.md::fig` 和 {glue:text}`a.md::k`"
    )


@pytest.mark.parametrize(
    "msgid, code_only",
    [
        ("`zero/stage1.py`", True),
        ("lab06.1", True),
        ("ZeRO-1", True),
        ("$2\\Psi$", True),
        ("task", False),
        ("ZeRO-1: reduce-scatter the gradients", False),
    ],
)
def test_messages_with_nothing_to_translate(msgid: str, code_only: bool) -> None:
    assert is_code_only(msgid) is code_only


def test_a_changed_paragraph_becomes_fuzzy_and_a_new_one_untranslated(tmp_path: Path) -> None:
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    old = Catalog(locale="zh_CN")
    old.add("Memory is the wall.", "显存是瓶颈。")
    old.add("A paragraph that goes away.", "将被删除的段落。")
    old.add("Rank 0 of 4: 12% under backward.", "4 个 rank 中的 rank 0：12% 重叠。")  # what ran
    po = tmp_path / "page.po"
    with po.open("wb") as f:
        write_po(f, old)
    template = Catalog()
    template.add("Memory is the wall!")  # changed
    template.add("A new paragraph.")
    template.add("`minitorch_dist.zero`")  # nothing to translate
    template.add("Rank 0 of 4: 31% under backward.")  # another run: its numbers alone changed
    merged = {m.id: m for m in merge(template, po) if m.id}
    assert set(merged) == {"Memory is the wall!", "A new paragraph.", "`minitorch_dist.zero`",
                           "Rank 0 of 4: 31% under backward."}  # fmt: skip
    rerun = merged["Rank 0 of 4: 31% under backward."]
    assert not rerun.fuzzy and rerun.string == "4 个 rank 中的 rank 0：31% 重叠。"
    assert merged["Memory is the wall!"].fuzzy
    assert merged["Memory is the wall!"].string == "显存是瓶颈。"  # a suggestion, not used
    assert not merged["A new paragraph."].string
    assert merged["`minitorch_dist.zero`"].string == "`minitorch_dist.zero`"


def test_a_lab_twin_translates_whole_blocks_only() -> None:
    md = textwrap.dedent(
        """\
        # Lab 6: ZeRO

        ZeRO removes the copies
        in three stages.

        | task | where |
        | --- | --- |
        | lab06.1 | `zero/stage1.py` |

        - a list item that
          wraps
        """
    )
    known = {
        "Lab 6: ZeRO": "实验 6：ZeRO",
        "ZeRO removes the copies in three stages.": "ZeRO 分三个阶段去掉副本。",
        "task": "任务",
        "where": "位置",
        "a list item that wraps": "一个换行的列表项",
        "the copies": "不应单独替换",  # only whole blocks: never inside another message
    }
    text, count = translate_markdown(md, known)
    assert "# 实验 6：ZeRO" in text
    assert "ZeRO 分三个阶段去掉副本。" in text
    assert "| 任务 | 位置 |" in text
    assert "- 一个换行的列表项" in text
    assert "不应单独替换" not in text
    assert count == 5


def test_a_roles_title_is_translated_its_target_kept() -> None:
    from minitorch_dist.course.catalogues import check_translation

    english = "See the {doc}`instructors' guide <../instructors>` and `make`."
    assert check_translation(english, "见{doc}`教师指南 <../instructors>`与 `make`。") is None
    assert check_translation(english, "见{doc}`教师指南 <../other>`与 `make`。")
    assert check_translation(english, "见{doc}`教师指南 <../instructors>`与 make。")


@pytest.mark.parametrize(
    "page, language, target",
    [
        ("intro", None, ("zh_CN/intro.html", "中文")),
        ("chapters/01_x", None, ("../zh_CN/chapters/01_x.html", "中文")),
        ("chapters/01_x", "zh_CN", ("../../chapters/01_x.html", "English")),
        ("intro", "zh_CN", ("../intro.html", "English")),
    ],
)
def test_the_language_switch_lands_on_the_same_page(page, language, target) -> None:
    assert switch_target(page, language) == target


BUILD_BOTH = """
import sys
from pathlib import Path
from babel.messages.pofile import read_po, write_po
from minitorch_dist.course import i18n

book = i18n.Book(Path(sys.argv[1]))
for po in i18n.extract(book):
    with po.open("rb") as f:
        catalog = read_po(f, locale="zh_CN")
    for m in catalog:
        if not m.id or m.string:
            continue
        if "{glue:text}`bytes_per_param`" in m.id:
            m.string = "优化器每个参数占 {glue:text}`bytes_per_param` 字节，含 $x^2$ 与 `predict()`。"
        else:
            m.string = {"Where the memory goes": "显存都去哪儿了", "stage": "阶段",
                        "The only part": "唯一的部分", "Welcome": "欢迎",
                        "Bytes per rank fall as the ranks grow.": "每个 rank 的字节数随 rank 增多而下降。",
                        }.get(m.id, "译：" + m.id)
    with po.open("wb") as f:
        write_po(f, catalog)
i18n.build(book)
"""


@pytest.mark.course
@pytest.mark.slow
def test_the_chinese_build_translates_and_executes_nothing_twice(tmp_path: Path) -> None:
    book = tmp_path / "book"
    shutil.copytree(FIXTURE, book)
    log = tmp_path / "executions.log"
    env = {**os.environ, "I18N_FIXTURE_LOG": str(log)}
    jb = Path(sys.executable).with_name("jupyter-book")
    subprocess.run([str(jb), "build", str(book), "-W", "-q"], env=env, check=True, timeout=600)
    assert log.read_text().count("executed") == 1
    run = subprocess.run(
        [sys.executable, "-c", BUILD_BOTH, str(book)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert log.read_text().count("executed") == 1, "the Chinese build executed the page again"
    zh = (book / "_build" / "html" / "zh_CN" / "page.html").read_text()
    en = (book / "_build" / "html" / "page.html").read_text()
    assert (
        "显存都去哪儿了" in zh and '优化器每个参数占 <span class="pasted-text">16</span> 字节' in zh
    )  # the glued number
    assert "<th" in zh and "阶段" in zh and "4 GiB" in zh  # a displayed table: header translated
    assert 'alt="每个 rank 的字节数随 rank 增多而下降。"' in zh
    # the figure's labels are the English build's: its description is shown under it, once
    assert zh.count('<p class="mt-figure-text" aria-hidden="true">图：每个 rank 的字节数') == 1
    assert "mt-figure-text" not in en
    assert 'name="mt-lang-switch" content="../page.html"' in zh
    assert 'name="mt-lang-switch" content="zh_CN/page.html"' in en
    assert "No key" not in run.stderr
    assert '<span class="pasted-text">一块 NVIDIA H100</span>' in zh  # a glued device, in Chinese
    assert '<span class="pasted-text">one NVIDIA H100</span>' in en
    # the sidebar: _toc.yml's caption and "N. title" translated, and the book's title
    assert "1. 显存都去哪儿了" in zh and "唯一的部分" in zh and "1. Where the memory goes" not in zh


# --- the Chinese catalogues themselves ------------------------------------------------------

CATALOGUES = sorted((Path(__file__).parents[1] / "locales" / "zh_CN" / "LC_MESSAGES").rglob("*.po"))
GLOSSARY = Path(__file__).parents[1] / "locales" / "zh_CN" / "glossary.tsv"


def _messages(po: Path) -> list:
    from babel.messages.pofile import read_po

    with po.open("rb") as f:
        return [m for m in read_po(f, locale="zh_CN") if m.id and m.string and not m.fuzzy]


def _glossary() -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in GLOSSARY.read_text().splitlines()]
    rows = [r for r in rows if len(r) == 2 and not r[0].startswith("#")]
    assert rows[0] == ["english", "chinese"]
    return [(en, zh) for en, zh in rows[1:]]


def _page(po: Path) -> str:
    return po.relative_to(GLOSSARY.parent / "LC_MESSAGES").with_suffix("").as_posix()


@pytest.mark.parametrize("po", CATALOGUES, ids=_page)
def test_every_translation_keeps_the_markup_of_its_english(po: Path) -> None:
    from minitorch_dist.course.catalogues import check_translation

    bad = [(m.id[:70], why) for m in _messages(po) if (why := check_translation(m.id, m.string))]
    assert not bad, f"{len(bad)} translations lose code, math, roles or link targets: {bad[:5]}"


@pytest.mark.parametrize("po", CATALOGUES, ids=_page)
def test_every_glossary_term_is_translated_the_one_way(po: Path) -> None:
    """Where a message's English (outside code and math) has a glossary term, its translation
    has the glossary's Chinese term; in a chapter, the first translation to use a term gives
    the English beside it, in parentheses."""
    import re

    from minitorch_dist.course.catalogues import _MARKUP

    terms = [(en, zh) for en, zh in _glossary() if en != zh]
    introduced: set[str] = set()
    wrong, unintroduced = [], []
    for m in _messages(po):
        if m.string == m.id:
            continue
        english = _MARKUP.sub(" ", m.id)
        for en, zh in terms:
            # the term as a word, hyphenated ("mixed-precision training") or plural
            word = re.escape(en).replace(r"\ ", "[ -]") + "(?:s|es)?"
            if not re.search(rf"(?<![\w-]){word}(?![\w])", english, re.IGNORECASE):
                continue
            if zh not in m.string:
                wrong.append(f"{en!r} -> {zh!r} in {m.id[:60]!r}")
            elif zh not in introduced:
                introduced.add(zh)
                if _page(po).startswith("chapters/0") or _page(po).startswith("chapters/1"):
                    if not re.search(rf"[（(]\s*{word}", m.string, re.IGNORECASE):
                        unintroduced.append(f"{zh} without ({en}) in {m.string[:60]!r}")
    assert not wrong, f"{len(wrong)} glossary terms translated otherwise: {wrong[:8]}"
    assert not unintroduced, f"first uses without the English term: {unintroduced[:8]}"


@pytest.mark.course
def test_a_chinese_edition_has_chinese_labs_with_the_same_code(tmp_path: Path) -> None:
    """`release --lang zh_CN`: each lab's text translated, its code cells (stubbed as in the
    English edition) the same, so the same graded tests grade it."""
    import nbformat

    from minitorch_dist.course.release import make_release

    root = Path(__file__).parents[1]
    make_release(root, tmp_path / "en", labs=["lab00"], commit=False)
    make_release(root, tmp_path / "zh", labs=["lab00"], commit=False, lang="zh_CN")
    lab = "labs/lab00_hello_ranks.ipynb"
    en = nbformat.read(tmp_path / "en" / lab, as_version=4)
    zh = nbformat.read(tmp_path / "zh" / lab, as_version=4)
    code = [[c.source for c in nb.cells if c.cell_type == "code"] for nb in (en, zh)]
    assert code[0] == code[1]
    text = "\n".join(c.source for c in zh.cells if c.cell_type == "markdown")
    assert "# 实验 0：你好，rank" in text and "Hello, ranks" not in text
    assert "](../chapters/00_how_to_run.md)" in text  # links as deep as the English lab's
    tests = sorted(p.name for p in (tmp_path / "zh" / "tests").glob("test_*.py"))
    assert tests == sorted(p.name for p in (tmp_path / "en" / "tests").glob("test_*.py"))


LABS = sorted((Path(__file__).parents[1] / "labs").glob("lab*.ipynb"))


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_each_labs_chinese_twin_is_current(lab: Path) -> None:
    """labs/zh_CN/<lab> is the lab with its Markdown translated from the catalogue and its code
    cells and outputs the lab's own (`python -m minitorch_dist.course.i18n twins` writes them;
    make test's nbval runs them too)."""
    import nbformat

    from minitorch_dist.course.catalogues import lab_twin

    twin = lab.parent / "zh_CN" / lab.name
    assert twin.exists(), f"{twin.name}: run python -m minitorch_dist.course.i18n twins"
    want, _, _ = lab_twin(lab)
    have = nbformat.read(twin, as_version=4)
    assert [(c.cell_type, c.source) for c in have.cells] == [
        (c.cell_type, c.source) for c in want.cells
    ], f"{twin} is stale: run python -m minitorch_dist.course.i18n twins"
    for mine, theirs in zip(have.cells, want.cells):
        if mine.cell_type == "code":
            assert mine.outputs == theirs.outputs, f"{twin} has other outputs than its lab"


def test_a_translated_widget_shows_its_catalogues_words_and_the_check_expects_them() -> None:
    """The zh_CN build writes each live widget's labels, yes/no and status line from
    widgets.po; the browser check compares a Chinese page's controls with those words."""
    import re

    from minitorch_dist.course.browser_check_labels import control_failures
    from minitorch_dist.course.catalogues import widget_messages
    from minitorch_dist.course.i18n_book import translate_widget
    from minitorch_dist.viz.live import controls
    from minitorch_dist.viz.live_html import live_html

    words = {m: f"译{i}" for i, m in enumerate(widget_messages())}
    html = translate_widget(live_html("predictor"), words)
    want = {k: (words[label], *rest) for k, (label, *rest) in controls("predictor").items()}
    seen = []
    for label, name, options in re.findall(
        r'min-width:9em">([^<]*)</span><select data-control="(\w+)">(.*?)</select>', html
    ):
        opts = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', options)
        seen.append(
            {
                "control": name,
                "label": label,
                "options": [(v.replace("&quot;", '"'), t) for v, t in opts],
            }
        )
    yes_no = (words["yes"], words["no"])
    assert control_failures(seen, want, yes_no) == []
    assert control_failures(seen, controls("predictor")), "English labels must not pass"
    assert words[widget_messages()[-1]] in html  # the status line


def _book_pages() -> list[str]:
    import yaml

    toc = yaml.safe_load((Path(__file__).parents[1] / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [entry["file"] for entry in part.get("chapters", [])]
    return pages


@pytest.mark.parametrize("page", _book_pages())
def test_every_page_of_the_book_is_translated(page: str) -> None:
    """Every page of the table of contents has a catalogue, translated in full: no message
    empty, none fuzzy (an English paragraph changed since its translation)."""
    from babel.messages.pofile import read_po

    from minitorch_dist.course.catalogues import BOOK, REQUIRED_SHARE

    po = BOOK.catalogue(page)
    assert po.exists(), f"no catalogue for {page}: run python -m minitorch_dist.course.i18n extract"
    with po.open("rb") as f:
        messages = [m for m in read_po(f, locale="zh_CN") if m.id]
    left = [m.id[:60] for m in messages if not m.string or m.fuzzy]
    share = 1 - len(left) / max(len(messages), 1)
    assert share >= REQUIRED_SHARE, (
        f"{page}: {len(left)} of {len(messages)} messages untranslated or fuzzy, e.g. {left[:3]} "
        "(python -m minitorch_dist.course.i18n todo " + page + ")"
    )


@pytest.mark.course
@pytest.mark.slow
def test_the_catalogues_hold_the_english_as_it_is_now(tmp_path: Path) -> None:
    """Extracting the English pages again finds no message the catalogues lack: a paragraph
    changed or added in English since the last `i18n extract` fails here (and, once extracted,
    shows up fuzzy or untranslated in test_every_page_of_the_book_is_translated)."""
    from babel.messages.pofile import read_po

    from minitorch_dist.course.catalogues import Book
    from minitorch_dist.course.i18n import extract

    root = Path(__file__).parents[1]
    copy = tmp_path / "book"
    keep = ("_config.yml", "_toc.yml", "intro.md", "instructors.md", "chapters", "labs",
            "locales", "_static", "minitorch_dist")  # fmt: skip
    copy.mkdir()
    for name in keep:
        src = root / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy / name)
    extract(Book(copy), outputs=False)

    def ids(base: Path) -> dict[str, set[str]]:
        out = {}
        for po in sorted((base / "locales/zh_CN/LC_MESSAGES").rglob("*.po")):
            with po.open("rb") as f:
                out[po.relative_to(base).as_posix()] = {m.id for m in read_po(f) if m.id}
        return out

    # the catalogues also hold the outputs' words (extracted after an English build), which a
    # prose-only extraction does not see: every message it finds must be there, not the reverse
    now, committed = ids(copy), ids(root)
    stale = {
        page: sorted(now[page] - committed.get(page, set()))[:2]
        for page in now
        if now[page] - committed.get(page, set())
    }
    assert not stale, (
        f"the English changed since the catalogues were extracted: {stale} "
        "(python -m minitorch_dist.course.i18n extract, then translate what todo lists)"
    )


def test_the_browser_check_reads_chinese_pages_as_it_reads_english_ones(tmp_path: Path) -> None:
    """A Chinese figure description has no spaces between words, and a translation's folder has
    its own asset folders and index pages: neither is a failure or a page to check."""
    from minitorch_dist.course.browser_check_page import pages, undescribed

    assert not undescribed("最忙专家负载与平均负载之比随训练步变化的折线图")
    assert undescribed("图") and undescribed("cpu-2core_moe_imbalance.png")
    for page in ("intro.html", "zh_CN/intro.html", "zh_CN/chapters/01_x.html",
                 "zh_CN/_static/webpack-macros.html", "zh_CN/search.html", "_static/x.html"):  # fmt: skip
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text("<html></html>")
    assert pages(tmp_path) == ["intro.html", "zh_CN/chapters/01_x.html", "zh_CN/intro.html"]


def test_a_chinese_lab_pages_colab_button_opens_the_chinese_twin() -> None:
    from types import SimpleNamespace

    from minitorch_dist.course.i18n_book import _colab_twin

    root = Path(__file__).parents[1]
    url = "https://colab.research.google.com/github/o/r/blob/main/labs/lab00_hello_ranks.ipynb"

    def button_after(language: str | None, page: str = "labs/lab00_hello_ranks") -> str:
        app = SimpleNamespace(config=SimpleNamespace(language=language), srcdir=str(root))
        button = {"text": "Colab", "url": url}
        context = {"header_buttons": [{"label": "launch-buttons", "buttons": [button]}]}
        _colab_twin(app, page, "page.html", context, None)
        return button["url"]

    assert button_after("zh_CN").endswith("/blob/main/labs/zh_CN/lab00_hello_ranks.ipynb")
    assert button_after(None) == url  # the English page opens the English lab


@pytest.mark.parametrize(
    "text, translated",
    [
        # the numbers moved ("rank 0 of 4"), and 0 became two numbers, in the English's order
        (
            "Rank 0 of 4: 39 all-reduces, 12% under backward.",
            "4 个 rank 中的 rank 0：39 次，12% 重叠。",
        ),
        (
            "Rank 0 of 8: 5 all-reduces, 0% under backward.",
            "8 个 rank 中的 rank 0：5 次，0% 重叠。",
        ),
        (
            "Rank 3 of 4: 39 all-reduces, 3% under backward.",
            "4 个 rank 中的 rank 3：39 次，3% 重叠。",
        ),
        ("Rank 0 of 4 all-reduces 7 under backward.", None),  # other words: no message fits
    ],
)
def test_a_description_that_quotes_what_ran_is_translated_with_this_runs_numbers(
    text: str, translated: str | None
) -> None:
    """Catches a figure description left English because its measured numbers changed since the
    catalogue was written, and a translation given another run's numbers."""
    from minitorch_dist.course.catalogues import with_new_numbers

    messages = {
        "Rank 0 of 4: 39 all-reduces, 0% under backward.": "4 个 rank 中的 rank 0：39 次，0% 重叠。"
    }
    assert with_new_numbers(text, messages) == translated
    # a translation that drops a number which changed cannot say the new one
    assert with_new_numbers("Rank 0 of 4: 39 all-reduces, 12% under backward.",
                            {"Rank 0 of 4: 39 all-reduces, 0% under backward.": "rank 0：39 次。"}) is None  # fmt: skip


def test_an_extract_of_the_prose_alone_removes_no_message(tmp_path: Path) -> None:
    """Catches `i18n extract --prose-only` (which cannot see the outputs' table headers and
    figure descriptions) deleting their translations."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    old = Catalog(locale="zh_CN")
    old.add("Prose.", "正文。")
    old.add("Line plot of MiB against s.", "MiB 随 s 变化的折线图。")  # an output's words
    po = tmp_path / "page.po"
    with po.open("wb") as f:
        write_po(f, old)
    template = Catalog()
    template.add("Prose.")
    kept = {m.id: m.string for m in merge(template, po, drop=False) if m.id}
    assert kept == {"Prose.": "正文。", "Line plot of MiB against s.": "MiB 随 s 变化的折线图。"}
    assert {m.id for m in merge(template, po) if m.id} == {"Prose."}


def test_a_figure_description_missing_from_the_catalogue_is_a_build_warning(monkeypatch) -> None:
    """Catches a Chinese page that shows a figure's description in English without a word: the
    strict build fails on it. A description with new numbers, or one Sphinx translated (a
    figure directive's :alt:), is no warning, and each translated one is shown under its figure."""
    import gettext
    from types import SimpleNamespace

    from docutils import nodes
    from docutils.core import publish_doctree

    from minitorch_dist.course import i18n_book

    class Catalogue(gettext.NullTranslations):
        _catalog = {"Line plot of MiB against s: 3 runs.": "MiB 随 s 变化的折线图：3 次运行。"}

        def gettext(self, message: str) -> str:
            return self._catalog.get(message, message)

    warned: list[str] = []
    logger = SimpleNamespace(warning=lambda message, **kwargs: warned.append(message))
    monkeypatch.setattr(i18n_book, "_catalogue", lambda app, docname: Catalogue())
    monkeypatch.setattr("sphinx.util.logging.getLogger", lambda name: logger)
    doctree = publish_doctree("A page.")
    alts = ["Line plot of MiB against s: 5 runs.", "已经翻译的描述。", "Bar chart of GiB."]
    for alt in alts:
        doctree += nodes.container("", nodes.image(uri="x.png", alt=alt))
    caption = nodes.caption("", "图题。")
    doctree += nodes.figure("", nodes.container("", nodes.image(uri="y.png", alt=alts[0])), caption)
    app = SimpleNamespace(
        builder=SimpleNamespace(name="html"),
        config=SimpleNamespace(language="zh_CN"),
        env=SimpleNamespace(docname="page"),
    )
    i18n_book._translate_alt(app, doctree)
    assert [i["alt"] for i in doctree.findall(nodes.image)] == [
        "MiB 随 s 变化的折线图：5 次运行。", "已经翻译的描述。", "Bar chart of GiB.",
        "MiB 随 s 变化的折线图：5 次运行。",
    ]  # fmt: skip
    assert len(warned) == 1 and "'Bar chart of GiB.'" in warned[0]
    shown = [(r.parent.tagname, r.astext()) for r in doctree.findall(nodes.raw)]
    p = '<p class="mt-figure-text" aria-hidden="true">图：'
    assert shown == [
        ("container", p + "MiB 随 s 变化的折线图：5 次运行。</p>"),
        ("container", p + "已经翻译的描述。</p>"),  # a figure directive's :alt:, shown too
        ("figure", p + "MiB 随 s 变化的折线图：5 次运行。</p>"),  # under the figure's caption
    ]
    assert doctree.children[-1].children[-1].astext().startswith(p)  # after the caption


def test_every_device_a_result_names_reads_in_chinese() -> None:
    """Catches a Chinese sentence that says "在 one NVIDIA H100 上": a glued device's name (from
    a committed result file) is put in Chinese words on the Chinese pages."""
    import re

    from minitorch_dist.course.i18n_pages import CJK, translate_device
    from minitorch_dist.course.results import RESULTS_DIR, device_of

    devices = set()
    for path in sorted(RESULTS_DIR.glob("*.md")):
        try:
            devices.add(device_of(path.stem))
        except ValueError:  # a result that names no device is quoted by no chapter as one
            continue
    assert {"one NVIDIA H100", "a 2-core CPU without a GPU"} <= devices
    for device in devices:
        words = translate_device(device, "zh_CN")
        assert CJK.search(words), device
        assert not re.search(r"\b(one|a)\b", words), words
    assert translate_device("4 GiB", "zh_CN") == "4 GiB"  # other glued values are left alone
