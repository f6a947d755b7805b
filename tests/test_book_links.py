"""The book as readers meet it (minitorch_dist/book_links.py): Colab twins, scripts, labels, code.

Catches a chapter edited without regenerating its Colab twin, a twin that cannot run in Colab
(no install cell), a Colab button left on the .md, sphinx-thebe's duplicated script coming
back, `# fmt: skip` shown to readers (or code lost with it), alpha bibliography labels, and a
sidebar chapter number that disagrees with the chapter's file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minitorch_dist.course import book_links
from minitorch_dist.course.book_links import (
    chapter_notebook,
    chapter_pages,
    colab_path,
    hide_format_markers,
    install_cell_source,
)
from minitorch_dist.course.repository import repository_url

# The book's tooling: installed with the instructor's extras, not in a student's install.
nbformat = pytest.importorskip("nbformat")
yaml = pytest.importorskip("yaml")
nodes = pytest.importorskip("docutils.nodes")

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = chapter_pages()


def test_every_notebook_chapter_is_found():
    names = {p.name for p in CHAPTERS}
    assert {p.name for p in (ROOT / "chapters").glob("[0-9][0-9]_*.md")} == names
    assert "references.md" not in names


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_colab_twin_is_in_sync(md):
    twin = colab_path(md)
    assert twin.exists(), f"{twin} missing: run python -m minitorch_dist.book_links"
    assert twin.read_text(encoding="utf-8") == chapter_notebook(md), (
        f"{twin} differs from {md.name}: run python -m minitorch_dist.book_links"
    )


def test_twin_survives_the_student_edition_unchanged(tmp_path):
    """The release rewrites every notebook it ships (stubs, no outputs); a twin must come out
    byte-identical, or the edition's own sync test fails."""
    from minitorch_dist.course.release import _strip_notebook

    md = CHAPTERS[1]
    copy = tmp_path / "twin.ipynb"
    copy.write_text(chapter_notebook(md), encoding="utf-8")
    _strip_notebook(copy, None)
    assert copy.read_text(encoding="utf-8") == chapter_notebook(md)


def test_no_stray_twins():
    twins = {p.name for p in (ROOT / "colab" / "chapters").glob("*.ipynb")}
    assert twins == {p.with_suffix(".ipynb").name for p in CHAPTERS}


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_twin_opens_with_the_install_cell_and_holds_the_chapter(md):
    nb = nbformat.read(colab_path(md), as_version=4)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "code" and first.source == install_cell_source()
    assert nb.metadata["kernelspec"]["name"] == "python3"
    source = md.read_text(encoding="utf-8")
    assert sum(c.cell_type == "code" for c in nb.cells) - 1 == source.count("```{code-cell}")
    assert re.search(r"^# \S", nb.cells[1].source, re.M), "the chapter's title comes next"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_install_cell_is_the_labs_cell_run_from_chapters():
    lab = json.loads((ROOT / book_links.TEMPLATE_LAB).read_text(encoding="utf-8"))
    lab_cell = next("".join(c["source"]) for c in lab["cells"] if c["cell_type"] == "code")
    cell = install_cell_source()
    assert '"google.colab" in sys.modules' in cell and "git clone" in cell
    assert "%cd /content/course/chapters" in cell and "/labs" not in cell
    assert '"myst-nb>=1.1"' in cell, "the chapters glue their numbers with myst_nb"
    assert "minitorch_dist.grade" not in cell and "minitorch_dist.submit" not in cell
    kept = [
        line
        for line in lab_cell.splitlines()
        if "/labs" not in line and "grade" not in line and "submit" not in line
    ]
    assert all(line in cell for line in kept if "pip install" not in line)


def _context(url: str) -> dict:
    colab = {"type": "link", "text": "Colab", "url": url}
    binder = {"type": "link", "text": "Binder", "url": "https://mybinder.org/x"}
    return {"header_buttons": [{"label": "launch-buttons", "buttons": [binder, colab]}]}


# The launch button's address for the repository _config.yml names (repository.url).
BLOB = repository_url().replace("https://github.com/", "https://colab.research.google.com/github/")
BLOB += "/blob/main"


def test_colab_button_of_a_chapter_opens_its_twin():
    page = "chapters/01_where_the_memory_goes"
    context = _context(f"{BLOB}/{page}.md")
    book_links._colab_button(None, page, "page.html", context, None)
    buttons = context["header_buttons"][0]["buttons"]
    assert buttons[1]["url"] == f"{BLOB}/colab/{page}.ipynb"
    assert buttons[0]["url"] == "https://mybinder.org/x"
    assert (ROOT / buttons[1]["url"].split("/blob/main/", 1)[1]).exists()


def test_colab_button_of_a_lab_is_left_alone():
    page = "labs/lab01_where_the_memory_goes"
    context = _context(f"{BLOB}/{page}.ipynb")
    book_links._colab_button(None, page, "page.html", context, None)
    assert context["header_buttons"][0]["buttons"][1]["url"] == f"{BLOB}/{page}.ipynb"


def test_colab_button_on_an_md_without_twin_fails_the_build():
    with pytest.raises(RuntimeError, match="python -m minitorch_dist.book_links"):
        book_links._colab_button(
            None, "chapters/99_new", "page.html", _context(f"{BLOB}/x.md"), None
        )


class _JS:
    def __init__(self, filename, **attributes):
        self.filename, self.attributes = filename, attributes


class _App:
    def __init__(self, thebe: bool):
        class Config:
            html_theme_options = {"launch_buttons": {"thebe": thebe}}

        self.config = Config()


def _scripts_after(thebe: bool) -> list:
    thebe_body = 'const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'
    files = [
        _JS("_static/doctools.js"),
        _JS(None, body="var togglebuttonSelector = '.toggle';"),
        _JS(None, body=thebe_body),
        _JS("_static/sphinx-thebe.js", **{"async": "async"}),
        _JS(None, body="var togglebuttonSelector = '.toggle';"),
        _JS("", body=thebe_body),
        _JS(None, body="window.MathJax = {}"),
    ]
    context = {"script_files": files, "css_files": [_JS("_static/sphinx-thebe.css")]}
    book_links._scripts(_App(thebe), "p", "page.html", context, None)
    return context["script_files"]


def test_thebe_scripts_dropped_while_thebe_is_off_and_body_scripts_once():
    kept = _scripts_after(thebe=False)
    bodies = [js.attributes.get("body") for js in kept]
    assert [js.filename for js in kept] == ["_static/doctools.js", None, None]
    assert bodies[1:] == ["var togglebuttonSelector = '.toggle';", "window.MathJax = {}"]
    on = _scripts_after(thebe=True)
    assert sum("THEBE_JS_URL" in (js.attributes.get("body") or "") for js in on) == 1
    assert any(js.filename == "_static/sphinx-thebe.js" for js in on)


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("x = f(a,\n      b)  # fmt: skip\n", "x = f(a,\n      b)\n"),
        ("rows = [1,2]  #fmt:skip", "rows = [1,2]"),
        ("# fmt: off\nt = [1,0,\n     0,1]\n# fmt: on\ny = 2\n", "t = [1,0,\n     0,1]\ny = 2\n"),
        ('s = "# fmt: skip"\n', 's = "# fmt: skip"\n'),  # inside a string, not a marker
        ("x = 1  # a comment stays\n", "x = 1  # a comment stays\n"),
    ],
)
def test_format_markers_hidden(code, shown):
    assert hide_format_markers(code) == shown


def test_format_markers_hidden_in_the_doctree_not_in_the_source():
    doc = nodes.section()
    doc += nodes.literal_block("x = (1,\n     2)  # fmt: skip", "x = (1,\n     2)  # fmt: skip")
    doc += nodes.literal_block("y = 3", "y = 3")
    book_links._hide_markers(None, doc)
    assert [n.astext() for n in doc.findall(nodes.literal_block)] == ["x = (1,\n     2)", "y = 3"]
    assert "# fmt: skip" in (ROOT / "chapters/01_where_the_memory_goes.md").read_text()


def test_bibliography_labels_are_author_year():
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    book_links._register_label_style()
    style = find_plugin("pybtex.style.formatting", book_links.STYLE)()
    labels = [
        e.label for e in style.format_bibliography(parse_file(ROOT / "chapters/references.bib"))
    ]
    assert len(labels) == len(set(labels)), "labels must be unique"
    assert "Goyal et al., 2017" in labels and "Kingma and Ba, 2015" in labels
    assert not [lb for lb in labels if not re.fullmatch(r".+, (19|20)\d\d[a-z]?", lb)]
    assert not [lb for lb in labels if "Dollar" in lb or "{" in lb or "\\" in lb]
    keys = [lb.rsplit(", ", 1)[0].lower() for lb in labels]
    assert keys == sorted(keys), "sorted by the label's author part"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["bibtex_default_style"] == book_links.STYLE


def test_sidebar_numbers_chapters_as_the_prose_does():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [e for part in toc["parts"] for e in part["chapters"]]
    numbered = {
        e["file"]: e.get("title") for e in entries if re.match(r"chapters/\d\d_", e["file"])
    }
    assert "chapters/00_how_to_run" in numbered, "chapter 0 is numbered 0, as its file is"
    for file, title in numbered.items():
        heading = next(
            line[2:].strip()
            for line in (ROOT / f"{file}.md").read_text().splitlines()
            if line.startswith("# ")
        )
        number = int(re.match(r"chapters/(\d\d)_", file).group(1))
        assert title == f"{number}. {heading}", file
    labs = [e for e in entries if e["file"].startswith("labs/")]
    assert all("title" not in e for e in labs), "labs number themselves ('Lab N: ...')"


def test_theme_mode_set_for_a_first_visit_and_kept_when_chosen():
    class Config:
        html_context = {"github_user": "x", "default_mode": ""}

    book_links._theme_mode(None, Config)
    assert Config.html_context == {"github_user": "x", "default_mode": "auto"}
    Config.html_context["default_mode"] = "dark"
    book_links._theme_mode(None, Config)
    assert Config.html_context["default_mode"] == "dark"


@pytest.mark.parametrize("thebe", [False, True])
def test_thebe_config_block_dropped_while_thebe_is_off(thebe):
    doc = nodes.section()
    doc += nodes.raw("", '<script type="text/x-thebe-config">{}</script>', format="html")
    doc += nodes.raw("", "<p>kept</p>", format="html")
    book_links._thebe_config(_App(thebe), doc, "p")
    raws = [n.astext() for n in doc.findall(nodes.raw)]
    assert len(raws) == (2 if thebe else 1) and "<p>kept</p>" in raws
