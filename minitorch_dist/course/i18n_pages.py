"""The translated book's page links: the language switch on every page, and a translated lab
page's Colab button (the html-page-context side of :mod:`minitorch_dist.course.i18n_book`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The edition's languages: the English source, and each translation's folder under the
#: English site (``_build/html/zh_CN/``) and under ``locales/``.
SOURCE_LANGUAGE = "en"
TRANSLATIONS = {"zh_CN": "中文"}


def switch_target(pagename: str, language: str | None) -> tuple[str, str]:
    """The relative address of ``pagename`` in the other language, and that language's name."""
    depth = pagename.count("/")
    if language in TRANSLATIONS:
        return "../" * (depth + 1) + pagename + ".html", "English"
    code, name = next(iter(TRANSLATIONS.items()))
    return "../" * depth + f"{code}/{pagename}.html", name


def _language_switch(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    if app.builder.format != "html" or doctree is None:
        return
    href, name = switch_target(pagename, app.config.language)
    context["metatags"] = context.get("metatags", "") + (
        f'\n<meta name="mt-lang-switch" content="{href}" data-label="{name}">'
    )


def _colab_twin(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """On a translated lab page, the Colab button opens the lab's twin in that language
    (``labs/zh_CN/labNN_*.ipynb``, :func:`minitorch_dist.course.catalogues.write_twins`)."""
    language = app.config.language
    if language in (None, SOURCE_LANGUAGE) or not pagename.startswith("labs/"):
        return
    name = pagename.split("/", 1)[1]
    if not (Path(app.srcdir) / "labs" / language / f"{name}.ipynb").exists():
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if group.get("label") == "launch-buttons" else []:
            url = button.get("url", "")
            if button.get("text") == "Colab" and url.endswith(f"/labs/{name}.ipynb"):
                button["url"] = url[: -len(f"{name}.ipynb")] + f"{language}/{name}.ipynb"
