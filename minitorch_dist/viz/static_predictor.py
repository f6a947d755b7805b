"""The memory predictor without a kernel: HTML and inline JavaScript over tables from ``predict``.

The ipywidgets predictor (:mod:`minitorch_dist.viz.predictor`) needs a live kernel: in the
rendered book its controls change nothing. :func:`static_predictor_html` gives the same controls
as ``<select>`` elements and the same table as :func:`render_prediction`, answered in the page.
There is one source of truth, :func:`~minitorch_dist.memory.predict`: Python calls it on every
value of the controls each category depends on and embeds the results as JSON; the JavaScript
only looks bytes up, adds them, and formats them as ``render_prediction`` does. No formula is
written twice.

Reading ``predict`` gives the split: ``params``, ``grads``, ``optimizer`` (and ``cpu`` under
offload) come from ``model_state_bytes`` of (model, ZeRO stage, dp, recipe, offload); the
``activations`` from ``llama_activation_bytes`` of (model, sequence, micro-batch, recompute,
recipe); ``total`` is the sum of the four device categories. Each table is stored over its own
controls only, and options that give identical slices share an entry (ZeRO stages 0-2 hold the
same parameters), so the page carries a small table instead of the whole grid. The tests check the
lookups against ``predict`` on every combination of the controls and the JavaScript (run in node)
against this module's text.
"""

from __future__ import annotations

import functools
import html
import itertools
import json
import operator
from typing import Any

from minitorch_dist.figures import COLORS
from minitorch_dist.memory.estimate import RECIPES, RECOMPUTE
from minitorch_dist.memory.prediction import predict
from minitorch_dist.models import preset_names
from minitorch_dist.viz.predictor import (
    CATEGORIES,
    DP_DEGREES,
    RECIPE_LABELS,
    SEQ_LENS,
    render_prediction,
)

__all__ = ["CONTROLS", "DEPENDS", "predict_for_controls", "static_predictor_html", "tables"]

# name -> (label, ((value, shown text), ...), default): the widget's controls and choices. The
# widget's micro-batch is a free integer in [1, 4096]; a <select> offers its powers of two.
CONTROLS: dict[str, tuple[str, tuple[tuple[str, str], ...], str]] = {
    "preset": ("model", tuple((p, p) for p in preset_names()), "llama-3-8b"),
    "seq": ("sequence length", tuple((str(s), f"{s:,}") for s in SEQ_LENS), "4096"),
    "micro_batch": ("micro-batch", tuple((str(2**k),) * 2 for k in range(13)), "1"),
    "recompute": ("recompute", tuple((r, r) for r in RECOMPUTE), "none"),
    "zero": ("ZeRO stage", tuple((str(z), str(z)) for z in (0, 1, 2, 3)), "0"),
    "dp": ("dp ranks", tuple((str(d), str(d)) for d in DP_DEGREES), "8"),
    "recipe": ("recipe", tuple((r, RECIPE_LABELS[r]) for r in RECIPES), "mixed"),
    "offload": ("offload optimizer states to CPU", (("false", "no"), ("true", "yes")), "false"),
    "device_gib": ("device GiB", tuple((str(g), str(g)) for g in (16, 24, 40, 48, 80, 94, 141, 192)), "80"),
}  # fmt: skip
# The controls each category of predict's result depends on (read off predict; the tests check
# the lookups against predict on the whole grid, so a missing dependency fails there).
STATES = ("preset", "zero", "dp", "recipe", "offload")
DEPENDS: dict[str, tuple[str, ...]] = {
    "params": STATES,
    "grads": STATES,
    "optimizer": STATES,
    "cpu": STATES,
    "activations": ("preset", "seq", "micro_batch", "recompute", "recipe"),
}


def _options(name: str) -> tuple[str, ...]:
    return tuple(value for value, _ in CONTROLS[name][1])


def _checked(values: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(values) - set(CONTROLS))
    if unknown:
        raise ValueError(f"unknown controls {unknown}; valid: {list(CONTROLS)}")
    full = {name: default for name, (_, _, default) in CONTROLS.items()}
    for name, value in values.items():
        if value not in _options(name):
            choices = ", ".join(_options(name))
            raise ValueError(f"control {name} must be one of {choices}, got {value!r}")
        full[name] = value
    return full


def predict_for_controls(values: dict[str, str]) -> dict[str, int]:
    """:func:`predict`'s result for the controls' values, given as the strings of the HTML's
    ``<option value=...>`` (controls left out keep their defaults; ``device_gib`` is ignored).
    ValueError naming the control for an unknown control or value."""
    v = _checked(values)
    return predict(v["preset"], int(v["seq"]), int(v["micro_batch"]), v["recompute"],
                   int(v["zero"]), int(v["dp"]), v["recipe"], offload=v["offload"] == "true")  # fmt: skip


def _compress(axes: list[str], table: dict[tuple[int, ...], Any]) -> dict[str, Any]:
    """Store ``table`` (option indices -> bytes) with each axis's options grouped into classes of
    identical slices: ``classes[axis][option]`` is the class, ``values`` is row-major."""
    shape = [len(_options(a)) for a in axes]
    classes = []
    for i, n in enumerate(shape):
        slices = [tuple(v for k, v in sorted(table.items()) if k[i] == j) for j in range(n)]
        firsts = {s: None for s in slices}  # distinct slices in order of first appearance
        index = {s: c for c, s in enumerate(firsts)}
        classes.append([index[s] for s in slices])
        table = {k: v for k, v in table.items() if slices.index(slices[k[i]]) == k[i]}
        table = {k[:i] + (classes[i][k[i]],) + k[i + 1 :]: v for k, v in table.items()}
        shape[i] = len(index)
    values = [table[k] for k in itertools.product(*map(range, shape))]
    return {"axes": axes, "classes": dict(zip(axes, classes)), "shape": shape,
            "values": ",".join("" if v is None else str(v) for v in values)}  # fmt: skip


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, dict[str, Any]]:
    """The lookup tables the page embeds: per category, its axes (controls), the class of each
    option on each axis, the shape, and the bytes as comma-separated decimal integers (row-major;
    empty where the category is absent: ``cpu`` without offload). Built by calling ``predict``."""
    out = {}
    for depends in dict.fromkeys(DEPENDS.values()):
        cats = [c for c, d in DEPENDS.items() if d == depends]
        grids = {c: {} for c in cats}
        for index in itertools.product(*(range(len(_options(a))) for a in depends)):
            values = {a: _options(a)[i] for a, i in zip(depends, index)}
            result = predict_for_controls(values)
            for c in cats:
                grids[c][index] = result.get(c)
        out.update({c: _compress(list(depends), grids[c]) for c in cats})
    return out


@functools.lru_cache(maxsize=1)
def _offsets() -> dict[str, tuple[list[tuple[str, dict[str, int]]], list[int | None]]]:
    """Per category: for each axis, option value -> class x stride; and the cells as ints."""
    out = {}
    for category, t in tables().items():
        strides = list(itertools.accumulate(reversed(t["shape"][1:]), operator.mul, initial=1))[
            ::-1
        ]
        axes = [(axis, {v: t["classes"][axis][i] * stride for i, v in enumerate(_options(axis))})
                for axis, stride in zip(t["axes"], strides)]  # fmt: skip
        out[category] = (axes, [int(x) if x else None for x in t["values"].split(",")])
    return out


def lookup(values: dict[str, str]) -> dict[str, int]:
    """What the page computes: each category looked up in :func:`tables`, the total their sum
    (the Python twin of the JavaScript's ``lookup``, for the tests)."""
    v = _checked(values)
    result: dict[str, int] = {}
    for category, (axes, cells) in _offsets().items():
        cell = cells[sum(offset[v[axis]] for axis, offset in axes)]
        if cell is not None:
            result[category] = cell
    result["total"] = sum(result[c] for c in CATEGORIES)
    return result


# The core: pure functions of the data (run in node by the tests); then the page's binding.
CORE_JS = r"""
function staticPredictorCore(D) {
  const T = {};
  for (const [c, t] of Object.entries(D.tables)) T[c] = {...t, cells: t.values.split(",")};
  const ties = (x, d) => { const y = x * 2 ** (d + 1); return Number.isInteger(y) && y % 2 === 1; };
  function fixed(x, d) {  // Python's f"{x:.{d}f}": round half to even (toFixed rounds ties up)
    const s = x.toFixed(d);
    if (!ties(x, d) || Number(s[s.length - 1]) % 2 === 0) return s;
    return s.slice(0, -1) + String(Number(s[s.length - 1]) - 1);
  }
  function div(a, b) {  // Python's int / int: the correctly rounded quotient of BigInts
    const small = 2n ** 53n;
    if (a < small && b < small) return Number(a) / Number(b);
    const shift = Math.max(0, 55 - (a.toString(2).length - b.toString(2).length));
    const num = a << BigInt(shift), q = num / b, sticky = num % b === 0n ? 0n : 1n;
    return Number((q << 1n) | sticky) / 2 ** (shift + 1);
  }
  function formatBytes(n) {  // minitorch_dist.memory.format_bytes, n a BigInt >= 0
    if (n < 1024n) return `${n} B`;
    let x = Number(n);
    for (const unit of ["KiB", "MiB", "GiB", "TiB"]) {
      x /= 1024;
      if (x < 1024 || unit === "TiB") return `${fixed(x, 1)} ${unit}`;
    }
  }
  const commas = (n) => n.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
  function lookup(values) {
    const result = {};
    for (const [c, t] of Object.entries(T)) {
      let flat = 0;
      for (let i = 0; i < t.axes.length; i++) {
        const a = t.axes[i], option = D.options[a].indexOf(values[a]);
        if (option < 0) throw new Error(`control ${a} has no option ${values[a]}`);
        flat = flat * t.shape[i] + t.classes[a][option];
      }
      if (t.cells[flat] !== "") result[c] = BigInt(t.cells[flat]);
    }
    result.total = D.categories.reduce((sum, c) => sum + result[c], 0n);
    return result;
  }
  function render(result, device) {  // minitorch_dist.viz.render_prediction
    const cpu = result.cpu === undefined ? 0n : result.cpu;
    let scale = [result.total, cpu, device].reduce((m, x) => (x > m ? x : m), 0n);
    if (scale === 0n) scale = 1n;
    const rows = [];
    for (const c of [...D.categories, "total", ...(result.cpu === undefined ? [] : ["cpu"])]) {
      const n = result[c], color = D.colors[c] || "#444444";
      const bar = `<div style="background:${color};height:0.9em;width:${fixed(100 * Number(n) / Number(scale), 2)}%;min-width:1px"></div>`;
      const weight = c === "total" ? "font-weight:bold;" : "", label = c === "cpu" ? "CPU (offloaded)" : c;
      rows.push(`<tr data-category="${c}" data-bytes="${n}" style="${weight}"><td>${label}</td>` +
        `<td style='text-align:right'>${commas(n)}</td><td style='text-align:right'>${esc(formatBytes(n))}</td>` +
        `<td style="width:45%">${bar}</td></tr>`);
    }
    let verdict = "";
    if (device) {
      const fits = result.total <= device;
      verdict = `<p data-fits="${fits}">${fits ? "fits" : "does NOT fit"} in ${esc(formatBytes(device))} per device ` +
        `(${fixed(div(100n * result.total, device), 0)}% of it), before temporary buffers and fragmentation</p>`;
    }
    const header = "<tr><th>per rank</th><th>bytes</th><th></th><th></th></tr>";
    return `<table class="memory-prediction">${header}${rows.join("")}</table>${verdict}`;
  }
  const show = (values) => render(lookup(values), BigInt(values.device_gib) * 2n ** 30n);
  return {lookup, render, show, formatBytes, fixed, div};
}
"""
BIND_JS = r"""
(function () {
  const root = document.getElementById("%s");
  const core = staticPredictorCore(JSON.parse(root.querySelector("script.predictor-data").textContent));
  const selects = root.querySelectorAll("select");
  function update() {
    const values = {};
    selects.forEach((s) => { values[s.name] = s.value; });
    root.querySelector(".predictor-output").innerHTML = core.show(values);
  }
  selects.forEach((s) => { s.addEventListener("change", update); s.addEventListener("input", update); });
  update();
})();
"""
_COUNTER = itertools.count(1)


def data_json() -> str:
    """The JSON the page embeds: the tables, each control's option values, the categories and
    their colors."""
    data = {"tables": tables(), "options": {name: list(_options(name)) for name in CONTROLS},
            "categories": list(CATEGORIES), "colors": {c: COLORS[c] for c in CATEGORIES}}  # fmt: skip
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def static_predictor_html(**initial: Any) -> str:
    """The predictor as one self-contained block of HTML: ``<select>`` controls named as
    :data:`CONTROLS` inside a ``data-static-predictor`` container, the table of
    :func:`render_prediction` (rendered here for the initial values, then by the inline script on
    every change), the tables of :func:`tables` as JSON. No external script, no kernel, no
    network. ``initial`` sets controls (``preset="llama-3-70b", zero=3``; bools and ints are
    written as the HTML's strings)."""
    values = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in initial.items()}
    values = _checked(values)
    uid = f"static-predictor-{next(_COUNTER)}"
    controls = []
    for name, (label, options, _) in CONTROLS.items():
        opts = "".join(f'<option value="{html.escape(v)}"{" selected" if v == values[name] else ""}>'
                       f"{html.escape(text)}</option>" for v, text in options)  # fmt: skip
        controls.append(f'<label style="display:block;margin:2px 0"><span style="display:'
                        f'inline-block;width:16em">{html.escape(label)}</span>'
                        f'<select name="{name}">{opts}</select></label>')  # fmt: skip
    device = int(values["device_gib"]) * 2**30
    table = render_prediction(predict_for_controls(values), device_bytes=device)
    return (f'<div id="{uid}" data-static-predictor="{uid}" class="static-predictor">'
            f'<form onsubmit="return false">{"".join(controls)}</form>'
            f'<div class="predictor-output">{table}</div>'
            f'<script type="application/json" class="predictor-data">{data_json()}</script>'
            f"<script>{CORE_JS}{BIND_JS % uid}</script></div>")  # fmt: skip
