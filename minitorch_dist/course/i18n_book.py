"""The book in two languages: what Sphinx's translation machinery needs from our pages.

The English chapters and labs are the source; the Chinese text lives in gettext catalogues
(``locales/zh_CN/LC_MESSAGES/<page>.po``) and Sphinx's ``Locale`` transform swaps each paragraph,
heading and caption for its translation when the book is built with ``language=zh_CN``
(:mod:`minitorch_dist.course.i18n` runs both builds). This extension, loaded in both, does four
things Sphinx cannot know about a book of executed notebooks:

- **Outputs are not text to translate.** A cell's printed output, its numbers and the body of a
  table it displays are what ran; only a displayed table's header row is prose (the package's
  :class:`~minitorch_dist.display.Table` writes it in English). Everything else under a cell's
  output is marked untranslatable, so it is neither extracted nor replaced.
- **Glued numbers survive translation.** A translated paragraph is parsed as a document of its
  own, which has none of the page's glue data; ``{glue:text}`key``` in it becomes a reference to
  the page itself (``{glue:text}`/chapters/x.md::key:s```), which myst-nb resolves from the glue
  file the page's own parse wrote. Nothing is executed twice.
- **Figure descriptions translated, and shown.** The alt text that
  :mod:`~minitorch_dist.course.book_outputs` reads from a figure's PNG arrives after Sphinx
  translated the page; it is looked up in the same catalogue here (the gettext builder extracts
  it, as it extracts every image's alt text). The figures themselves are the English build's
  PNGs, their labels in English, so a translated page also shows the description under each
  figure: what each axis and series is, in the page's language.
- **A language switch on every page**: a ``<meta name="mt-lang-switch">`` naming the same page in
  the other language, which ``_static/reading.js`` turns into a link in the page's header.

    sphinx: extra_extensions: [minitorch_dist.course.i18n_book]      # _config.yml
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

from minitorch_dist.course.i18n_pages import (  # the pages' links, in a module of their own
    CJK,
    SOURCE_LANGUAGE,
    TRANSLATIONS,
    _colab_twin,
    _language_switch,
    switch_target,
    translate_glued_devices,
)

__all__ = ["SOURCE_LANGUAGE", "TRANSLATIONS", "figure_text", "page_glue", "switch_target", "setup"]


_GLUE_ROLE = re.compile(r"(?P<role>\{glue(?::(?P<kind>[a-z]*))?\})`(?P<text>[^`]+)`")


def page_glue(text: str, page: str) -> str:
    """``text`` with each glue role that names a key of its own page made to name ``page``
    (``/chapters/x.md``) instead; roles that already name a page are left as they are."""

    def one(m: re.Match) -> str:
        kind, body = m.group("kind"), m.group("text")
        if "::" in body:
            return m.group(0)
        if kind == "text" and ":" not in body:
            body += ":s"  # {glue:text} reads the last ":" as its format; "s" is its default
        return f"{m.group('role')}`{page}::{body}`"

    return _GLUE_ROLE.sub(one, text)


def _computed(node: Any) -> None:
    """Mark the text of ``node`` (what a cell computed) untranslatable, but a table's header
    and a figure's caption or legend, which are words of the page."""
    from docutils import nodes

    for text in node.findall(nodes.TextElement):
        kept = (nodes.thead, nodes.caption, nodes.legend)
        if not any(isinstance(p, kept) for p in [text, *_parents(text)]):
            text["translatable"] = False


def _patch_glue_directives() -> None:
    """What a glue directive pastes ({glue:md}`table`, {glue:any}, {glue:figure}'s picture) is a
    cell's output, pasted into the prose: its body is as untranslatable as the cell's own."""
    from myst_nb.ext.glue import directives

    for cls in (directives.PasteAnyDirective, directives.PasteMarkdownDirective,
                directives.PasteFigureDirective, directives.PasteMathDirective):  # fmt: skip
        if getattr(cls.run, "_minitorch_dist", False):
            continue

        def run(self: Any, _run: Any = cls.run) -> Any:
            out = _run(self)
            for node in out:
                _computed(node)
            return out

        run._minitorch_dist = True  # type: ignore[attr-defined]
        cls.run = run


def _output_text_untranslatable(app: Any, doctree: Any) -> None:
    """Mark every text node of a cell's output untranslatable, but a displayed table's header."""
    from docutils import nodes

    for container in doctree.findall(nodes.container):
        if "cell_output" not in container.get("classes", []):
            continue
        _computed(container)


def _parents(node: Any) -> list[Any]:
    out = []
    while node.parent is not None:
        node = node.parent
        out.append(node)
    return out


def _catalogue(app: Any, docname: str) -> Any:
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    dirs = [os.path.join(app.srcdir, d) for d in app.config.locale_dirs]
    domain = docname_to_domain(docname, app.config.gettext_compact)
    catalog, _ = init_locale(dirs, app.config.language, domain)
    return catalog


def _translate_alt(app: Any, doctree: Any) -> None:
    """Translate the figure descriptions book_outputs set after Sphinx translated the page (and,
    for the gettext builder, hand them over to be extracted)."""
    from docutils import nodes

    if app.builder.name == "gettext":
        # myst-nb later picks text/plain over an output's image for this builder, so each
        # description is handed over as a paragraph of its own, at the end of the page
        for image in list(doctree.findall(nodes.image)):
            if image.get("alt"):
                para = nodes.paragraph(image["alt"], image["alt"])
                para.source, para.line = doctree.get("source"), image.line
                para.uid = uuid.uuid4().hex
                doctree.append(para)
        return
    if app.config.language in (None, SOURCE_LANGUAGE):
        return
    from sphinx.util import logging

    from minitorch_dist.course.catalogues import with_new_numbers

    catalog = _catalogue(app, app.env.docname)
    for image in list(doctree.findall(nodes.image)):
        alt = image.get("alt", "")
        if alt:
            image["alt"] = catalog.gettext(alt)
            if image["alt"] == alt:  # a description quoting what ran: this run's numbers
                image["alt"] = with_new_numbers(alt, getattr(catalog, "_catalog", {})) or alt
            if image["alt"] == alt and not CJK.search(alt):  # (a figure directive's :alt:
                # was translated by Sphinx already)
                logging.getLogger(__name__).warning(
                    f"a figure's description is not in the catalogue, so the page shows it in "
                    f"English: {alt[:120]!r} (run `python -m minitorch_dist.course.i18n "
                    f"extract` after an English build and translate it)",
                    location=image,
                )
                continue
            captioned = [  # the description goes under the caption, which says why it is shown
                f
                for f in _parents(image)
                if isinstance(f, nodes.figure)
                and any(isinstance(c, nodes.caption) for c in f.children)
            ]
            shown = figure_text(image["alt"], app.config.language)
            if captioned:
                captioned[0].append(shown)
            else:
                image.parent.insert(image.parent.index(image) + 1, shown)


#: What a visible figure description starts with, per language ("Figure: ").
FIGURE_TEXT_PREFIX = {"zh_CN": "图："}


def figure_text(description: str, language: str = "zh_CN") -> Any:
    """The translated description of a figure, shown under it: the figures are drawn once, by
    the English build, so their axis labels and legends stay English, and this line says in the
    page's language what each axis and series is. Screen readers read the image's alt text (the
    same words) and skip this copy (``aria-hidden``)."""
    import html as html_lib

    from docutils import nodes

    text = html_lib.escape(FIGURE_TEXT_PREFIX.get(language, "") + description, quote=False)
    return nodes.raw("", f'<p class="mt-figure-text" aria-hidden="true">{text}</p>', format="html")


def translate_widget(html: str, words: dict[str, str]) -> str:
    """A live widget's HTML (:func:`minitorch_dist.viz.live_html.live_html`) with its words in
    another language: each control's label, the yes/no of a yes/no control and the line under
    the controls. Its answer is program output and stays as Python printed it."""
    import html as html_lib

    def word(m: re.Match) -> str:
        english = html_lib.unescape(m.group(2))
        return m.group(1) + html_lib.escape(words.get(english, english), quote=False) + m.group(3)

    html = re.sub(
        r"(<span style=\"display:inline-block;min-width:9em\">)([^<]*)(</span>)", word, html
    )
    html = re.sub(r"(<option [^>]*>)(yes|no)(</option>)", word, html)
    return re.sub(r"(<p class=\"live-status\"[^>]*>)([^<]*)(</p>)", word, html)


def _translate_widgets(app: Any, doctree: Any) -> None:
    """A translated page's live widgets speak its language (see :func:`translate_widget`)."""
    if app.config.language in (None, SOURCE_LANGUAGE) or app.builder.name == "gettext":
        return
    from docutils import nodes

    from minitorch_dist.course.catalogues import Book, widget_translations

    words = widget_translations(app.config.language, Book(Path(app.srcdir)))
    for raw in doctree.findall(nodes.raw):
        if words and 'class="live-widget"' in raw.astext():
            text = translate_widget(raw.astext(), words)
            raw.children = [nodes.Text(text)]


def _patch_msgstr_parsing() -> None:
    """Glue roles in a translated paragraph name their own page (see :func:`page_glue`)."""
    import sphinx.transforms.i18n as i18n

    original = i18n.publish_msgstr
    if getattr(original, "_minitorch_dist", False):
        return

    def publish_msgstr(app: Any, source: str, source_path: str, *args: Any, **kw: Any) -> Any:
        page = "/" + os.path.relpath(source_path, app.srcdir).replace(os.sep, "/")
        return original(app, page_glue(source, page), source_path, *args, **kw)

    publish_msgstr._minitorch_dist = True  # type: ignore[attr-defined]
    i18n.publish_msgstr = publish_msgstr


def _record_notebook_metadata(app: Any) -> None:
    """Keep what the translated build needs of each page the English build executes: myst-nb
    writes ``jupyter_execute/<page>.ipynb`` without the executed notebook's metadata (its
    ``language_info``, which names the code cells' lexer, and the live widgets' state), so the
    client's metadata is written beside it, as ``<page>.metadata.json``."""
    import json

    import myst_nb.sphinx_ as nb_sphinx

    original = nb_sphinx.create_client
    if getattr(original, "_minitorch_dist", False):
        return

    class Recording:
        def __init__(self, client: Any, source: str) -> None:
            self.client, self.source = client, source

        def __enter__(self) -> Any:
            return self.client.__enter__()

        def __exit__(self, *exc: Any) -> Any:
            out = self.client.__exit__(*exc)
            executed = (self.client.exec_metadata or {}).get("method") not in (None, "cache")
            if exc[0] is None and executed:
                folder = os.path.abspath(self.client.nb_config.output_folder)
                rel = os.path.splitext(os.path.relpath(self.source, app.srcdir))[0]
                path = os.path.join(folder, rel + ".metadata.json")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(self.client.nb_metadata, f)
            return out

    def create_client(notebook: Any, source: str, *args: Any, **kwargs: Any) -> Any:
        return Recording(original(notebook, source, *args, **kwargs), source)

    create_client._minitorch_dist = True  # type: ignore[attr-defined]
    nb_sphinx.create_client = create_client


def setup(app: Any) -> dict[str, Any]:
    from sphinx.transforms import SphinxTransform

    class UntranslatableOutputs(SphinxTransform):
        default_priority = 19  # before sphinx.transforms.i18n.Locale (20)

        def apply(self, **kwargs: Any) -> None:
            _output_text_untranslatable(self.app, self.document)

    app.add_transform(UntranslatableOutputs)
    _patch_msgstr_parsing()  # only translated paragraphs pass through it
    _record_notebook_metadata(app)
    _patch_glue_directives()
    app.connect("doctree-read", _translate_alt, priority=900)  # after book_outputs (500)
    app.connect("doctree-read", _translate_widgets)
    app.connect("doctree-resolved", translate_glued_devices)
    app.connect("html-page-context", _language_switch)
    app.connect("html-page-context", _colab_twin, priority=700)  # after book_links' (600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
