"""The book's files as classic scripts, for pages opened from ``file://``.

A page opened from ``file://`` (a book read by double-clicking ``index.html``) may run a classic
``<script src>``, but Chromium refuses it ``fetch()``, ES-module imports and module workers. So
the files the live widgets' Python needs (Pyodide's, vendored by :mod:`minitorch_dist.vendor`,
and ``minitorch_dist.zip``, written by :func:`minitorch_dist.viz.live_html.write_assets`) are
written as ``<name>.js`` scripts that file their contents under ``self.minitorchLiveFiles``,
which the page's script (:mod:`minitorch_dist.viz.live_js`) reads, from http:// and ``file://``
alike. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

__all__ = ["data_script", "write_data_script"]


def data_script(name: str, data: bytes) -> str:
    """A classic script that files ``data`` under ``name`` in ``self.minitorchLiveFiles``:
    ``{"text": ...}`` for .js, .mjs and .json files (UTF-8), else ``{"base64": ...}``, with the
    bytes' ``sha256`` (hex) and ``size``. The live widgets' script (:mod:`minitorch_dist.viz.live_js`)
    reads them, so the same code runs from http:// and from file://."""
    entry: dict[str, object] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    if name.endswith((".js", ".mjs", ".json")):
        entry["text"] = data.decode("utf-8")
    else:
        entry["base64"] = base64.b64encode(data).decode("ascii")
    body = json.dumps(entry, ensure_ascii=True, separators=(",", ":"))
    return (
        "(self.minitorchLiveFiles = self.minitorchLiveFiles || {})"
        f"[{json.dumps(name)}] = {body};\n"
    )


def write_data_script(path: Path, name: str | None = None) -> Path:
    """Write :func:`data_script` of the file ``path`` as ``<path>.js`` (atomically)."""
    out = path.with_name(path.name + ".js")
    tmp = out.with_suffix(".part")
    tmp.write_text(data_script(name or path.name, path.read_bytes()), encoding="ascii")
    tmp.replace(out)
    return out
