"""How fast the book's live widgets answer in headless Chromium, from ``file://``, offline (issue 33).

    python benchmarks/live_widgets.py _build/html [--repeat 3] [--out benchmarks/results/cpu-2core_live_widgets.json]

Opens chapter 1 and chapter 12 of the built book from ``file://`` (as a reader who double-clicks
``index.html``), every request but ``file:``, ``blob:`` and ``data:`` aborted, and measures with
the page's own clock: the seconds from the widget's scrolling into view (its first interaction) to
``data-state="ready"`` (Pyodide started from the book's files, the arithmetic imported, the first
answer shown; chapter 12's first answer ranks the chapter's example problem, in parts, with its
progress shown), of which ``python_start_s`` is Pyodide's own start; then the seconds one change
of a control takes (the predictor's ZeRO stage; the planner's tp, same problem, and its GPUs, a
new ranking). While the planner ranks, a timer ticks every 50 ms in the page:
``planner_longest_blocked_while_ranking_s`` is the longest the page went without one while
Python ranked (how long a click waits at most), ``planner_longest_blocked_s`` the same from the
first interaction on (Pyodide's start runs on the page's thread too), and
``planner_progress_messages`` how many progress lines the reader saw. Last, the ranking of
chapter 12's example alone, in Python: in the page's Pyodide and in this CPython. Each page is
opened in a fresh browser context, so nothing is cached between the two. With ``--repeat n``
each figure is the median of n runs (a fresh browser each). The one-minute load average is read
before and after (other work on the machine slows every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from minitorch_dist.course.browser_check import CHAPTER_1, CHAPTER_12, LOCAL_SCHEMES, chromium

READY_MS = 180_000
EXAMPLE = ("llama-3-70b", "dgx-h100", 1024, 1024, 4096)  # chapter 12's problem (GPUS, BATCH, SEQ)
WATCH_JS = """el => {  // a 50 ms timer and the status lines, kept on window.__watch
  const w = window.__watch = {last: performance.now(), longest: 0, ranking: 0, lines: new Set(),
                              was: ''};
  const status = el.querySelector('.live-status');
  w.timer = setInterval(() => {
    const now = performance.now(), text = status ? status.textContent : '';
    w.longest = Math.max(w.longest, now - w.last);  // while Python starts, too
    if (w.was.includes('configurations scored')) w.ranking = Math.max(w.ranking, now - w.last);
    w.last = now;
    w.was = text;
    w.lines.add(text);
  }, 50);
}"""
RANK_PY = """
import time
from minitorch_dist.viz import live
live._plans.clear()
t0 = time.perf_counter()
live._plan(*{problem!r})
time.perf_counter() - t0
"""


def _ready_after(page, box, action) -> float:
    start = time.monotonic()
    before = box.get_attribute("data-inputs")
    action()
    page.wait_for_function(
        "([el, before]) => el.dataset.state === 'ready' && el.dataset.inputs !== before",
        arg=[box.element_handle(), before],
        timeout=READY_MS,
    )
    return time.monotonic() - start


def _watched(page) -> dict[str, float]:
    """The longest gaps between timer ticks (seconds): while ranking and overall (Python's start
    included); and how many progress lines were seen."""
    got = page.evaluate(
        "() => { const w = window.__watch; clearInterval(w.timer); return [w.ranking, w.longest,"
        " [...w.lines].filter(t => t.includes('configurations scored')).length]; }"
    )
    return {
        "planner_longest_blocked_while_ranking_s": round(got[0] / 1000, 2),
        "planner_longest_blocked_s": round(got[1] / 1000, 2),
        "planner_progress_messages": got[2],
    }


def measure(html: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    with chromium() as browser:
        for path, kind, changes in (
            (CHAPTER_1, "predictor", (("zero_stage", "3"),)),
            (CHAPTER_12, "planner", (("tp", "4"), ("gpus", "512"))),
        ):
            context = browser.new_context()
            page = context.new_page()
            page.route(
                "**/*",
                lambda r: r.continue_() if r.request.url.startswith(LOCAL_SCHEMES) else r.abort(),
            )
            page.goto((html.resolve() / path).as_uri(), wait_until="load")
            box = page.locator(f'[data-live="{kind}"]').first
            page.evaluate(WATCH_JS, box.element_handle())
            start = time.monotonic()
            box.scroll_into_view_if_needed()
            page.wait_for_function(
                "el => el.dataset.state === 'ready'", arg=box.element_handle(), timeout=READY_MS
            )
            out[f"{kind}_ready_s"] = round(time.monotonic() - start, 2)
            out[f"{kind}_python_start_s"] = round(page.evaluate("window.minitorchLive.seconds"), 2)
            if kind == "planner":
                out.update(_watched(page))
            for control, value in changes:
                select = box.locator(f'select[data-control="{control}"]')
                took = _ready_after(page, box, lambda s=select, v=value: s.select_option(v))
                out[f"{kind}_{control}_change_s"] = round(took, 2)
            if kind == "planner":
                code = json.dumps(RANK_PY.format(problem=EXAMPLE))
                took = page.evaluate(f"window.minitorchLive.run({code})")
                out["example_ranking_pyodide_s"] = round(took, 2)
            context.close()
    from minitorch_dist.viz import live

    live._plans.clear()
    start = time.perf_counter()
    live._plan(*EXAMPLE)
    out["example_ranking_cpython_s"] = round(time.perf_counter() - start, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=1, help="runs; each figure is their median")
    args = ap.parse_args()
    before = os.getloadavg()[0]
    runs = [measure(args.html) for _ in range(args.repeat)]
    figures = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "from": "file://",
        "runs": args.repeat,
        **figures,
        "load_average_1min_before": round(before, 1),
        "load_average_1min_after": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
