"""Open every page of the built book in headless Chromium, offline, and list what a reader would
find broken.

    python -m minitorch_dist.browser_check _build/html [--screenshots DIR] [--repo-root .]

The html folder is served on a free local port; every request to another host is aborted and
reported (the book must carry its own scripts). Per page: console and page errors, pictures
with no size or no description (alt text), untypeset math, raw TeX/glue/cite text, Markdown
tables and other markup left as text, the build folder's path, error outputs outside cells tagged
``raises-exception``, stream output split over several boxes, broken internal links and anchors,
Colab buttons that do not open an ``.ipynb`` of the repository, and the live widgets: a page that
holds one is opened again from ``file://`` (every request but ``file:``, ``blob:`` and ``data:``
aborted), where each must start Python and, as two controls change, answer as
``minitorch_dist.viz.live_result`` does here, and once more with JavaScript disabled, where each
must still show its build-time answer (:mod:`minitorch_dist.course.browser_check_live`), each
control labelled and each option shown as Python's own. Every page is opened at a desktop's
1280 px and at a phone's 390 px, and at both it must be no wider than the screen (else the
widest element is named), no table cell may split a number from its unit, and every figure
must open at full size (:mod:`minitorch_dist.course.browser_check_layout`); at the desktop
width every figure's smallest text must be at least 8 pt as shown. The screenshots of the
phone width go to ``DIR/phone/``. Exit 1 with one ``page: what is wrong`` line per failure. Needs ``playwright`` (Python) and Debian's
``/usr/bin/chromium``; ``playwright install`` is never used.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import multiprocessing
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from minitorch_dist.course.browser_check_layout import DESKTOP, PHONE, layout_failures, measure
from minitorch_dist.course.browser_check_live import (
    Live,
    Reference,
    default_live,
    live_failures,
    static_failures,
)
from minitorch_dist.course.browser_check_page import (
    PAGE_JS,
    link_failures,
    page_failures,
    pages,
    path_failures,
    redirect_failures,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHAPTER_1 = "chapters/01_where_the_memory_goes.html"
CHAPTER_12 = "chapters/12_choosing_a_configuration.html"
LAB_1 = "labs/lab01_where_the_memory_goes.html"
LAB_12 = "labs/lab12_choosing_a_configuration.html"
LIVE_PAGES = {CHAPTER_1: "predictor", CHAPTER_12: "planner", LAB_1: "predictor", LAB_12: "planner"}
# (the pages that must hold a live widget)
LOCAL_SCHEMES = ("file:", "blob:", "data:")
LIVE_JS = "/_static/live/live.js"  # the live widgets' script: stubbed in the http run
JS = "text/javascript"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass


@contextmanager
def serve(html_dir: Path) -> Iterator[str]:
    """Serve ``html_dir`` on a free local port in a thread; yield its origin, then shut it down."""
    handler = functools.partial(_Quiet, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="browser_check-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Debian Chromium driven by playwright (ImportError where playwright is missing)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"{CHROMIUM} is missing: sudo apt-get install chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def check_page(
    browser,
    origin: str,
    html_dir: Path,
    page_path: str,
    repo_root: Path,
    screenshots: Path | None,
    live: Live | Reference | None,
) -> list[str]:
    """Every failure on one page (without the page name)."""

    fails: list[str] = []
    local = urlsplit(origin).netloc
    external: list[str] = []

    def route(r) -> None:
        if urlsplit(r.request.url).path.endswith(LIVE_JS):  # driven from file:// instead
            r.fulfill(body="/* the live widgets are driven from file:// */", content_type=JS)
        elif urlsplit(r.request.url).netloc == local:
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    for view in (DESKTOP, PHONE):  # every check at the desktop width; the layout's at both
        desktop, width = view is DESKTOP, view["width"]
        page = browser.new_page(viewport=view)
        try:
            page.route("**/*", route)
            if desktop:
                page.on("pageerror", lambda e, out=fails: out.append(f"page error: {e}"))
                page.on("console", lambda m, out=fails: _console(m, out, local))
            page.goto(f"{origin}/{page_path}", wait_until="load", timeout=30_000)
            page.evaluate(
                """async () => { const p = window.MathJax?.startup?.promise;
                if (p) await Promise.race([p, new Promise(r => setTimeout(r, 15000))]); }"""
            )
            if desktop:
                fails += _content_failures(
                    page, browser, origin, html_dir, page_path, repo_root, live
                )
            found = measure(page, width)
            fails += layout_failures(found, f"at {width} px", figures=desktop, html_dir=html_dir)
            if screenshots is not None:
                folder = screenshots if desktop else screenshots / "phone"
                fails += _screenshot(page, folder / Path(page_path).with_suffix(".png"))
        finally:
            page.close()
    fails += [f"requested {u} while offline" for u in dict.fromkeys(external)]
    return fails


def _content_failures(
    page, browser, origin: str, html_dir: Path, page_path: str, repo_root: Path, live
) -> list[str]:
    """What a page holds (``PAGE_JS``), its links, paths and live widgets."""
    found = page.evaluate(PAGE_JS)
    fails = page_failures(found)
    fails += link_failures(found["links"], origin, html_dir, page_path, repo_root)
    fails += path_failures(html_dir, page_path, repo_root)
    if any(found["live"].values()) or page.locator("[data-live]").count():
        fails += file_failures(browser, html_dir, page_path, live)
    kind = LIVE_PAGES.get(page_path)
    if kind and not found["live"].get(kind):
        fails.append(f'no [data-live="{kind}"]: the {kind} is dead without a kernel')
    return fails


def _screenshot(page, shot: Path) -> list[str]:
    from playwright.sync_api import Error

    shot.parent.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):  # a very tall page can fail once under memory pressure
        try:
            page.screenshot(path=str(shot), full_page=True)
            return []
        except Error as e:
            if attempt == 2:
                return [f"no screenshot: {str(e).splitlines()[0]}"]
    return []


def _console(msg, fails: list[str], local: str | None = None) -> None:
    """A console error of the page (over http from ``local``, else from file://)."""
    where = msg.location.get("url", "") if isinstance(msg.location, dict) else ""
    if local is not None:
        if msg.type == "error" and not (where and urlsplit(where).netloc != local):
            fails.append(f"console error: {msg.text[:200]}")
    elif msg.type == "error" and not (where and not where.startswith(LOCAL_SCHEMES)):
        fails.append(f"console error from file://: {msg.text[:200]}")


def file_failures(
    browser, html_dir: Path, page_path: str, live: Live | Reference | None
) -> list[str]:
    """The live widgets of a page opened from ``file://`` with the network blocked (driven as
    :func:`~minitorch_dist.course.browser_check_live.live_failures` says), then with JavaScript
    disabled (:func:`~minitorch_dist.course.browser_check_live.static_failures`)."""
    url = (html_dir / page_path).as_uri()
    fails: list[str] = []
    external: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(LOCAL_SCHEMES):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    for scripts in (True, False):
        context = browser.new_context(java_script_enabled=scripts)
        try:
            page = context.new_page()
            page.route("**/*", route)
            page.on("pageerror", lambda e, out=fails: out.append(f"page error from file://: {e}"))
            page.on("console", lambda m, out=fails: _console(m, out))
            page.goto(url, wait_until="load", timeout=30_000)
            fails += live_failures(page, live) if scripts else static_failures(page, live)
        finally:
            context.close()
    return fails + [f"requested {u} from file://" for u in dict.fromkeys(external)]


def check_site(
    html_dir: Path | str,
    repo_root: Path | str = ".",
    screenshots: Path | str | None = None,
    browser=None,
    live: Live | Reference | None | str = "module",
    only: list[str] | None = None,
) -> list[tuple[str, str]]:
    """(page, failure) for every failure on every page of ``html_dir`` (or on the pages ``only``)."""
    html_dir, repo_root = Path(html_dir).resolve(), Path(repo_root).resolve()
    shots = None if screenshots is None else Path(screenshots)
    if live == "module":
        live = default_live()
    if browser is None:
        with chromium() as own:
            return check_site(html_dir, repo_root, shots, own, live, only)
    from playwright.sync_api import Error

    out = []
    with serve(html_dir) as origin:
        for page_path in pages(html_dir) if only is None else only:
            fails = redirect_failures(html_dir, page_path)
            try:
                if fails is None:
                    fails = check_page(browser, origin, html_dir, page_path, repo_root, shots, live)
            except Error as e:
                fails = [f"could not be checked: {str(e).splitlines()[0]}"]
            out += [(page_path, fail) for fail in fails]
    return out


def check_parallel(
    html_dir: Path, repo_root: Path, screenshots: Path | None, jobs: int
) -> list[tuple[str, str]]:
    """``check_site`` with the pages dealt over ``jobs`` processes, one browser each."""
    every = pages(html_dir)
    if jobs <= 1:
        return check_site(html_dir, repo_root, screenshots)
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = [
            pool.submit(
                check_site, html_dir, repo_root, screenshots, None, "module", every[k::jobs]
            )
            for k in range(jobs)
        ]
        fails = [f for part in parts for f in part.result()]
    order = {page: i for i, page in enumerate(every)}
    return sorted(fails, key=lambda f: order[f[0]])  # stable: a page's failures keep their order


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    ap.add_argument("--screenshots", type=Path, help="write a full-page PNG of every page here")
    ap.add_argument("--repo-root", type=Path, default=Path("."), help="where the .ipynb files are")
    ap.add_argument("--jobs", type=int, default=2, help="browsers checking pages side by side")
    args = ap.parse_args(argv)
    if not (args.html / "index.html").is_file() and not pages(args.html):
        print(f"{args.html}: no built pages", file=sys.stderr)
        return 2
    start = time.monotonic()
    fails = check_parallel(args.html, args.repo_root, args.screenshots, args.jobs)
    n = len(pages(args.html))
    for page_path, fail in fails:
        print(f"{page_path}: {fail}")
    took = time.monotonic() - start
    if fails:
        print(f"browser check: {len(fails)} failures on {n} pages ({took:.0f} s)", file=sys.stderr)
        return 1
    print(f"browser check: {n} pages, no failures ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
