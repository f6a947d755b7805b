"""The Chinese edition: catalogues kept in step with the English pages, and its build.

    python -m minitorch_dist.course.i18n extract   # English pages -> locales/zh_CN/**/*.po
    python -m minitorch_dist.course.i18n stats     # the share translated, page by page
    python -m minitorch_dist.course.i18n build     # _build/html/zh_CN/, after the English build
    python -m minitorch_dist.course.i18n twins     # labs/zh_CN/: the labs with Chinese text
    python -m minitorch_dist.course.i18n todo chapters/06_zero_and_offload   # what is left
    python -m minitorch_dist.course.i18n fill chapters/06_zero_and_offload t.json  # {en: zh}

**One source.** The English chapters and labs are the source. ``extract`` runs Sphinx's gettext
builder over them and merges what it finds into one catalogue per page
(``locales/zh_CN/LC_MESSAGES/chapters/06_zero_and_offload.po``): a new paragraph arrives
untranslated, a changed one arrives *fuzzy* (its old translation kept as a suggestion, not
used), and a removed one leaves. ``tests/test_i18n.py`` fails when a page's catalogue is below
:data:`REQUIRED_SHARE` translated.

**Executed once.** ``build`` runs after the English build and executes nothing: it fills a
jupyter-cache with the notebooks the English build executed (``_build/jupyter_execute/``, with
their glued values put back) and builds with ``nb_execution_mode="cache"``, so every code cell
finds its outputs there; the labs show their committed outputs in both languages.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .catalogues import (
    BOOK,
    LANGUAGE,
    ROOT,
    WIDGETS,
    Book,
    fill,
    merge,
    stats,
    translations,
    widget_messages,
    write_catalogue,
    write_twins,
)
from .edition_readme import README, readme_messages


def _overrides(book: Book, language: str | None, mode: str) -> dict[str, Any]:
    over: dict[str, Any] = {
        "external_toc_path": "_toc.yml",  # as `jupyter-book build` passes them
        "latex_individualpages": False,
        "gettext_compact": False,  # one catalogue per page
        "locale_dirs": ["locales/"],
        "nb_execution_mode": mode,
        "nb_execution_cache_path": str(book.cache),
    }
    if language:
        over["language"] = language
    return over


def _sphinx(book: Book, builder: str, out: Path, overrides: dict[str, Any], *, strict: bool) -> int:
    from jupyter_book.sphinx import build_sphinx

    language = overrides.get("language", "en")
    result = build_sphinx(
        str(book.root),
        str(out),
        noconfig=True,
        path_config=str(book.root / "_config.yml"),
        confoverrides=overrides,
        builder=builder,
        doctreedir=str(book.build / f".doctrees-{builder}-{language}"),
        warningiserror=strict,
        keep_going=strict,
        freshenv=True,  # Sphinx does not re-read a page whose catalogue alone changed
        quiet=True,
    )
    if isinstance(result, Exception):
        raise result
    return int(result)


def fill_cache(book: Book = BOOK) -> int:
    """Put the notebooks the English build executed into the translations' jupyter-cache, their
    glued values back in place (myst-nb moves them to ``<page>.glue.json``). The number cached."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(book.cache))
    cache.clear_cache()
    count = 0
    for path in sorted(book.executed.rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        metadata = path.with_suffix(".metadata.json")  # see i18n_book._record_notebook_metadata
        if metadata.exists():
            nb.metadata.update(json.loads(metadata.read_text()))
        glue_file = path.with_suffix(".glue.json")
        code = [c for c in nb.cells if c.cell_type == "code"]
        if glue_file.exists() and code:
            for output in json.loads(glue_file.read_text()).values():
                prefix = output.get("metadata", {}).get("scrapbook", {}).get("mime_prefix", "")
                if not prefix:
                    continue  # shown where it was glued: still in its cell's outputs
                output["data"] = {prefix + k: v for k, v in output["data"].items()}
                code[-1].outputs.append(nbformat.from_dict(output))
        scratch = book.build / ".jupyter_cache_scratch.ipynb"
        nbformat.write(nb, scratch)
        cache.cache_notebook_file(scratch, check_validity=False)
        scratch.unlink()
        count += 1
    return count


def extract(book: Book = BOOK, *, outputs: bool = True) -> list[Path]:
    """Update every page's catalogue from the English pages; the catalogues written. With
    ``outputs`` (after an English build) the messages of cell outputs are included: displayed
    tables' headers and figures' descriptions; without them, no message is removed (the
    outputs' words are not seen, so a removed paragraph waits for the next full extract)."""
    from babel.messages.pofile import read_po

    pot_dir = book.build / "gettext" / "pot"  # myst-nb writes pages to pot_dir/../jupyter_execute
    mode = "cache" if outputs and book.executed.exists() else "off"
    if mode == "cache":
        fill_cache(book)
    _sphinx(book, "gettext", pot_dir, _overrides(book, None, mode), strict=False)
    written = []
    for pot in sorted(pot_dir.rglob("*.pot")):
        po = book.catalogue(pot.relative_to(pot_dir).with_suffix("").as_posix())
        with pot.open("rb") as f:
            catalog = merge(read_po(f), po, drop=mode == "cache")  # prose alone: keep
        write_catalogue(po, catalog)
        written.append(po)
    from babel.messages.catalog import Catalog

    template = Catalog()
    for message in widget_messages():
        template.add(message, auto_comments=["a live widget's label (minitorch_dist.viz)"])
    po = book.catalogue(WIDGETS)
    write_catalogue(po, merge(template, po))
    written.append(po)
    template = Catalog()  # the student edition's README (release --lang)
    for message in readme_messages():
        template.add(message, auto_comments=["the student edition's README (edition_readme)"])
    written.append(po := book.catalogue(README))
    write_catalogue(po, merge(template, po))
    return written


def translated_toc(book: Book = BOOK, language: str = LANGUAGE) -> tuple[Path, str]:
    """``_toc.yml`` with its captions and titles translated, written under ``_build/``, and the
    book's title translated. Sphinx translates what a page says, but the sidebar shows the
    titles ``_toc.yml`` gives ("6. ZeRO: ..."): each is its number and the page's heading, so it
    becomes the number and the heading's translation; captions and the book's title are
    messages of the root page's catalogue (``intro``)."""
    import yaml

    toc = yaml.safe_load((book.root / "_toc.yml").read_text())
    root = translations(toc["root"], book, language)
    config = yaml.safe_load((book.root / "_config.yml").read_text())

    def entry(item: dict) -> dict:
        item = dict(item)
        title = item.get("title")
        if title and "file" in item:
            number, _, heading = re.match(r"((\d+)\.\s+)?(.*)", title).group(1, 2, 3)
            page = translations(item["file"], book, language)
            item["title"] = (number or "") + page.get(heading, heading)
        for key in ("parts", "chapters", "sections"):
            if key in item:
                item[key] = [entry(x) for x in item[key]]
        if "caption" in item:
            item["caption"] = root.get(item["caption"], item["caption"])
        return item

    out = book.build / language / "_toc.yml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(entry(toc), allow_unicode=True, sort_keys=False))
    title = str(config.get("title", ""))
    return out, root.get(title, title)


def build(book: Book = BOOK, language: str = LANGUAGE, *, strict: bool = True) -> Path:
    """Build the translated book into ``_build/html/<language>/`` from the English build's
    executed notebooks; raises if a page would have to execute."""
    if not book.executed.exists():
        raise RuntimeError("build the English book first (python -m minitorch_dist.make book)")
    from jupyter_cache import get_cache

    start = time.monotonic()
    cached = fill_cache(book)
    # myst-nb writes a page's files beside its output folder (<outdir>/../jupyter_execute), so
    # the translation builds in a folder of its own and is then copied into the English site
    out = book.build / language / "html"
    toc, title = translated_toc(book, language)
    overrides = {**_overrides(book, language, "cache"), "external_toc_path": str(toc)}
    if title:
        overrides["html_title"] = title
    code = _sphinx(book, "html", out, overrides, strict=strict)
    if code:
        raise RuntimeError(f"the {language} build failed (exit status {code})")
    executed = len(get_cache(str(book.cache)).list_cache_records()) - cached
    if executed:
        raise RuntimeError(
            f"the {language} build executed {executed} page(s) again: their code "
            "differs from the English build's (build the English book first)"
        )
    site = book.build / "html" / language
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(out, site)
    print(f"{language} book written to {site} in {time.monotonic() - start:.0f} s")
    return site


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["extract"]:
        for po in extract(outputs="--prose-only" not in argv):
            print(po.relative_to(ROOT))
    elif argv[:1] == ["stats"]:
        for page, (done, fuzzy, total) in stats().items():
            print(f"{page:50s} {done:5d}/{total:<5d} translated, {fuzzy} fuzzy")
    elif argv[:1] == ["fill"] and len(argv) == 3:
        written, problems = fill(argv[1], json.loads(Path(argv[2]).read_text()))
        print(f"{written} translations written to {argv[1]}")
        for problem in problems:
            print("  " + problem)
    elif argv[:1] == ["todo"] and len(argv) == 2:  # the page's messages still to translate
        from babel.messages.pofile import read_po

        with BOOK.catalogue(argv[1]).open("rb") as f:
            todo = [m.id for m in read_po(f) if m.id and (not m.string or m.fuzzy)]
        print(json.dumps(todo, ensure_ascii=False, indent=1))
    elif argv[:1] == ["twins"]:
        for path in write_twins():
            print(path.relative_to(ROOT))
    elif argv[:1] == ["build"]:
        build()
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
