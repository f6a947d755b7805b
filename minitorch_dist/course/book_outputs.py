"""Cell outputs as the published book shows them: figures described, no build machine's folders.

- **Alt text**: a figure of the package (:class:`~minitorch_dist.figures.BookFigure`) carries a
  one-sentence description in its PNG's ``Description`` text chunk; myst-nb names the image by
  its hash and Sphinx would use that file name as the alt text. Every image without an alt gets
  the description of its file.
- **No build folder**: tracebacks and warnings print absolute paths (``File /home/me/book/
  minitorch_dist/tensor_parallel/cost.py:80``, or IPython's ``~/book/...``); in every output they
  become relative to the repository, whatever folder the book is built in, and the folders
  before ``site-packages/`` (``dist-packages/``) are dropped.

    sphinx: extra_extensions: [minitorch_dist.course.book_outputs]      # _config.yml
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_SITE_PACKAGES = re.compile(r"(?:~|/)[^\s\"'():,]*/((?:site|dist)-packages/)")


def png_description(path: Path | str) -> str:
    """The ``Description`` text chunk of a PNG file ("" for none, or for another format)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return str(getattr(image, "text", {}).get("Description", "")).strip()
    except (OSError, ValueError):
        return ""


def path_forms(roots: Iterable[Path | str], home: Path | str | None = None) -> list[str]:
    """Every way an output may spell the folders ``roots``: as given, resolved, and under ``~``
    when inside ``home`` (IPython shortens tracebacks so); longest first."""
    home = Path(home if home is not None else os.path.expanduser("~"))
    forms: set[str] = set()
    for root in roots:
        for path in {Path(root).absolute(), Path(root).resolve()}:
            if len(path.parts) < 2:  # never the file system's root
                continue
            forms.add(str(path))
            for h in {home.absolute(), home.resolve()}:
                if len(h.parts) > 1 and path.is_relative_to(h) and path != h:
                    forms.add("~/" + path.relative_to(h).as_posix())
    return sorted(forms, key=len, reverse=True)


def relative_paths(text: str, forms: list[str]) -> str:
    """``text`` with each folder of ``forms`` (see :func:`path_forms`) left out of the paths
    under it (``<root>/a/b.py`` -> ``a/b.py``, ``<root>`` alone -> ``.``), and everything
    before ``site-packages/`` dropped."""
    for form in forms:
        text = re.sub(re.escape(form) + r"(?:/|(?![\w.-]))", _to_relative, text)
    return _SITE_PACKAGES.sub(r"\1", text)


def _to_relative(m: re.Match) -> str:
    return "" if m.group(0).endswith("/") else "."


def _image_file(app: Any, docname: str, uri: str) -> Path | None:
    src = Path(app.srcdir)
    if uri.startswith("/"):
        candidates = [src / uri.lstrip("/")]
    else:
        candidates = [(src / docname).parent / uri, src / uri]
    for path in candidates:
        if path.is_file():
            return path
    return None


def describe_images(app: Any, doctree: Any) -> None:
    """Alt text for every image without one, from its PNG's description."""
    from docutils import nodes

    docname = app.env.docname
    for node in doctree.findall(nodes.image):
        uri = node.get("uri", "")
        if node.get("alt") or "://" in uri or not uri.endswith(".png"):
            continue
        path = _image_file(app, docname, uri)
        text = png_description(path) if path is not None else ""
        if text:
            node["alt"] = text


def relative_output_paths(app: Any, doctree: Any) -> None:
    """Paths relative to the repository in every cell output (tracebacks, warnings, prints)."""
    from docutils import nodes

    forms = path_forms({Path(app.srcdir), ROOT})
    for node in list(doctree.findall(nodes.literal_block)):
        if "output" not in node.get("classes", []):
            continue
        text = node.astext()
        new = relative_paths(text, forms)
        if new != text:
            node.clear()
            node += nodes.Text(new)
            node.rawsource = new


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("doctree-read", describe_images)
    app.connect("doctree-read", relative_output_paths)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
