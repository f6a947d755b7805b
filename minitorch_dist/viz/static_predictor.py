"""Deprecated: the predictor of the static book is now :func:`minitorch_dist.viz.live_html.live_html`.

The JavaScript that looked bytes up in tables computed by ``predict`` is gone: the book's pages
run ``predict`` itself in Pyodide (:mod:`minitorch_dist.viz.live`). The two public functions
stay as aliases that warn and call the live ones, with the old control names (``seq``, ``zero``)
and the old string values mapped.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

__all__ = ["predict_for_controls", "static_predictor_html"]

RENAMED = {"seq": "seq_len", "zero": "zero_stage"}


def _live_inputs(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in values.items():
        if isinstance(value, str) and name not in ("preset", "recompute", "recipe"):
            value = json.loads(value)  # "4096" -> 4096, "true" -> True
        out[RENAMED.get(name, name)] = value
    return out


def predict_for_controls(values: dict[str, str]) -> dict[str, int]:
    """Deprecated: ``live_result("predictor", inputs)["bytes"]`` (ValueError as before)."""
    warnings.warn(
        "predict_for_controls is deprecated: use minitorch_dist.viz.live_result",
        DeprecationWarning,
        stacklevel=2,
    )
    from minitorch_dist.viz.live import live_result

    result = live_result("predictor", _live_inputs(values))
    if "error" in result:
        raise ValueError(result["error"])
    return result["bytes"]


def static_predictor_html(**initial: Any) -> str:
    """Deprecated: ``live_html("predictor", **initial)``, the predictor that runs in the page."""
    warnings.warn(
        "static_predictor_html is deprecated: use minitorch_dist.viz.live_html.live_html",
        DeprecationWarning,
        stacklevel=2,
    )
    from minitorch_dist.viz.live_html import live_html

    return live_html("predictor", **_live_inputs(initial))
