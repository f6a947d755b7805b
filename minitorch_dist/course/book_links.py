"""The book as a reader meets it: a Sphinx extension for links, assets, labels and code display.

- **Colab**: chapter pages are MyST notebooks (``chapters/*.md``), which Colab cannot open, and
  sphinx-book-theme links an ``.ipynb`` only when one sits beside the ``.md``. Their ``.ipynb``
  twins live in ``colab/chapters/`` (outside the book, committed; ``python -m
  minitorch_dist.book_links`` regenerates them, tests/test_book_links.py checks they are in
  sync), each opening with the install cell the labs use; the extension points each chapter's
  Colab button at its twin. The same command first points every lab's install cell, the README
  and chapter 0 at ``_config.yml``'s ``repository.url`` (:mod:`minitorch_dist.course.repository`).
- **Offline assets**: when a build starts it writes the book's own MathJax and widget scripts
  (:mod:`minitorch_dist.vendor`), and it drops sphinx-thebe's scripts while thebe is off (the
  ``const THEBE_JS_URL`` script is emitted twice on every page, a console error).
- **Bibliography labels** in author-year form, like the citations (``Goyal et al., 2017``
  instead of the alpha style's ``[GDollarG+17]``): the ``author_year_labels`` pybtex style.
- **Code display**: ``# fmt: skip`` markers (for ruff, not for readers) are hidden in rendered
  code; the sources keep them.

    sphinx: extra_extensions: [minitorch_dist.course.book_links]      # _config.yml
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from minitorch_dist.course.course_book import rewrite_code_blocks

ROOT = Path(__file__).resolve().parents[2]
COLAB_DIR = "colab"  # the twins' folder, relative to the repository root
TEMPLATE_LAB = "labs/lab00_hello_ranks.ipynb"  # whose install cell the chapters' twins reuse
STYLE = "author_year_labels"  # the pybtex formatting style _config.yml names

_FMT_SKIP = re.compile(r"[ \t]*#[ \t]*fmt:[ \t]*skip[ \t]*$", re.MULTILINE)
_FMT_OFF_ON = re.compile(r"^[ \t]*#[ \t]*fmt:[ \t]*(off|on)[ \t]*\n", re.MULTILINE)


# -- code display -------------------------------------------------------------------------------


def hide_format_markers(code: str) -> str:
    """``code`` without ``# fmt: skip`` line endings and ``# fmt: off``/``on`` lines."""
    return _FMT_OFF_ON.sub("", _FMT_SKIP.sub("", code))


def _hide_markers(app: Any, doctree: Any) -> None:
    rewrite_code_blocks(doctree, hide_format_markers)


# -- Colab twins of the chapters -----------------------------------------------------------------


def install_cell_source(root: Path = ROOT) -> str:
    """The labs' Colab install cell, adapted to a chapter: run from chapters/, with myst-nb
    (the chapters glue their numbers), and no grading line."""
    nb = json.loads((root / TEMPLATE_LAB).read_text(encoding="utf-8"))
    code = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    if '"google.colab" in sys.modules' not in code or "%cd /content/course/labs" not in code:
        raise ValueError(f"{TEMPLATE_LAB}: its first code cell is not the Colab install cell")
    lines = []
    for line in code.splitlines():
        if "minitorch_dist.grade" in line or "minitorch_dist.submit" in line:  # no tasks
            continue
        line = line.replace("%cd /content/course/labs", "%cd /content/course/chapters")
        line = line.replace(
            "!pip install -q -e /content/course",
            '!pip install -q -e /content/course "myst-nb>=1.1"',
        )
        lines.append(line)
    return "\n".join(lines)


def colab_path(md: Path, root: Path = ROOT) -> Path:
    """Where the ``.ipynb`` twin of chapter page ``md`` lives."""
    return root / COLAB_DIR / md.resolve().relative_to(root.resolve()).with_suffix(".ipynb")


def chapter_notebook(md: Path, root: Path = ROOT) -> str:
    """The ``.ipynb`` text of MyST notebook ``md``: its cells (read as the book reads them),
    the install cell first, no outputs, ids numbered so the text is reproducible."""
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook(md.read_text(encoding="utf-8"))
    install = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": []}
    install["source"] = install_cell_source(root)
    cells = [install, *nb.cells]
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:03d}"
        cell["source"] = cell["source"].splitlines(keepends=True)  # as Jupyter saves it
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    meta = {k: v for k, v in nb.metadata.items() if k != "jupytext"}
    meta["colab"] = {"provenance": []}
    out = {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}
    # Keys sorted, dumped as minitorch_dist.release rewrites notebooks, so that the student
    # edition's copy stays byte-identical (and in sync).
    out = json.loads(json.dumps(out, sort_keys=True))
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"


def chapter_pages(root: Path = ROOT) -> list[Path]:
    """Chapter pages that are notebooks (a ``kernelspec`` in their front matter)."""
    return sorted(
        p
        for p in (root / "chapters").glob("*.md")
        if re.search(r"^kernelspec:", p.read_text(encoding="utf-8").split("\n---", 1)[0], re.M)
    )


def write_colab(root: Path = ROOT) -> list[Path]:
    """(Re)write every chapter's twin; remove twins whose chapter is gone."""
    written = []
    for md in chapter_pages(root):
        out = colab_path(md, root)
        out.parent.mkdir(parents=True, exist_ok=True)
        text = chapter_notebook(md, root)
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            out.write_text(text, encoding="utf-8")
        written.append(out)
    for stale in set((root / COLAB_DIR / "chapters").glob("*.ipynb")) - set(written):
        stale.unlink()
    return written


def _colab_button(app: Any, pagename: str, templatename: str, context: dict, doctree: Any):
    """Point the page's Colab button at the chapter's twin (after the theme builds it)."""
    twin = ROOT / COLAB_DIR / (pagename + ".ipynb")
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if group.get("label") == "launch-buttons" else []:
            url = button.get("url", "")
            if button.get("text") != "Colab" or (url.endswith(".ipynb") and "/colab/" in url):
                continue
            if not twin.exists():
                if not url.endswith(".ipynb"):
                    raise RuntimeError(
                        f"{pagename}: its Colab button opens {url}, and {twin} is missing: "
                        "run python -m minitorch_dist.book_links"
                    )
                continue
            head, _, _ = url.rpartition("/" + pagename)
            button["url"] = f"{head}/{COLAB_DIR}/{pagename}.ipynb"


# -- assets ---------------------------------------------------------------------------------------


def _vendor(app: Any) -> None:
    from minitorch_dist.course import vendor

    vendor.ensure(quiet=True)
    from minitorch_dist.viz.live_html import write_assets

    write_assets(vendor.STATIC / "live")  # the live widgets' script and Python (viz.live_html)
    static = str(vendor.STATIC)  # added here, not in _config.yml: see vendor.STATIC
    paths = [str((Path(app.confdir) / p).resolve()) for p in app.config.html_static_path]
    if static not in paths:
        app.config.html_static_path.append(static)


def _theme_mode(app: Any, config: Any) -> None:
    """A colour mode for a reader's first visit: with none (the theme's default), every first
    page logs "Got invalid theme mode: . Resetting to auto." as a console error. The theme
    reads it from html_context (it is not a theme option)."""
    if not config.html_context.get("default_mode"):
        config.html_context["default_mode"] = "auto"


def _thebe_config(app: Any, doctree: Any, docname: str) -> None:
    """Drop the x-thebe-config block sphinx-thebe puts in every page when thebe is off."""
    from docutils import nodes

    if app.config.html_theme_options.get("launch_buttons", {}).get("thebe"):
        return
    for node in list(doctree.findall(nodes.raw)):
        if "text/x-thebe-config" in node.astext():
            node.parent.remove(node)


def _scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any):
    """Drop sphinx-thebe's scripts when thebe is off, and body scripts emitted twice."""
    thebe = app.config.html_theme_options.get("launch_buttons", {}).get("thebe")
    files = context.get("script_files")
    if files is None:
        return
    seen, kept = set(), []
    for js in files:
        name, body = str(js.filename or ""), js.attributes.get("body", "")
        if not thebe and ("sphinx-thebe" in name or "THEBE_JS_URL" in body):
            continue
        key = (name, body, tuple(sorted((k, str(v)) for k, v in js.attributes.items())))
        if not name and key in seen:
            continue
        seen.add(key)
        kept.append(js)
    files[:] = kept
    if not thebe and "css_files" in context:
        context["css_files"][:] = [
            c for c in context["css_files"] if "thebe" not in str(c.filename)
        ]


# -- bibliography labels --------------------------------------------------------------------------


def _register_label_style() -> None:
    from pybtex.plugin import register_plugin
    from pybtex.richtext import Text
    from pybtex.style.formatting.unsrt import Style as UnsrtStyle
    from pybtex.style.labels import BaseLabelStyle
    from pybtex.style.sorting import BaseSortingStyle

    def last(person: Any) -> str:
        return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")

    class AuthorYearLabels(BaseLabelStyle):
        """``Goyal et al., 2017``; ``Chen and Li, 2016``; ``NVIDIA, 2023``; a, b on clashes."""

        def format_label(self, entry: Any) -> str:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            if not people:
                who = entry.fields.get("organization") or entry.key
            elif len(people) == 1:
                who = last(people[0])
            elif len(people) == 2:
                who = f"{last(people[0])} and {last(people[1])}"
            else:
                who = f"{last(people[0])} et al."
            year = entry.fields.get("year", "")
            return f"{who}, {year}" if year else who

        def format_labels(self, sorted_entries: Any):
            labels = [self.format_label(e) for e in sorted_entries]
            count, seen = Counter(labels), Counter()
            for label in labels:
                yield label if count[label] == 1 else label + chr(ord("a") + seen[label])
                seen[label] += 1

    class ByLabel(BaseSortingStyle):
        """Alphabetical by the label's author part, then year and title, so that a braced
        corporate author ({NVIDIA}) sorts among the others, not after Z."""

        def sorting_key(self, entry: Any) -> tuple[str, str, str]:
            who = AuthorYearLabels().format_label(entry).rsplit(", ", 1)[0]
            return who.lower(), entry.fields.get("year", ""), entry.fields.get("title", "")

    class AuthorYearStyle(UnsrtStyle):
        default_label_style = STYLE
        default_sorting_style = STYLE

    register_plugin("pybtex.style.sorting", STYLE, ByLabel, force=True)
    register_plugin("pybtex.style.labels", STYLE, AuthorYearLabels, force=True)
    register_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle, force=True)


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point."""
    _register_label_style()
    app.connect("config-inited", _theme_mode)
    app.connect("builder-inited", _vendor)
    # every page: it does nothing where no [data-live] element is (chapters 1 and 11, labs 1, 11)
    app.add_js_file("live/live.js", loading_method="defer")
    app.connect("doctree-resolved", _thebe_config, priority=900)  # after sphinx-thebe's (500)
    app.connect("doctree-read", _hide_markers)
    app.connect("html-page-context", _colab_button, priority=600)  # after the theme's (501)
    app.connect("html-page-context", _scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    from minitorch_dist.course.repository import follow

    for path in follow():  # _config.yml's repository.url into the labs, README and chapter 0
        print(path.relative_to(ROOT))
    for path in write_colab():
        print(path.relative_to(ROOT))
    sys.exit(0)
