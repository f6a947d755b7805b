"""What the reader reads on a live widget, against Python: each control's label and options.

``CONTROLS_JS`` collects, for every ``select[data-control]`` of a widget, its label (the text of
its ``<label>`` without the options) and its options' values and texts; :func:`control_failures`
compares them with :func:`minitorch_dist.viz.live.controls`: the same controls in the same
order, each labelled as Python labels it, offering Python's choices, each option showing its
value (:func:`shows`). :func:`text_of` is the text of a fragment of HTML, for comparing what a
widget shows with Python's rendering of its answer.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

__all__ = ["CONTROLS_JS", "control_failures", "shows", "text_of"]


def shows(value: Any, text: str, yes_no: tuple[str, str] = ("yes", "no")) -> bool:
    """Does an option's ``text`` show its ``value``? A bool as "yes"/"no" (``yes_no`` in a
    translated page; only a bool: 1 is not "yes"), a number as itself (thousands separators
    allowed), a string as itself."""
    text = " ".join(text.split())
    if type(value) is bool:
        return text == (yes_no[0] if value else yes_no[1])
    if type(value) in (int, float):
        return re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3})", "", text) == str(value)
    return text == str(value)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def text_of(html: str) -> str:
    """The text of an HTML fragment (its textContent), whitespace collapsed."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.parts).split())


CONTROLS_JS = """els => els.map(s => {
  const box = s.closest('label');
  let label = s.getAttribute('aria-label') || '';
  if (box) {
    const copy = box.cloneNode(true);
    copy.querySelectorAll('select').forEach(x => x.remove());
    label = copy.textContent;
  }
  return {control: s.dataset.control, label: label.trim().replace(/\\s+/g, ' '),
          options: [...s.options].map(o => [o.value, o.textContent])};
})"""


def control_failures(
    seen: list[dict[str, Any]], want: dict[str, tuple], yes_no: tuple[str, str] = ("yes", "no")
) -> list[str]:
    """``seen`` (what ``CONTROLS_JS`` returns) against ``want`` (name -> (label, choices,
    default), :func:`minitorch_dist.viz.live.controls`, its labels translated on a translated
    page): one message per control that differs."""
    names = [c["control"] for c in seen]
    if names != list(want):
        return [f"shows the controls {names}, Python's are {list(want)}"]
    fails = []
    for c in seen:
        label, choices, _ = want[c["control"]]
        what = f"control {c['control']}"
        if c["label"] != label:
            fails.append(f"{what} is labelled {c['label']!r}, Python's label is {label!r}")
        try:
            values = [json.loads(v) for v, _ in c["options"]]
        except json.JSONDecodeError:
            values = [v for v, _ in c["options"]]
        if json.dumps(values) != json.dumps(list(choices)):  # 1 is not true, nor "1"
            fails.append(f"{what} offers {values}, Python's choices are {list(choices)}")
            continue
        wrong = [
            f"{v!r} shows {t.strip()!r}"
            for v, (_, t) in zip(values, c["options"])
            if not shows(v, t, yes_no)
        ]
        if wrong:
            fails.append(
                f"{what} ({label}): option {', '.join(wrong[:4])}, not its value"
                + (f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else "")
            )
    return fails
