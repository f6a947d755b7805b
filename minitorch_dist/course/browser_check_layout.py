"""The browser check's look at a page's layout, at the desktop width and at a phone's.

``LAYOUT_JS`` runs in the loaded page (its argument: the viewport's width) and returns what it
measures; :func:`layout_failures` turns that into failure messages:

- the page is wider than the viewport (``document.documentElement.scrollWidth``), named by the
  widest element (or element's text) that sticks out of its parent past the screen's edge,
  outside any box that scrolls or clips on its own (the long inline path, the wide output or
  table to fix);
- a table cell holding a number and its unit ("262.8 GiB", "3,381 of 11,593") whose text is
  broken over several lines (counted from ``Range.getClientRects``);
- a figure (a picture in a figure or a cell's output) that cannot be opened at full size: it
  is not inside a link to its own file;
- a PNG figure whose smallest text, as the page shows it, is under :data:`MIN_FIGURE_PT`
  points: the PNG records its smallest text in pixels (``MinFontPx``, written by
  :class:`~minitorch_dist.figures.BookFigure`), the page scales it by the picture's displayed
  over its natural width, and a CSS point is 4/3 of a CSS pixel (:func:`font_failures`); a PNG
  that records no size fails too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}  # a phone held upright, in CSS pixels
MIN_FIGURE_PX = 200  # narrower pictures (icons, badges) need no full-size view
MIN_FIGURE_PT = 8  # the smallest text of a figure, in points as the page shows it

LAYOUT_JS = r"""
(vw) => {
  const doc = document.documentElement;
  const article = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const shown = el => !el.checkVisibility || el.checkVisibility();
  const out = {width: doc.scrollWidth, viewport: vw, widest: null, split: [], unlinked: [],
    figures: []};
  const describe = el => {
    const cls = [...el.classList].slice(0, 2).map(c => '.' + c).join('');
    const text = (el.textContent || el.getAttribute('src') || '').trim().replace(/\s+/g, ' ');
    return `<${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${cls}> ` +
      JSON.stringify(text.length > 60 ? text.slice(0, 57) + '...' : text);
  };
  const contained = el => {  // inside a box that scrolls or clips its own overflow
    for (let a = el.parentElement; a && a !== document.body && a !== doc; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX !== 'visible' || s.position === 'fixed') return true;
    }
    return false;
  };
  if (doc.scrollWidth > vw) {
    // the culprit: what sticks out of its own parent past the screen's edge (an element, or an
    // element's text), the widest such; else what reaches furthest right
    let best = null, far = null;
    const consider = (el, r, parent) => {
      if (r.right <= vw + 0.5 || r.width === 0 || r.height === 0) return;
      const s = getComputedStyle(el);
      if (s.position === 'fixed' || s.visibility === 'hidden' || contained(el)) return;
      if (!far || r.right > far.right + 0.5) far = {el, right: r.right};
      if (parent && r.right <= parent.getBoundingClientRect().right + 0.5) return;
      if (!best || r.width > best.width + 0.5 ||
          (Math.abs(r.width - best.width) <= 0.5 && best.el.contains(el)))
        best = {el, width: r.width, right: r.right};
    };
    for (const el of document.body.querySelectorAll('*'))
      consider(el, el.getBoundingClientRect(), el.parentElement);
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      if (!t.data.trim() || !t.parentElement) continue;
      range.selectNodeContents(t);
      consider(t.parentElement, range.getBoundingClientRect(), t.parentElement);
    }
    const pick = best || far;
    if (pick) out.widest = {what: describe(pick.el), right: Math.round(pick.right)};
  }
  const number = /^[-+\u2212~\u2248]?\d[\d.,]*(?:\s*\S+|\s+of\s+[\d.,]+)$/;
  for (const cell of article.querySelectorAll('td, th')) {
    const text = cell.textContent.trim().replace(/\s+/g, ' ');
    if (!number.test(text) || !shown(cell)) continue;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const tops = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0)
      .map(r => r.top).sort((a, b) => a - b);
    const half = parseFloat(getComputedStyle(cell).fontSize) / 2 || 6;
    let lines = tops.length ? 1 : 0;
    for (let i = 1; i < tops.length; i++) if (tops[i] - tops[i - 1] > half) lines += 1;
    if (lines > 1) out.split.push({text, lines});
  }
  for (const img of article.querySelectorAll('figure img, .cell_output img')) {
    if (!shown(img) || img.closest('[data-live], .widget-subarea, [aria-hidden="true"]')) continue;
    if (img.naturalWidth < __MIN__) continue;
    const link = img.closest('a[href]');
    const file = u => decodeURI(new URL(u, location.href).pathname);
    out.figures.push({file: new URL(img.currentSrc || img.src, location.href).pathname,
      src: img.getAttribute('src') || '', shown: img.getBoundingClientRect().width,
      natural: img.naturalWidth});
    if (!link || file(link.href) !== file(img.currentSrc || img.src))
      out.unlinked.push(img.getAttribute('src') || '');
  }
  return out;
}
""".replace("__MIN__", str(MIN_FIGURE_PX))


def layout_failures(
    found: dict[str, Any], where: str = "", figures: bool = True, html_dir: Path | None = None
) -> list[str]:
    """Failure messages for what ``LAYOUT_JS`` found; ``where`` names the width ("at 390 px");
    ``figures=False`` leaves out the figures' links and text sizes (checked at one width only),
    which are checked only with ``html_dir``, where the pictures are (:func:`font_failures`)."""
    at = f" {where}" if where else ""
    fails = []
    if found["width"] > found["viewport"]:
        widest = found.get("widest")
        culprit = (
            f"; widest: {widest['what']} reaching {widest['right']} px"
            if widest
            else "; no single element reaches that far"
        )
        fails.append(
            f"the page is {found['width']} px wide{at}, wider than the "
            f"{found['viewport']} px screen{culprit}"
        )
    split = found.get("split", [])
    if split:
        first = split[0]
        more = f" ({len(split)} cells, first: " if len(split) > 1 else " ("
        fails.append(
            f"a number is split from its unit in a table cell{at}{more}"
            f"{first['text']!r} on {first['lines']} lines)"
        )
    unlinked = found.get("unlinked", []) if figures else []
    if unlinked:
        more = f" ({len(unlinked)} figures, first: " if len(unlinked) > 1 else " ("
        fails.append(
            f"a figure cannot be opened at full size: not inside a link to its own file"
            f"{more}{unlinked[0][-60:]})"
        )
    if figures and html_dir is not None:
        fails += font_failures(found, html_dir)
    return fails


def png_text(path: Path) -> dict[str, str]:
    """The text chunks of a PNG file ({} for none, or for another format)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return {str(k): str(v) for k, v in getattr(image, "text", {}).items()}
    except (OSError, ValueError):
        return {}


def font_failures(found: dict[str, Any], html_dir: Path | str) -> list[str]:
    """A message for each PNG figure ``LAYOUT_JS`` found whose smallest text is shown under
    :data:`MIN_FIGURE_PT` points, or whose PNG records no text size (``MinFontPx``)."""
    fails = []
    for fig in found.get("figures", []):
        path = Path(html_dir) / unquote(fig["file"]).lstrip("/")
        if path.suffix.lower() != ".png" or not fig["natural"]:
            continue
        name = fig["src"][-60:]
        px = png_text(path).get("MinFontPx")
        if px is None:
            fails.append(
                f"figure {name} records no text size (draw it with minitorch_dist.figures."
                "BookFigure, whose PNG says its smallest text)"
            )
            continue
        pt = float(px) * fig["shown"] / fig["natural"] * 0.75  # CSS: 1 pt = 4/3 px
        if pt < MIN_FIGURE_PT - 0.05:
            fails.append(
                f"figure {name}: its smallest text is {pt:.1f} pt as shown "
                f"({fig['natural']} px wide, shown at {fig['shown']:.0f} px), "
                f"under {MIN_FIGURE_PT} pt: larger text, or a narrower figure"
            )
    return fails


def measure(page, width: int) -> dict[str, Any]:
    """``LAYOUT_JS`` in a loaded playwright page whose viewport is ``width`` px wide."""
    return page.evaluate(LAYOUT_JS, width)
