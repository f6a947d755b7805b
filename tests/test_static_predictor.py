"""The predictor of the static book (``minitorch_dist.viz.static_predictor``): its tables against
``predict`` on every combination of the controls, its JavaScript (run in node) against the Python
text of ``render_prediction`` and ``format_bytes``, and its contract with the browser test (the
container attribute, the select names, the total row).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from minitorch_dist.memory import format_bytes, predict
from minitorch_dist.models import LlamaConfig
from minitorch_dist.viz import render_prediction
from minitorch_dist.viz import static_predictor as sp

NAMES = ("preset", "seq", "micro_batch", "recompute", "zero", "dp", "recipe", "offload")
GiB = 2**30


def options(name: str) -> tuple[str, ...]:
    return tuple(value for value, _ in sp.CONTROLS[name][1])


def test_tables_add_up_to_predict_on_the_grid():
    """Catches a table keyed on too few controls (activations without the recipe's dtype, cpu
    without ZeRO), a wrong stride or class map, a category left out of the total: every
    combination of the controls for the smallest and the largest model (226,512 of them) and a
    seeded 20,000 of the rest are looked up the page's way and compared with ``predict``. (All
    792,792 pass too, in about 30 s on 2 cores: too slow to run every time.)"""
    configs = {p: LlamaConfig.from_preset(p) for p in options("preset")}
    tables = sp._offsets()
    both = ("tiny", "llama-3.1-405b")
    grid = itertools.product(both, *(options(n) for n in NAMES[1:]))
    rng = random.Random(0)
    rest = [p for p in options("preset") if p not in both]
    sample = [
        (rng.choice(rest), *(rng.choice(options(n)) for n in NAMES[1:])) for _ in range(20_000)
    ]
    count = 0
    for combo in itertools.chain(grid, sample):
        v = dict(zip(NAMES, combo))
        want = predict(configs[v["preset"]], int(v["seq"]), int(v["micro_batch"]),
                       v["recompute"], int(v["zero"]), int(v["dp"]), v["recipe"],
                       offload=v["offload"] == "true")  # fmt: skip
        got = {}
        for category, (axes, cells) in tables.items():
            cell = cells[sum(offset[v[axis]] for axis, offset in axes)]
            if cell is not None:
                got[category] = cell
        got["total"] = got["params"] + got["grads"] + got["optimizer"] + got["activations"]
        assert got == want, v
        count += 1
    assert count == 2 * 11 * 13 * 3 * 4 * 11 * 3 * 2 + 20_000


def test_lookup_and_predict_for_controls_agree_and_reject_bad_values():
    """Catches the contract drifting: ``lookup`` (the page's sum) and ``predict_for_controls``
    give predict's dict; an unknown control or value is a ValueError that names it."""
    rng = random.Random(0)
    for _ in range(300):
        v = {n: rng.choice(options(n)) for n in NAMES}
        assert sp.lookup(v) == sp.predict_for_controls(v)
    assert sp.predict_for_controls({}) == predict("llama-3-8b", 4096, 1, "none", 0, 8, "mixed")
    for bad, name in (({"zero": "4"}, "zero"), ({"seq": "100"}, "seq"), ({"offload": True}, "offload"),
                      ({"preset": "gpt-5"}, "preset"), ({"gpus": "8"}, "gpus")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            sp.predict_for_controls(bad)
        if bad != {"offload": True}:  # the HTML builder writes True as "true"
            with pytest.raises(ValueError, match=name):
                sp.static_predictor_html(**bad)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.selects: dict[str, list[str]] = {}
        self.selected: dict[str, str] = {}
        self.containers = 0
        self.scripts: list[dict[str, str | None]] = []
        self._select = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "data-static-predictor" in a:
            self.containers += 1
        if tag == "select":
            self._select = a["name"] or ""
            self.selects[self._select] = []
        if tag == "option":
            self.selects[self._select].append(a["value"] or "")
            if "selected" in a:
                self.selected[self._select] = a["value"] or ""
        if tag in ("script", "link", "img", "iframe"):
            self.scripts.append({"tag": tag, **a})


def test_html_contract_controls_and_initial_table():
    """Catches a control renamed or missing (the browser test selects by these names), options
    that are not the widget's, an external script (the page must work offline), and an initial
    table that is not render_prediction's."""
    html = sp.static_predictor_html(preset="llama-3-70b", zero=3, offload=True)
    page = _Page()
    page.feed(html)
    assert page.containers == 1
    assert set(NAMES) <= set(page.selects)
    from minitorch_dist.viz.predictor import DP_DEGREES, SEQ_LENS

    assert page.selects["preset"] == list(options("preset"))
    assert page.selects["seq"] == [str(s) for s in SEQ_LENS]
    assert page.selects["dp"] == [str(d) for d in DP_DEGREES]
    assert page.selects["zero"] == ["0", "1", "2", "3"]
    assert page.selects["recompute"] == ["none", "selective", "full"]
    assert page.selects["recipe"] == ["mixed", "mixed_fp32_grads", "fp32"]
    assert page.selects["offload"] == ["false", "true"]
    assert page.selected["preset"] == "llama-3-70b" and page.selected["zero"] == "3"
    assert all(s["tag"] == "script" and "src" not in s for s in page.scripts)
    values = dict(page.selected)
    result = sp.predict_for_controls(values)
    table = render_prediction(result, device_bytes=80 * GiB)
    assert table in html
    assert f'<tr data-category="total" data-bytes="{result["total"]}"' in html
    assert sp.CORE_JS in html
    size = len(sp.data_json())
    assert size < 300_000, size


# -- the JavaScript, run in node --------------------------------------------------------------
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")
HARNESS = """
const fs = require("fs");
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const core = staticPredictorCore(input.data);
const out = {
  shown: input.values.map((v) => ({total: core.lookup(v).total.toString(), html: core.show(v)})),
  bytes: input.bytes.map((n) => core.formatBytes(BigInt(n))),
  fixed: input.fixed.map(([x, d]) => core.fixed(x, d)),
  div: input.div.map(([a, b]) => core.div(BigInt(a), BigInt(b))),
};
process.stdout.write(JSON.stringify(out));
"""


def run_node(payload: dict) -> dict:
    proc = subprocess.run([NODE, "-e", sp.CORE_JS + HARNESS], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(proc.stdout)


@needs_node
def test_javascript_shows_what_python_renders():
    """Catches the page's JavaScript drifting from Python: a wrong total, a unit or rounding that
    format_bytes writes differently (JavaScript's toFixed rounds ties up, Python to even), thousands
    separators, bar widths, the fits verdict and its percentage -- on a seeded grid of inputs,
    the extremes included (the largest activations pass 2**53, so JavaScript needs BigInt)."""
    rng = random.Random(1)
    values = [{n: rng.choice(options(n)) for n in (*NAMES, "device_gib")} for _ in range(1500)]
    values += [{n: options(n)[-1] for n in (*NAMES, "device_gib")},
               {n: options(n)[0] for n in (*NAMES, "device_gib")}]  # fmt: skip
    big = [2**k + d for k in range(9, 64) for d in (-1, 0, 1)]
    ties = [1024 * 5 // 4, 1024 * 7 // 4, 1024 * 9 // 4, 1536 * 1024, 1280 * 2**20, 2**50 * 5 // 4]
    nbytes = [0, 1, 1023, 1024, *ties, *big, *(rng.randrange(2**62) for _ in range(2000))]
    fixed = [(k / 8, 2) for k in range(800)] + [(k / 4, 1) for k in range(400)]
    fixed += [(k / 2, 0) for k in range(400)] + [(rng.uniform(0, 1e4), d) for d in (0, 1, 2) for _ in range(500)]  # fmt: skip
    div = [(rng.randrange(2**70), rng.randrange(1, 2**45)) for _ in range(2000)]
    div += [(100 * k, 8 * GiB) for k in (GiB, 3 * GiB, 5 * GiB)] + [(2**60 + 1, 3), (10**20, 7)]
    out = run_node({"data": json.loads(sp.data_json()), "values": values, "fixed": fixed,
                    "bytes": [str(n) for n in nbytes], "div": [[str(a), str(b)] for a, b in div]})  # fmt: skip
    assert out["bytes"] == [format_bytes(n) for n in nbytes]  # BigInts sent as strings
    assert out["fixed"] == [f"{x:.{d}f}" for x, d in fixed]
    assert [float(x) for x in out["div"]] == [a / b for a, b in div]  # JSON writes 3e17 as an int
    for v, shown in zip(values, out["shown"]):
        result = sp.predict_for_controls(v)
        assert int(shown["total"]) == result["total"], v
        assert shown["html"] == render_prediction(
            result, device_bytes=int(v["device_gib"]) * GiB
        ), v
    fits = {re.search(r'data-fits="(\w+)"', s["html"]).group(1) for s in out["shown"]}
    assert fits == {"true", "false"}  # both verdicts were exercised


@needs_node
def test_the_page_script_runs_against_a_minimal_dom():
    """Catches a binding that breaks in a page (a wrong id, the data not found, no listener): the
    page's own scripts run against a tiny stand-in DOM, a control changes, the table follows."""
    html = sp.static_predictor_html()
    uid = re.search(r'data-static-predictor="([^"]+)"', html).group(1)
    data = re.search(r'<script type="application/json" class="predictor-data">(.*?)</script>',
                     html, re.S).group(1)  # fmt: skip
    code = re.findall(r"<script>(.*?)</script>", html, re.S)[0]
    selects = {n: sp.CONTROLS[n][2] for n in sp.CONTROLS}
    dom = f"""
const listeners = [];
const selects = Object.entries({json.dumps(selects)}).map(([name, value]) =>
  ({{name, value, addEventListener: (e, f) => listeners.push(f)}}));
const output = {{innerHTML: ""}};
const root = {{
  querySelector: (s) => s === "script.predictor-data" ? {{textContent: {json.dumps(data)}}} : output,
  querySelectorAll: () => selects,
}};
globalThis.document = {{getElementById: (id) => id === {json.dumps(uid)} ? root : null}};
"""
    after = """
const first = output.innerHTML;
selects.find((s) => s.name === "zero").value = "3";
listeners.forEach((f) => f());
process.stdout.write(JSON.stringify([first, output.innerHTML]));
"""
    proc = subprocess.run([NODE, "-e", dom + code + after], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    first, changed = json.loads(proc.stdout)
    assert first == render_prediction(sp.predict_for_controls({}), device_bytes=80 * GiB)
    assert changed == render_prediction(
        sp.predict_for_controls({"zero": "3"}), device_bytes=80 * GiB
    )
