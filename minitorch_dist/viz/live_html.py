"""The book's live widgets as HTML, and the page's assets: a script that runs :func:`live_result` in Pyodide.

:func:`live_html` is the element a chapter displays: ``<div data-live="predictor">`` (or
``"planner"``) holding ``<select data-control=...>`` controls (option values are JSON), the
answer for the initial values rendered at build time by :func:`render_live` (what a reader sees
before Python loads, or where scripts cannot run), ``data-state="static"``, ``data-inputs`` and
``data-result``. :func:`write_assets` (run by :mod:`minitorch_dist.book_links` when the book
builds) writes ``live.js`` (:mod:`minitorch_dist.viz.live_js`) and ``minitorch_dist.zip`` (the torch-free
arithmetic layer and this package's live modules, also as the classic script
``minitorch_dist.zip.js``) beside the vendored Pyodide. In the page the script starts Pyodide in
a Web Worker when a widget scrolls into view or is first touched (``data-state``: ``loading``),
from http:// or ``file://`` alike, unpacks the zip in Pyodide's file system, and on every
change steps through :func:`~minitorch_dist.viz.live.live_steps` (:func:`live_result` in parts,
with progress) and calls :func:`render_live` there (``busy``, then ``ready``), writing the
inputs and the result's JSON back on the element.
"""

from __future__ import annotations

import html
import json
import zipfile
from pathlib import Path
from typing import Any

from minitorch_dist.viz.live import _checked, controls, live_result, option_text

__all__ = ["live_html", "live_modules", "render_live", "write_assets"]

PACKAGE = Path(__file__).resolve().parent.parent  # minitorch_dist/
# live_result's own modules, beside the arithmetic layer (viz/__init__ tolerates the missing rest)
LIVE_MODULES = ("viz/__init__.py", "viz/live.py", "viz/live_html.py")
# minitorch_dist.figures.COLORS (which imports matplotlib); a test holds them equal
COLORS = {
    "params": "#1f77b4",
    "grads": "#ff7f0e",
    "optimizer": "#2ca02c",
    "activations": "#d62728",
    "other": "#7f7f7f",
}


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _table(rows: list[dict[str, Any]], exact: bool) -> str:
    out = []
    for r in rows:
        part = r["part"]
        bar = (
            f'<div style="background:{COLORS.get(part, "#444444")};height:0.9em;'
            f'width:{r["width"]}%;min-width:1px"></div>'
        )
        label = "CPU (offloaded)" if part == "cpu" else part
        weight = ' style="font-weight:bold"' if part == "total" else ""
        num = "style='text-align:right;white-space:nowrap'"  # "262.8 GiB" on one line
        cells = f"<td class='live-exact' {num}>{r['exact']}</td>" if exact else ""
        out.append(
            f'<tr data-part="{part}" data-bytes="{r["bytes"]}"{weight}><td>{label}</td>'
            f"{cells}<td {num}>{_esc(r['text'])}</td>"
            f'<td style="width:45%">{bar}</td></tr>'
        )
    return f'<table class="live-table">{"".join(out)}</table>'


def render_live(result: dict[str, Any]) -> str:
    """The HTML a live widget shows for a :func:`live_result` answer (also run in the page)."""
    if "error" in result:
        return f'<p class="live-error" data-error="true">{_esc(result["error"])}</p>'
    if result["kind"] == "predictor":
        fits = str(result["fits"]).lower()
        return (
            _table(result["rows"], exact=True)
            + f'<p data-fits="{fits}">{_esc(result["verdict"])}</p>'
        )
    parts = [f"<h4>{_esc(result['label'])} on {result['gpus']:,} GPUs</h4>"]
    if not result["valid"]:
        parts.append(
            f'<p data-valid="false">not a valid configuration: {_esc(result["reason"])}</p>'
        )
    else:
        mem = result["memory"]["total"]
        verdict = "fits" if result["fits"] else "does NOT fit"
        parts.append(
            f'<p data-valid="true" data-fits="{str(result["fits"]).lower()}">peak on '
            f"stage {result['stage']}: {_esc(result['rows'][-1]['text'])} ({mem:,} B) "
            f"of {_esc(result['capacity'])} -- {verdict}</p>"
        )
        parts.append(_table(result["rows"], exact=False))
        rank = f"{result['rank']:,}" if result["rank"] else "-"
        parts.append(
            f'<p data-rank="{result["rank"]}">{_esc(result["summary"])}; rank {rank} '
            f"of {result['fitting']:,} that fit</p>"
        )
    items = "".join(f"<li>{_esc(r['text'])}</li>" for r in result["top"])
    parts.append(f'<p>the planner\'s top {len(result["top"])}:</p><ol class="ranking">{items}</ol>')
    return "".join(parts)


#: What a live widget says under its controls until Python has started in the page.
STATUS = (
    "Python (Pyodide) starts when this comes into view; until then it shows the answer "
    "computed when the book was built."
)


def live_html(kind: str, **initial: Any) -> str:
    """The live widget ``kind`` as one block of HTML, answered for ``initial`` (control name ->
    value; the others at their defaults) at build time. ValueError for a bad control or value."""
    values = _checked(kind, initial)
    result = live_result(kind, values)
    form = []
    for name, (label, choices, _) in controls(kind).items():
        opts = "".join(
            f'<option value="{_esc(json.dumps(c))}"'
            f"{' selected' if c == values[name] and type(c) is type(values[name]) else ''}>"
            f"{_esc(option_text(c))}</option>"
            for c in choices
        )
        form.append(
            f'<label style="display:inline-block;margin:2px 1em 2px 0">'
            f'<span style="display:inline-block;min-width:9em">{_esc(label)}</span>'
            f'<select data-control="{name}">{opts}</select></label>'
        )
    status = STATUS
    return (
        f'<div class="live-widget" data-live="{kind}" data-state="static" '
        f'data-inputs="{_esc(json.dumps(values))}" data-result="{_esc(json.dumps(result))}">'
        f'<form onsubmit="return false">{"".join(form)}</form>'
        f'<p class="live-status" style="font-size:smaller;color:#666">{status}</p>'
        f'<div class="live-output">{render_live(result)}</div></div>'
    )


def live_modules() -> list[str]:
    """The package files the page's Python imports, relative to ``minitorch_dist/``: the
    torch-free arithmetic layer (:func:`minitorch_dist.arithmetic.arithmetic_files`) and
    :data:`LIVE_MODULES`."""
    from minitorch_dist.arithmetic import arithmetic_files

    files = set(LIVE_MODULES)
    for f in arithmetic_files():
        path = Path(f)
        path = path if path.is_absolute() else PACKAGE / path
        if not path.is_file():
            path = PACKAGE.parent / Path(f)
        files.add(path.resolve().relative_to(PACKAGE).as_posix())
    return sorted(files)


def write_assets(dest: Path) -> list[Path]:
    """Write ``live.js``, ``minitorch_dist.zip`` (the :func:`live_modules`) and the zip as a
    classic script, ``minitorch_dist.zip.js`` (:func:`minitorch_dist.viz.live_data.data_script`: what the
    page reads, from http:// and file:// alike), into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / "minitorch_dist.zip"
    tmp = archive.with_suffix(".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in live_modules():
            info = zipfile.ZipInfo(f"minitorch_dist/{rel}", date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, (PACKAGE / rel).read_bytes(), zipfile.ZIP_DEFLATED)
    tmp.replace(archive)
    from minitorch_dist.viz.live_data import write_data_script
    from minitorch_dist.viz.live_js import LIVE_JS

    data = write_data_script(archive)
    script = dest / "live.js"
    if not script.exists() or script.read_text() != LIVE_JS:
        script.write_text(LIVE_JS)
    return [script, archive, data]
