"""What the browser check looks at inside one page, and the checks that need only the files.

``PAGE_JS`` runs in the loaded page and returns what it finds (error outputs, split stream boxes,
zero-size pictures, pictures' alt texts, untypeset math, raw markup in the visible text, every
link). ``page_failures`` turns that into failure messages; ``link_failures`` resolves each internal
link and anchor against the html folder, and each Colab button against the repository;
``path_failures`` reads the page's file for the build folder's path.
"""

from __future__ import annotations

import re
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from minitorch_dist.course.i18n_pages import CJK

SKIP_PAGES = {"genindex.html", "search.html", "py-modindex.html"}
SKIP_DIRS = {"_static", "_sources", "_downloads", "_images", "_sphinx_design_static"}
RAW_TEX = ("$$", "\\(", "\\begin{")
RAW_MARKUP = ("{glue:", "{glue}", "{cite", "{numref", ":::", "```")
# Markup a parser left as text, by pattern: a Markdown table's delimiter row (smart quotes turn
# its --- into em dashes), **bold**, and any other {role}`...`.
RAW_PATTERNS = {
    "a Markdown table as text": re.compile(r"(?:\|\s*:?(?:-{3,}|[—–]-*):?\s*){2,}\|"),
    "raw bold '**'": re.compile(r"\*\*[^\s*][^*]{0,200}?\*\*"),
    "a raw role": re.compile(r"\{(?!glue|cite|numref)[a-z][\w:+-]*\}`"),
}
IMAGE_FILE = re.compile(r"\.(?:png|jpe?g|gif|svg|webp)$|^[0-9a-f]{16,}", re.I)
REFRESH = re.compile(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.I)
COLAB = re.compile(r"https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/(.+)$")

PAGE_JS = r"""
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const shown = el => !el.checkVisibility || el.checkVisibility();
  const out = {errors: [], split: [], empty: [], untypeset: 0, math: 0, rawMath: '', text: '',
               images: [], links: [], live: Object.fromEntries(['predictor', 'planner'].map(
                 k => [k, document.querySelectorAll(`[data-live="${k}"]`).length]))};
  const cells = [...document.querySelectorAll('.cell')];
  cells.forEach((cell, i) => {
    const n = i + 1;
    if (!cell.classList.contains('tag_raises-exception')) {
      for (const o of cell.querySelectorAll('.output.traceback, .output.error'))
        out.errors.push(`cell ${n}: error output ${JSON.stringify(o.innerText.trim().slice(0, 80))}`);
    }
    for (const area of cell.querySelectorAll('.cell_output')) {
      const kinds = [...area.children].map(k => !k.classList.contains('output') ? ''
        : k.classList.contains('stream') ? 'stdout' : k.classList.contains('stderr') ? 'stderr' : '');
      for (let j = 0, e; j < kinds.length; j = e + 1) {
        for (e = j; e + 1 < kinds.length && kinds[e + 1] === kinds[j];) e += 1;
        if (kinds[j] && e > j)
          out.split.push(`cell ${n}: ${e - j + 1} ${kinds[j]} output boxes (one expected)`);
      }
    }
  });
  for (const el of article.querySelectorAll('img, figure, svg')) {
    if (el.tagName.toLowerCase() === 'svg' && el.closest('button, a, .headerlink, svg svg'))
      continue;
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    const broken = el.tagName === 'IMG' && (!el.complete || el.naturalWidth === 0);
    if (r.width <= 0 || r.height <= 0 || broken) {
      const what = el.getAttribute('src') || el.getAttribute('alt') || el.id || el.className;
      out.empty.push(`${el.tagName.toLowerCase()} ${String(what).slice(0, 80)} ` +
        (broken ? 'did not load' : `is ${r.width}x${r.height} px`));
    }
  }
  for (const img of article.querySelectorAll('img')) {
    if (img.getAttribute('role') !== 'presentation' && !img.closest('[aria-hidden="true"]'))
      out.images.push({src: img.getAttribute('src') || '', alt: img.getAttribute('alt')});
  }
  for (const m of article.querySelectorAll('.math')) {
    out.math += 1;
    if (!m.querySelector('mjx-container') && !m.closest('mjx-container')) {
      out.untypeset += 1;
      if (!out.rawMath) out.rawMath = m.textContent.trim().slice(0, 60);
    }
  }
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  const parts = [];
  const skip = 'pre, code, script, style, textarea, mjx-container, .math, .highlight';
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const p = t.parentElement;
    if (p && !p.closest(skip) && shown(p)) parts.push(t.data);
  }
  out.text = parts.join(' ');
  out.links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  return out;
}
"""


def pages(html_dir: Path) -> list[str]:
    """Every page of the book, as paths relative to ``html_dir`` (index pages and assets left out)."""
    found = []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir)
        # a translation's own folder (zh_CN/) has the same asset folders and index pages
        if SKIP_DIRS.intersection(rel.parts[:-1]) or rel.name in SKIP_PAGES:
            continue
        found.append(rel.as_posix())
    return found


def redirect_failures(html_dir: Path, page: str) -> list[str] | None:
    """For a redirect-only page (``<meta http-equiv="Refresh">``): is its target there? Else None."""
    text = (html_dir / page).read_text(encoding="utf-8", errors="replace")
    m = REFRESH.search(text[:2000])
    if not m:
        return None
    target = (html_dir / page).parent / unquote(urlsplit(m.group(1)).path)
    return [] if target.is_file() else [f"redirects to missing {m.group(1)}"]


def page_failures(found: dict) -> list[str]:
    """Failure messages for what ``PAGE_JS`` found on one page."""
    fails = [*found["errors"], *found["split"]]
    fails += [f"{e} (a picture must have a size)" for e in found["empty"]]
    if found["untypeset"]:
        fails.append(
            f"{found['untypeset']} of {found['math']} math elements not typeset by MathJax "
            f"(first: {found['rawMath']!r})"
        )
    text = found["text"]
    for needle in (*RAW_TEX, *RAW_MARKUP):
        i = text.find(needle)
        if i >= 0:
            snippet = " ".join(text[max(0, i - 30) : i + 40].split())
            kind = "TeX" if needle in RAW_TEX else "markup"
            fails.append(f"raw {kind} {needle!r} in the visible text: ...{snippet}...")
    for what, pattern in RAW_PATTERNS.items():
        found_all = list(pattern.finditer(text))
        if found_all:
            m, n = found_all[0], len(found_all)
            snippet = " ".join(text[max(0, m.start() - 30) : m.end() + 30].split())
            times = f" ({n} times, first: " if n > 1 else " ("
            fails.append(f"{what} in the visible text{times}...{snippet}...)")
    fails += image_failures(found.get("images", []))
    return fails


def undescribed(alt: str | None, src: str = "") -> bool:
    """Is ``alt`` no description: missing, empty, one word, a file name or a hash? (Chinese
    writes no spaces between words: its characters count, four of them as words.)"""
    alt = (alt or "").strip()
    name = src.rsplit("/", 1)[-1]
    words = len(alt.split()) + len(CJK.findall(alt)) // 4
    return words < 2 or bool(IMAGE_FILE.search(alt)) or (bool(name) and name in alt)


def image_failures(images: list[dict]) -> list[str]:
    """One failure per picture whose alt text does not describe it."""
    fails = []
    for img in images:
        if undescribed(img.get("alt"), img.get("src", "")):
            src = img.get("src", "")
            fails.append(
                f"img {src[-60:]} has no description (alt {img.get('alt')!r}): a figure says "
                "what it shows (BookFigure.description, or titles and axis labels)"
            )
    return fails


def path_failures(html_dir: Path, page: str, repo_root: Path) -> list[str]:
    """The build folder's path (``repo_root``, as given, resolved or under ``~``) in the page."""
    from minitorch_dist.course.book_outputs import path_forms

    text = (html_dir / page).read_text(encoding="utf-8", errors="replace")
    for form in path_forms([repo_root]):
        i = text.find(form)
        if i >= 0:
            snippet = " ".join(text[i : i + len(form) + 50].split())
            return [f"shows the build folder's path {form}: {snippet}..."]
    return []


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key == "id" or (tag == "a" and key == "name"):
                self.ids.add(value or "")


@cache
def _ids_in(path: Path) -> frozenset[str]:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def link_failures(
    links: list[str], origin: str, html_dir: Path, page: str, repo_root: Path
) -> list[str]:
    """Broken internal links or anchors, and Colab buttons that do not open an existing .ipynb."""
    fails: list[str] = []
    seen: set[str] = set()
    for href in links:
        if href in seen:
            continue
        seen.add(href)
        colab = COLAB.match(href)
        if colab:
            path = unquote(colab.group(1))
            if not path.endswith(".ipynb"):
                fails.append(f"Colab button opens {path}, not a notebook (.ipynb)")
            elif not (repo_root / path).is_file():
                fails.append(f"Colab button opens {path}, which is not in the repository")
            continue
        if not href.startswith(origin + "/"):
            continue
        parts = urlsplit(href)
        target = html_dir / unquote(parts.path).lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            fails.append(f"link to missing file {unquote(parts.path).lstrip('/')}")
            continue
        anchor = unquote(parts.fragment)
        if anchor and target.suffix == ".html" and anchor not in _ids_in(target):
            rel = target.relative_to(html_dir).as_posix()
            where = "" if rel == page else f" in {rel}"
            fails.append(f"link to missing anchor #{anchor}{where}")
    return fails
