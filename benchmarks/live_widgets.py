"""How fast the book's live widgets answer in headless Chromium, offline (issue 33).

    python benchmarks/live_widgets.py _build/html [--out benchmarks/results/live_widgets.json]

Serves the built book on a local port with every other host blocked (as the browser check does),
opens chapter 1 and chapter 11, and measures with the page's own clock: the seconds from the
widget's scrolling into view (its first interaction) to ``data-state="ready"`` (Pyodide started
from the book's files, the arithmetic imported, the first answer shown; chapter 11's first
answer ranks the chapter's example problem), then the seconds one change of a control takes
(the predictor's ZeRO stage; the planner's tp, same problem, and its GPUs, a new ranking).
Each page is opened in a fresh browser context, so nothing is cached between the two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from minitorch_dist.browser_check import CHAPTER_1, CHAPTER_11, chromium, serve

READY_MS = 180_000


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


def measure(html: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    with serve(html) as origin, chromium() as browser:
        for path, kind, changes in (
            (CHAPTER_1, "predictor", (("zero_stage", "3"),)),
            (CHAPTER_11, "planner", (("tp", "4"), ("gpus", "512"))),
        ):
            context = browser.new_context()
            page = context.new_page()
            page.route(
                "**/*", lambda r: r.continue_() if r.request.url.startswith(origin) else r.abort()
            )
            page.goto(f"{origin}/{path}", wait_until="load")
            box = page.locator(f'[data-live="{kind}"]').first
            start = time.monotonic()
            box.scroll_into_view_if_needed()
            page.wait_for_function(
                "el => el.dataset.state === 'ready'", arg=box.element_handle(), timeout=READY_MS
            )
            out[f"{kind}_ready_s"] = round(time.monotonic() - start, 2)
            for control, value in changes:
                select = box.locator(f'select[data-control="{control}"]')
                took = _ready_after(page, box, lambda s=select, v=value: s.select_option(v))
                out[f"{kind}_{control}_change_s"] = round(took, 2)
            context.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", **measure(args.html),
              "load_average_1min": round(max(load, os.getloadavg()[0]), 1)}  # fmt: skip
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
