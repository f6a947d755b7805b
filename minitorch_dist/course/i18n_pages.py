"""What a translated page shows beyond its catalogue (for :mod:`minitorch_dist.course.i18n_book`):
the language switch on every page, a translated lab page's Colab button, and the devices that
glued values name ("measured on one NVIDIA H100", :func:`minitorch_dist.course.results.device_of`),
in the page's language.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: The edition's languages: the English source, and each translation's folder under the
#: English site (``_build/html/zh_CN/``) and under ``locales/``.
SOURCE_LANGUAGE = "en"
TRANSLATIONS = {"zh_CN": "中文"}
CJK = re.compile(r"[\u4e00-\u9fff]")  # a Chinese character (zh_CN's text: no spaces between words)


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


#: A device as :func:`minitorch_dist.course.results.device_of` names it, and its words in each
#: translation (a glued value is what ran, but these are words of the sentence it sits in).
DEVICE_PHRASES = {
    "zh_CN": [
        (re.compile(r"one (NVIDIA .+)"), r"一块 \1"),
        (re.compile(r"a (\d+)-core CPU without a GPU"), r"一台没有 GPU 的 \1 核 CPU 机器"),
        (re.compile(r"one (\d+)-core CPU"), r"一台 \1 核 CPU 机器"),
    ]
}


def translate_device(text: str, language: str) -> str:
    """``text`` in ``language`` where it is a device's name (``"one NVIDIA H100"``), else as is."""
    for pattern, words in DEVICE_PHRASES.get(language, []):
        if pattern.fullmatch(text):
            return pattern.sub(words, text)
    return text


def translate_glued_devices(app: Any, doctree: Any, docname: str = "") -> None:
    """On a translated page, a glued value that names a device reads in the page's language
    (at ``doctree-resolved``: a translated paragraph's glue roles are resolved late)."""
    from docutils import nodes

    language = app.config.language
    if language in (None, SOURCE_LANGUAGE) or app.builder.name == "gettext":
        return
    for node in list(doctree.findall(nodes.inline)):
        if "pasted-text" in node.get("classes", []):
            words = translate_device(node.astext(), language)
            if words != node.astext():
                node.children = [nodes.Text(words)]
