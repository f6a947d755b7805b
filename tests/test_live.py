"""The live widgets' one function (``minitorch_dist.viz.live_result``) against the predictor's and
the planner's own functions, its refusals, and the HTML the chapters display."""

from __future__ import annotations

import base64
import html
import json
import random
import re

import pytest

from minitorch_dist.figures import COLORS
from minitorch_dist.memory import predict
from minitorch_dist.planner import Cluster, ParallelConfig, peak_memory, plan, step_time, validate
from minitorch_dist.viz import live, live_result
from minitorch_dist.viz.live import controls, defaults, live_steps
from minitorch_dist.viz.live_html import COLORS as LIVE_COLORS
from minitorch_dist.viz.live_html import live_html, render_live


def _random_inputs(kind: str, rng: random.Random) -> dict:
    return {name: rng.choice(choices) for name, (_, choices, _) in controls(kind).items()}


@pytest.mark.parametrize("seed", range(6))
def test_predictor_equals_predict(seed):
    v = _random_inputs("predictor", random.Random(seed))
    got = live_result("predictor", v)
    knobs = {k: v[k] for k in v if k != "device_gib"}
    want = predict(**knobs)
    assert got["bytes"] == want
    assert got["device_bytes"] == v["device_gib"] * 2**30
    assert got["fits"] == (want["total"] <= got["device_bytes"])
    assert [r["bytes"] for r in got["rows"]] == [want[r["part"]] for r in got["rows"]]
    assert json.loads(json.dumps(got)) == got  # what the page writes is what Python returns


def test_predictor_defaults_are_the_notebook_widgets():
    assert live_result("predictor")["bytes"] == predict("llama-3-8b", 4096, 1, "none", 0, 8)
    assert defaults("predictor")["dp"] == 8 and defaults("planner")["model"] == "llama-3-70b"


@pytest.mark.parametrize(
    "inputs",
    [
        {},
        {"tp": 4, "pp": 2, "zero": 3},
        {"model": "llama-3-8b", "gpus": 8, "tp": 2, "pp": 1},
        {"tp": 16},
        {"cp": 2, "v": 2, "recompute": "full", "offload": True},
    ],
)
def test_planner_equals_plan(inputs):
    got = live_result("planner", inputs)
    v = {**defaults("planner"), **inputs}
    cluster = Cluster.from_preset(v["cluster"], v["gpus"])
    kw = {"global_batch": v["global_batch"], "seq_len": v["seq_len"]}
    result = plan(v["model"], cluster, **kw)
    knobs = ("tp", "sp", "cp", "pp", "v", "ep", "zero", "recompute", "micro_batch", "offload")
    config = ParallelConfig(
        dp=max(1, v["gpus"] // (v["tp"] * v["pp"] * v["cp"])), **{k: v[k] for k in knobs}
    )
    assert got["label"] == config.label() and got["fitting"] == len(result.fitting)
    assert [t["label"] for t in got["top"]] == [r.config.label() for r in result.fitting[:5]]
    assert [t["total"] for t in got["top"]] == [r.time.total for r in result.fitting[:5]]
    try:
        validate(result.model, cluster, config, **kw)
    except ValueError as err:
        assert got["valid"] is False and got["reason"] == str(err)
        return
    memory = peak_memory(result.model, config, **kw)
    assert got["valid"] is True and got["memory"]["total"] == memory["total"]
    assert got["time"]["total"] == step_time(result.model, cluster, config, **kw).total
    assert got["rank"] == (result.rank_of(config) if got["fits"] else None)


@pytest.mark.parametrize(
    "kind, inputs, message",
    [
        ("predictor", {"zero_stage": 4}, "control zero_stage must be one of 0, 1, 2, 3"),
        ("predictor", {"offload": 1}, "control offload must be one of False, True"),
        ("predictor", {"dp": "8"}, "control dp"),
        ("predictor", {"colour": 1}, "unknown controls ['colour']"),
        ("planner", {"tp": 3}, "control tp must be one of"),
        ("planner", [1, 2], "inputs must be a dict"),
        ("oracle", {}, "kind must be one of predictor, planner"),
    ],
)
def test_bad_inputs_give_the_message_not_a_crash(kind, inputs, message):
    got = live_result(kind, inputs)
    assert set(got) == {"kind", "error"} and message in got["error"], got
    assert "live-error" in render_live(got)


def test_html_carries_the_contract():
    for kind, initial in (("predictor", {"preset": "llama-3-70b", "dp": 64}), ("planner", {})):
        page = live_html(kind, **initial)
        attrs = dict(re.findall(r'data-(live|state|inputs|result)="([^"]*)"', page)[:4])
        assert attrs["live"] == kind and attrs["state"] == "static"
        inputs = json.loads(html.unescape(attrs["inputs"]))
        assert inputs == {**defaults(kind), **initial}
        assert json.loads(html.unescape(attrs["result"])) == live_result(kind, inputs)
        names = re.findall(r'<select data-control="(\w+)"', page)
        assert names == list(controls(kind))
        selected = re.findall(r'<option value="([^"]*)" selected>', page)
        assert [json.loads(html.unescape(s)) for s in selected] == list(inputs.values())
    with pytest.raises(ValueError, match="control dp"):
        live_html("predictor", dp=3)


@pytest.mark.parametrize("kind", ["predictor", "planner"])
def test_every_option_shows_its_value(kind):
    """0 and 1 are numbers ("micro-batch 1", "ZeRO stage 0"); only a yes/no control says yes or
    no. (A label lookup keyed by True once showed 1 as "yes" and 0 as "no".)"""
    page = live_html(kind)
    selects = re.findall(
        r'<span[^>]*>([^<]*)</span><select data-control="(\w+)">(.*?)</select>', page
    )
    assert [name for _, name, _ in selects] == list(controls(kind))
    for label, name, options in selects:
        assert html.unescape(label) == controls(kind)[name][0]
        shown = [
            (json.loads(html.unescape(v)), html.unescape(t))
            for v, t in re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', options)
        ]
        assert [v for v, _ in shown] == list(controls(kind)[name][1])
        for value, text in shown:
            if type(value) is bool:
                want = "yes" if value else "no"
            elif type(value) is int:
                want = f"{value:,}"
            else:
                want = value
            assert text == want, f"{kind} {name}: option {value!r} shows {text!r}"
    assert live.option_text(1) == "1" and live.option_text(0) == "0"
    assert live.option_text(True) == "yes" and live.option_text(16384) == "16,384"


def test_colors_are_the_books():
    assert LIVE_COLORS == COLORS


def test_the_pages_python_runs_from_the_zip_alone(tmp_path):
    """What the page's Pyodide gets: the zip of write_assets, without torch, numpy, matplotlib or
    site-packages (python -S), answers as this process does."""
    import subprocess
    import sys
    import zipfile

    from minitorch_dist.viz.live_html import write_assets

    script, archive, data = write_assets(tmp_path / "live")
    assert "loadPyodide" in script.read_text()
    head = '(self.minitorchLiveFiles = self.minitorchLiveFiles || {})["minitorch_dist.zip"] = '
    entry = json.loads(data.read_text().removeprefix(head).removesuffix(";\n"))
    assert base64.b64decode(entry["base64"]) == archive.read_bytes()  # what file:// pages read
    zipfile.ZipFile(archive).extractall(tmp_path / "py")
    cases = [
        ("predictor", {"preset": "llama-3-70b", "zero_stage": 3, "offload": True}),
        ("planner", {"model": "llama-3-8b", "gpus": 16, "tp": 2, "pp": 2}),
        ("planner", {"tp": 3}),
    ]
    code = (
        f"import json, sys; sys.path.insert(0, {str(tmp_path / 'py')!r})\n"
        "from minitorch_dist.viz import live_result\n"
        f"print(json.dumps([live_result(k, i) for k, i in {cases!r}]))\n"
        "assert not {'torch', 'numpy', 'matplotlib'} & set(sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == [json.loads(json.dumps(live_result(k, i))) for k, i in cases]


@pytest.mark.parametrize(
    "problem",
    [
        ("llama-3-70b", "dgx-h100", 64, 256, 4096),
        ("llama-3-8b", "dgx-h100", 16, 64, 8192),
        ("mixtral-8x7b", "dgx-h100", 32, 128, 4096),
    ],
)
def test_the_ranking_in_parts_is_plans(problem, monkeypatch):
    """The page ranks a new problem one (tp, pp) part at a time: the rows, ranked, are plan()'s,
    in plan()'s order; the parts cover every layout pair once, and counting goes up."""
    monkeypatch.setattr(live, "_plans", type(live._plans)())
    model, cluster, gpus, batch, seq = problem
    steps = list(live._plan_parts(*problem))
    want = plan(model, Cluster.from_preset(cluster, gpus), global_batch=batch, seq_len=seq)
    assert live._plans[problem].rows == want.rows
    assert [k for k, _, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) > 3
    assert {n for _, n, _ in steps} == {len(steps)} and steps[-1][2] == len(want.rows)
    assert list(live._plan_parts(*problem)) == []  # cached: nothing left to rank


def test_live_steps_end_with_live_result(monkeypatch):
    monkeypatch.setattr(live, "_plans", type(live._plans)())
    inputs = {"model": "llama-3-8b", "gpus": 16, "tp": 2, "pp": 2}
    steps = list(live_steps("planner", inputs))
    assert len(steps) > 2 and all(set(s) == {"done", "parts", "configurations"} for s in steps[:-1])
    assert steps[-1] == {"result": live_result("planner", inputs)}
    assert list(live_steps("planner", {**inputs, "tp": 4})) == [
        {"result": live_result("planner", {**inputs, "tp": 4})}
    ]  # same problem: no ranking again
    for kind, bad in (("planner", {"tp": 3}), ("predictor", {"dp": 8}), ("oracle", {})):
        assert list(live_steps(kind, bad)) == [{"result": live_result(kind, bad)}]


def test_plans_cache_keeps_the_latest(monkeypatch):
    monkeypatch.setattr(live, "_plans", type(live._plans)())
    monkeypatch.setattr(live, "PLANS", 2)
    for gpus in (8, 16, 8, 32):
        live._plan("llama-3-8b", "dgx-h100", gpus, 64, 4096)
    assert [p[2] for p in live._plans] == [8, 32]


def test_the_pages_script_parses_and_needs_no_network(tmp_path):
    """live.js is valid JavaScript (node --check, where node is installed), names no host, and
    has no "file:// cannot start" excuse left: it runs from file:// (the browser check drives it)."""
    import shutil
    import subprocess

    from minitorch_dist.viz.live_js import LIVE_JS

    assert "http://" not in LIVE_JS and "https://" not in LIVE_JS
    assert "file:" not in LIVE_JS and "new Worker(" in LIVE_JS
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    (tmp_path / "live.js").write_text(LIVE_JS)
    run = subprocess.run(
        [node, "--check", str(tmp_path / "live.js")], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
