"""The browser check's look at the book's live widgets: Python in the page against Python here.

Every ``[data-live]`` element of a page (:mod:`minitorch_dist.viz.live_html`) must become
``data-state="ready"`` (Pyodide loaded from the book's own files, offline) and show
``data-result`` equal to :func:`minitorch_dist.viz.live_result` of its ``data-inputs``, which
must be the values its controls show. Then two of its controls are changed in turn (as a reader
does: a random other option is selected, which dispatches ``input`` and ``change``; the same
picks on every run), and after each the
element must answer again, equal to Python, for the new inputs; the answer must have changed.
The browser check drives them in a page opened from ``file://`` with every other request
aborted (a book opened by double-clicking ``index.html``, offline).

With scripts off (:func:`static_failures`) every element must still show the answer computed
when the book was built: ``data-state="static"``, an answer in its ``.live-output``, and a
``data-result`` equal to Python's for its ``data-inputs``.

What the reader reads is checked too (:func:`label_failures`, :func:`compare`): each control's
label and its options' values must be Python's (:func:`minitorch_dist.viz.live.controls`), each
option must show its value (a number as that number, yes/no only for a yes/no control;
:mod:`minitorch_dist.course.browser_check_labels`), and the answer's text must be the text of
Python's own rendering of Python's answer (:func:`minitorch_dist.viz.live_html.render_live`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minitorch_dist.course.browser_check_labels import (
    CONTROLS_JS,
    control_failures,
    text_of,
)
from minitorch_dist.course.catalogues import widget_translations

Live = Callable[[str, dict[str, Any]], dict[str, Any]]
Controls = Callable[[str], dict[str, tuple[str, tuple[Any, ...], Any]]]  # name -> label, choices


@dataclass(frozen=True)
class Reference:
    """Python's side of the widgets: its answer (``live``), and where known its controls (name ->
    (label, choices, default)) and its rendering of an answer (HTML), which the page must show."""

    live: Live
    controls: Controls | None = None
    render: Callable[[dict[str, Any]], str] | None = None


READY_TIMEOUT_MS = (
    180_000  # Pyodide's first start on 2 busy cores, then the first answer (51 s seen)
)
UPDATE_TIMEOUT_MS = 30_000  # one answer after a change (the planner ranks a new problem)
DRIVE = {"predictor": ("zero_stage", "dp"), "planner": ("tp", "zero")}  # the controls changed
WAIT_JS = """([el, want]) => {
  const state = el.getAttribute('data-state');
  if (state === 'error') return true;
  if (state !== 'ready') return false;
  if (want === null) return true;
  try { return JSON.stringify(JSON.parse(el.getAttribute('data-inputs'))) === want; }
  catch (e) { return false; }
}"""


def default_live() -> Reference | None:
    """:func:`minitorch_dist.viz.live_result` with the widgets' controls and rendering, or None
    where the module is missing."""
    try:
        from minitorch_dist.viz.live import controls, live_result
        from minitorch_dist.viz.live_html import render_live
    except ModuleNotFoundError as e:
        if e.name not in ("minitorch_dist.viz", "minitorch_dist.viz.live"):
            raise
        return None
    return Reference(live_result, controls, render_live)


def _reference(live: Live | Reference | None) -> Reference | None:
    return live if live is None or isinstance(live, Reference) else Reference(live)


def label_failures(box, name: str, ref: Reference | None) -> list[str]:
    """The widget's controls as the reader sees them against Python's: the same controls in the
    same order, each labelled as Python labels it, offering Python's choices, each option
    showing its value (:func:`shows`)."""
    if ref is None or ref.controls is None:
        return []
    try:
        want = ref.controls(box.get_attribute("data-live"))
    except Exception as e:  # the checker's own Python refusing is a failure too
        return [f"{name}: controls() raised {e!r}"]
    seen = box.locator("select[data-control]").evaluate_all(CONTROLS_JS)
    # a page of a translation (<html lang="zh-CN">) shows the labels of its widgets catalogue
    language = box.evaluate("b => document.documentElement.lang || ''").replace("-", "_")
    words = widget_translations(language) if language and language != "en" else {}
    if words:
        want = {k: (words.get(label, label), *rest) for k, (label, *rest) in want.items()}
    yes_no = (words.get("yes", "yes"), words.get("no", "no"))
    return [f"{name}: {fail}" for fail in control_failures(seen, want, yes_no)]


def same(a: Any, b: Any) -> bool:
    """Equal JSON values; floats equal to 1e-12 relative (Pyodide's libm is not glibc's)."""
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _read(box, name: str) -> tuple[dict | None, dict | None, str | None]:
    """(inputs, result, failure) as the element carries them."""
    try:
        inputs = json.loads(box.get_attribute("data-inputs") or "")
        result = json.loads(box.get_attribute("data-result") or "")
    except json.JSONDecodeError as e:
        return None, None, f"{name}: data-inputs/data-result is not JSON ({e})"
    return inputs, result, None


def compare(box, name: str, live: Live | Reference) -> tuple[dict | None, list[str]]:
    """The element's result, and its failures: controls that disagree with ``data-inputs``, a
    result that is an error or differs from ``live``'s, a text that is not Python's rendering
    of it."""
    ref = _reference(live)
    inputs, result, fail = _read(box, name)
    if fail:
        return None, [fail]
    shown = box.locator("select[data-control]").evaluate_all(
        "els => Object.fromEntries(els.map(e => [e.dataset.control, JSON.parse(e.value)]))"
    )
    if shown != inputs:
        return result, [f"{name}: data-inputs {inputs} are not its controls' values {shown}"]
    if "error" in result:
        return result, [f"{name}: shows an error for {inputs}: {result['error']}"]
    try:
        want = json.loads(json.dumps(ref.live(box.get_attribute("data-live"), inputs)))
    except Exception as e:  # the checker's own Python refusing is a failure too
        return result, [f"{name}: live_result({inputs}) raised {e!r}"]
    if not same(result, want):
        diff = sorted(k for k in set(result) | set(want) if not same(result.get(k), want.get(k)))
        return result, [f"{name}: for {inputs} the page shows {', '.join(diff)} unlike Python"]
    if ref.render is not None:
        text = " ".join(" ".join(box.locator(".live-output").all_text_contents()).split())
        wanted = text_of(ref.render(want))
        if text != wanted:
            at = next((i for i, (a, b) in enumerate(zip(text, wanted)) if a != b), 0)
            return result, [
                f"{name}: for {inputs} the page reads {text[max(0, at - 20) : at + 40]!r} where "
                f"Python's rendering reads {wanted[max(0, at - 20) : at + 40]!r}"
            ]
    return result, []


def _wait(page, box, want: str | None, timeout: int, name: str, what: str) -> str | None:
    from playwright.sync_api import TimeoutError

    try:
        page.wait_for_function(WAIT_JS, arg=[box.element_handle(), want], timeout=timeout)
    except TimeoutError:
        state = box.get_attribute("data-state")
        return f"{name}: not ready {timeout / 1000:.0f} s after {what} (data-state={state})"
    if box.get_attribute("data-state") == "error":
        status = box.locator(".live-status").all_inner_texts()
        return f"{name}: Python did not start after {what}: {' '.join(status)[:200]}"
    return None


def live_failures(page, live: Live | Reference | None) -> list[str]:
    """Every failure of the page's live widgets (see the module's docstring)."""
    from playwright.sync_api import Error

    live = _reference(live)
    fails: list[str] = []
    for k, box in enumerate(page.locator("[data-live]").all(), start=1):
        kind = box.get_attribute("data-live")
        name = f"live {kind} {k}"
        if kind not in DRIVE:
            fails.append(f'{name}: data-live must be "predictor" or "planner"')
            continue
        if live is None:
            fails.append("no live module (minitorch_dist.viz.live) to compare the page with")
            break
        rng = random.Random(f"{kind} {k}")
        box.scroll_into_view_if_needed()
        fail = _wait(page, box, None, READY_TIMEOUT_MS, name, "scrolling into view")
        if fail:
            fails.append(fail)
            continue
        first, found = compare(box, name, live)
        fails += found + label_failures(box, name, live)
        for control in DRIVE[kind]:
            select = box.locator(f'select[data-control="{control}"]')
            if select.count() != 1:
                fails.append(f"{name} has no control {control}")
                break
            options = select.locator("option:not([disabled])").evaluate_all(
                "os => os.map(o => o.value)"
            )
            others = [o for o in options if o != select.input_value()] or options
            pick = rng.choice(others)  # a random other value, the same on every run
            try:
                select.select_option(pick, timeout=UPDATE_TIMEOUT_MS)
            except Error as e:
                fails.append(f"{name}: cannot set {control}={pick}: {str(e).splitlines()[0]}")
                break
            inputs, _, _ = _read(box, name)
            want = json.dumps({**(inputs or {}), control: json.loads(pick)}, separators=(",", ":"))
            fail = _wait(page, box, want, UPDATE_TIMEOUT_MS, name, f"setting {control}={pick}")
            if fail:
                fails.append(fail)
                break
            _, found = compare(box, name, live)
            fails += found
        else:
            if not found and same(_read(box, name)[1], first):
                fails.append(f"{name}: the answer did not change after changing {DRIVE[kind]}")
    return fails


def static_failures(page, live: Live | Reference | None) -> list[str]:
    """Every failure of the page's live widgets where scripts cannot run (the page opened with
    JavaScript disabled): each must hold its build-time answer, equal to ``live``'s."""
    live = _reference(live)
    fails: list[str] = []
    for k, box in enumerate(page.locator("[data-live]").all(), start=1):
        kind = box.get_attribute("data-live")
        name = f"live {kind} {k} with scripts off"
        if kind not in DRIVE:
            fails.append(f'{name}: data-live must be "predictor" or "planner"')
            continue
        state = box.get_attribute("data-state")
        if state != "static":
            fails.append(f'{name}: data-state is {state!r}, not "static"')
        shown = " ".join(box.locator(".live-output").all_inner_texts()).strip()
        if not shown:
            fails.append(f"{name}: shows no answer (an empty .live-output)")
        if live is None:
            fails.append("no live module (minitorch_dist.viz.live) to compare the page with")
            break
        fails += compare(box, name, live)[1] + label_failures(box, name, live)
    return fails
