"""The memory predictor widget: explore the bytes per rank of a training configuration.

:func:`memory_predictor` wraps :func:`~minitorch_dist.memory.predict` (the accounting, a pure
function in ``minitorch_dist.memory``) in ipywidgets controls: a Llama preset, sequence length,
micro-batch, recompute policy, ZeRO stage, data-parallel degree, recipe and optimizer offload. The
callback only calls :func:`~minitorch_dist.memory.predict` and :func:`render_prediction`, so a
test can drive the controls without a Jupyter frontend and compare what is displayed with
:func:`~minitorch_dist.memory.predict`. ipywidgets is imported only when the widget is built.
"""

from __future__ import annotations

import html
from typing import Any

from minitorch_dist.figures import COLORS
from minitorch_dist.memory.estimate import RECIPES, RECOMPUTE, format_bytes
from minitorch_dist.memory.prediction import predict
from minitorch_dist.models import preset_names

__all__ = ["MemoryPredictor", "memory_predictor", "render_prediction"]

CATEGORIES = ("params", "grads", "optimizer", "activations")
RECIPE_LABELS = {
    "mixed": "16-bit params/grads + fp32 Adam (16 B/param)",
    "mixed_fp32_grads": "... + fp32 grad buffer (20 B/param)",
    "fp32": "fp32 throughout (16 B/param)",
}
SEQ_LENS = tuple(2**k for k in range(7, 18))  # 128 ... 131072
DP_DEGREES = tuple(2**k for k in range(11))  # 1 ... 1024


def render_prediction(result: dict[str, int], *, device_bytes: int | None = None) -> str:
    """HTML of a :func:`predict` result: a row per category with its exact bytes, binary units
    and a bar, then the total and whether it fits ``device_bytes``. Each row carries
    ``data-category`` and ``data-bytes`` attributes, so tests read back exactly what is shown."""
    scale = max(result["total"], result.get("cpu", 0), device_bytes or 0) or 1
    rows = []
    for category in (*CATEGORIES, "total", *(("cpu",) if "cpu" in result else ())):
        nbytes = result[category]
        color = COLORS.get(category, "#444444")
        width = 100.0 * nbytes / scale
        bar = (
            f'<div style="background:{color};height:0.9em;width:{width:.2f}%;min-width:1px"></div>'
        )
        weight = "font-weight:bold;" if category == "total" else ""
        label = "CPU (offloaded)" if category == "cpu" else category
        rows.append(
            f'<tr data-category="{category}" data-bytes="{nbytes}" style="{weight}">'
            f"<td>{label}</td><td style='text-align:right'>{nbytes:,}</td>"
            f"<td style='text-align:right'>{html.escape(format_bytes(nbytes))}</td>"
            f'<td style="width:45%">{bar}</td></tr>'
        )
    verdict = ""
    if device_bytes:
        fits = result["total"] <= device_bytes
        verdict = (
            f'<p data-fits="{str(fits).lower()}">{"fits" if fits else "does NOT fit"} '
            f"in {html.escape(format_bytes(device_bytes))} per device "
            f"({100 * result['total'] / device_bytes:.0f}% of it), before temporary "
            "buffers and fragmentation</p>"
        )
    header = "<tr><th>per rank</th><th>bytes</th><th></th><th></th></tr>"
    return f'<table class="memory-prediction">{header}{"".join(rows)}</table>{verdict}'


class Controls:
    """What the book's widgets share: ``controls`` (name -> ipywidget) and :meth:`set`."""

    controls: dict[str, Any]

    def set(self, **values: Any) -> Any:
        """Change controls programmatically, e.g. ``set(preset="llama-3-70b", zero_stage=3)``."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; valid: {list(self.controls)}")
        for key, value in values.items():
            self.controls[key].value = value
        return self


class MemoryPredictor(Controls):
    """The widget returned by :func:`memory_predictor`.

    ``controls`` maps each :func:`predict` argument (and ``device_gib``) to its ipywidgets
    control; ``view`` is the HTML widget showing the result; ``result`` is the last
    :func:`predict` result, recomputed whenever a control changes; ``widget`` is the whole UI
    (displaying the predictor displays it).
    """

    def __init__(self, **initial: Any) -> None:
        import ipywidgets as w  # lazily: the package imports without ipywidgets

        style = {"description_width": "110px"}
        layout = w.Layout(width="460px")
        self.controls: dict[str, Any] = {
            "preset": w.Dropdown(options=preset_names(), value="llama-3-8b", description="model"),
            "seq_len": w.Dropdown(options=SEQ_LENS, value=4096, description="sequence length"),
            "micro_batch": w.BoundedIntText(value=1, min=1, max=4096, description="micro-batch"),
            "recompute": w.ToggleButtons(options=RECOMPUTE, value="none", description="recompute"),
            "zero_stage": w.ToggleButtons(options=(0, 1, 2, 3), value=0, description="ZeRO stage"),
            "dp": w.Dropdown(options=DP_DEGREES, value=8, description="dp ranks"),
            "recipe": w.Dropdown(
                options=[(RECIPE_LABELS[r], r) for r in RECIPES],
                value="mixed",
                description="recipe",
            ),
            "offload": w.Checkbox(value=False, description="offload optimizer states to CPU"),
            "device_gib": w.BoundedFloatText(value=80, min=1, max=4096, description="device GiB"),
        }
        for control in self.controls.values():
            control.style = style
            if not isinstance(control, (w.ToggleButtons, w.Checkbox)):
                control.layout = layout
        self.view = w.HTML()
        self.result: dict[str, int] = {}
        self.set(**initial)
        for control in self.controls.values():
            control.observe(self._update, names="value")
        self._update()
        self.widget = w.VBox([*self.controls.values(), self.view])

    def values(self) -> dict[str, Any]:
        """The current control values, as :func:`predict` keywords (without ``device_gib``;
        ``offload`` only when it is on, so a configuration without it reads as in chapter 1)."""
        values = {k: c.value for k, c in self.controls.items() if k != "device_gib"}
        if not values["offload"]:
            del values["offload"]
        return values

    def _update(self, change: Any = None) -> None:
        self.result = predict(**self.values())
        device = int(self.controls["device_gib"].value * 2**30)
        self.view.value = render_prediction(self.result, device_bytes=device)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def memory_predictor(**initial: Any) -> MemoryPredictor:
    """The interactive memory predictor: pick a Llama preset, sequence length, micro-batch,
    recompute policy, ZeRO stage, data-parallel degree, recipe and optimizer offload, and read the
    bytes per rank by category (text and bars) and whether they fit the device. Needs ipywidgets
    (and a live kernel for the controls to respond); ``initial`` sets controls, as
    :meth:`MemoryPredictor.set`."""
    return MemoryPredictor(**initial)
