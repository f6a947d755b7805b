"""The figures of chapter 1 (``minitorch_dist.memory.plots``), the per-rank memory model
(``minitorch_dist.memory.predict``) and the predictor widget (``minitorch_dist.viz``), without a
frontend.

The predictor's widget is driven the way a reader drives it -- by setting control values -- and
what it displays is read back from its HTML and compared with :func:`predict`, which in turn must
equal the closed forms of ``minitorch_dist.memory``. Figures are rendered with matplotlib's Agg
backend (no display).
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_dist.course.browser_check_page import undescribed
from minitorch_dist.memory import llama_activation_bytes, model_state_bytes, predict
from minitorch_dist.memory.plots import (
    budget_table,
    plot_activation_growth,
    plot_breakdown,
    plot_budget,
    plot_predictions,
    plot_timeline,
)
from minitorch_dist.models import LlamaConfig, preset_names
from minitorch_dist.viz import render_prediction

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30


def displayed(html: str) -> dict[str, int]:
    """The bytes per category that the predictor's HTML shows (its data-bytes attributes)."""
    rows = re.findall(r'data-category="(\w+)" data-bytes="(\d+)"', html)
    return {category: int(nbytes) for category, nbytes in rows}


def png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=50)
    return buffer.getvalue()


# -- predict: the pure function behind the widget ----------------------------------------------
@pytest.mark.parametrize(
    ("preset", "seq", "b", "recompute", "zero", "dp", "recipe"),
    [
        ("llama-2-7b", 4096, 1, "none", 0, 1, "mixed"),
        ("llama-3-70b", 8192, 2, "full", 3, 64, "mixed"),
        ("llama-3-8b", 2048, 4, "selective", 2, 8, "mixed_fp32_grads"),
        ("tiny", 64, 4, "none", 1, 4, "fp32"),
    ],
)
def test_predict_is_model_states_plus_activations(preset, seq, b, recompute, zero, dp, recipe):
    """Catches a predictor that drifts from the package's formulas (a category dropped, ZeRO
    applied to activations, 16-bit activations for the fp32 recipe)."""
    config = LlamaConfig.from_preset(preset)
    got = predict(preset, seq, b, recompute, zero, dp, recipe=recipe)
    states = model_state_bytes(config.num_params(), zero_stage=zero, dp=dp, recipe=recipe)
    acts = llama_activation_bytes(
        config,
        seq_len=seq,
        micro_batch=b,
        dtype_bytes=4 if recipe == "fp32" else 2,
        recompute=recompute,
    )
    assert got == {
        "params": states["params"],
        "grads": states["grads"],
        "optimizer": states["optimizer"],
        "activations": acts,
        "total": states["total"] + acts,
    }
    assert predict(config, seq, b, recompute, zero, dp, recipe=recipe) == got  # config or name


def test_predict_rejects_unknown_settings():
    """Catches a typo in a preset, recipe or policy silently giving a number."""
    with pytest.raises(ValueError, match="unknown preset"):
        predict("llama-9-7b", 1024, 1)
    with pytest.raises(ValueError, match="recipe must be one of"):
        predict("tiny", 64, 1, recipe="fp8")
    with pytest.raises(ValueError, match="recompute must be one of"):
        predict("tiny", 64, 1, recompute="some")
    with pytest.raises(ValueError, match="zero_stage must be one of"):
        predict("tiny", 64, 1, zero_stage=4)


def test_render_prediction_shows_every_category_and_the_verdict():
    """Catches a display that rounds the numbers it claims to show, or a wrong fits verdict."""
    result = predict("llama-3-8b", 4096, 1, "full", 3, 8)
    html = render_prediction(result, device_bytes=80 * GiB)
    assert displayed(html) == result
    assert f"{result['total']:,}" in html
    assert 'data-fits="true"' in html
    assert 'data-fits="false"' in render_prediction(result, device_bytes=result["total"] - 1)
    assert "data-fits" not in render_prediction(result)


def test_package_imports_without_ipywidgets():
    """Catches a top-level ``import ipywidgets``: the package must import (and predict) without
    it; only building the widget needs it."""
    code = (
        "import sys; sys.modules['ipywidgets'] = None\n"
        "import minitorch_dist.viz as viz\n"
        "from minitorch_dist.memory import predict\n"
        "print(predict('tiny', 64, 1)['total'] > 0)\n"
        "try:\n    viz.memory_predictor()\nexcept ImportError:\n    print('lazy')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "lazy"]


# -- the widget, driven like a reader drives it -----------------------------------------------
def test_widget_updates_when_controls_change():
    """Catches a callback that is not wired to every control, or that shows stale numbers: after
    each change the displayed bytes must equal predict(...) of the current control values."""
    pytest.importorskip("ipywidgets")
    from minitorch_dist.viz import memory_predictor

    predictor = memory_predictor(preset="llama-2-7b", seq_len=4096, micro_batch=1, dp=8)
    shown = displayed(predictor.view.value)
    assert shown == predictor.result == predict("llama-2-7b", 4096, 1, "none", 0, 8)
    assert set(predictor.controls["preset"].options) == set(preset_names())
    changes = [
        ("zero_stage", 3),
        ("dp", 64),
        ("preset", "llama-3-70b"),
        ("seq_len", 8192),
        ("micro_batch", 2),
        ("recompute", "full"),
        ("recipe", "mixed_fp32_grads"),
    ]
    for name, value in changes:
        before = displayed(predictor.view.value)
        predictor.controls[name].value = value  # what a click does
        now = displayed(predictor.view.value)
        assert now != before, f"changing {name} did not change the display"
        assert now == predict(**predictor.values()) == predictor.result, name
    assert predictor.values() == {
        "preset": "llama-3-70b",
        "seq_len": 8192,
        "micro_batch": 2,
        "recompute": "full",
        "zero_stage": 3,
        "dp": 64,
        "recipe": "mixed_fp32_grads",
    }
    total = predictor.result["total"]
    predictor.controls["device_gib"].value = total / GiB / 2  # half what it needs: no fit
    assert 'data-fits="false"' in predictor.view.value
    predictor.set(device_gib=2 * total / GiB)
    assert 'data-fits="true"' in predictor.view.value
    with pytest.raises(ValueError, match="unknown controls"):
        predictor.set(gpus=8)
    bundle = predictor._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


# -- figures ----------------------------------------------------------------------------------
def _timeline() -> list[tuple[int, str, dict[str, int]]]:
    """A small hand-made timeline: forward builds activations, backward trades them for grads."""

    def sample(i: int, phase: str, acts: int, grads: int, optim: int = 0) -> tuple:
        return (
            i,
            phase,
            {"params": 400, "grads": grads, "optimizer": optim, "activations": acts, "other": 16},
        )

    return (
        [sample(0, "forward", 0, 0)]
        + [sample(i, "forward", 100 * i, 0) for i in range(1, 6)]
        + [sample(i, "backward", 100 * (11 - i), 80 * (i - 5)) for i in range(6, 11)]
        + [sample(i, "optimizer", 0, 400, 80 * (i - 10)) for i in range(11, 16)]
        + [sample(15, "idle", 0, 400, 400)]
    )


def test_figures_render_headless_and_deterministically():
    """Catches a figure that needs a display or pyplot state, or that changes between runs
    (which would churn the committed notebooks' images)."""
    models = {"1B": 10**9, "llama-2-7b": LlamaConfig.from_preset("llama-2-7b").num_params()}
    predicted = {"params": 400, "grads": 400, "optimizer": 800, "activations": 1000}
    measured = {"params": 400, "grads": 400, "optimizer": 804, "activations": 1000}
    results = {f"ZeRO-{z}": predict("llama-3-8b", 4096, 1, "none", z, 8) for z in (0, 3)}
    makers = {
        "timeline": lambda: plot_timeline(_timeline()),
        "timeline_from_result": lambda: plot_timeline({"timeline": _timeline()}),
        "breakdown": lambda: plot_breakdown(predicted, measured),
        "budget": lambda: plot_budget(models, device_bytes=80 * GiB),
        "predictions": lambda: plot_predictions(results, device_bytes=80 * GiB),
        "growth": lambda: plot_activation_growth(
            [512, 1024, 2048], {"b = 1": [1e9, 2e9, 4e9]}, references={"16Ψ": 3e9}
        ),
    }
    for name, make in makers.items():
        fig = make()
        first = png(fig)
        assert first.startswith(b"\x89PNG"), name
        assert fig.axes and fig.axes[0].get_title(), f"{name}: no titled axes"
        assert png(make()) == first, f"{name} is not deterministic"
        assert fig._repr_png_().startswith(b"\x89PNG"), f"{name}: Jupyter cannot show it"
        assert not undescribed(fig.description), f"{name}: no description {fig.description!r}"


def test_timeline_figure_labels_phases_and_peak():
    """Catches a timeline whose phases or peak are not marked where the data put them."""
    fig = plot_timeline(_timeline())
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert [t for t in texts if t in ("forward", "backward", "optimizer")] == [
        "forward",
        "backward",
        "optimizer",
    ]
    assert any(t.startswith("peak ") for t in texts)
    with pytest.raises(ValueError, match="empty"):
        plot_timeline([])


def test_breakdown_figure_prints_the_ratios():
    """Catches ratios computed the wrong way round (predicted / measured)."""
    fig = plot_breakdown(
        {"params": 100, "grads": 100, "optimizer": 200, "activations": 50},
        {"params": 100, "grads": 100, "optimizer": 202, "activations": 50},
    )
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["1.0000", "1.0000", "1.0100", "1.0000"]


def test_budget_table_is_markdown_with_computed_rows():
    """Catches a table whose cells disagree with model_state_bytes, or malformed markdown."""
    n = LlamaConfig.from_preset("llama-3-8b").num_params()
    table = budget_table({"llama-3-8b": n}, device_bytes=80 * GiB)
    header, rule, row = table.splitlines()
    assert header.count("|") == rule.count("|") == row.count("|") == 6
    assert "16Ψ" in header and "20Ψ" in header
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{n:,}"
    assert cells[4] == str(-(-model_state_bytes(n)["total"] // (80 * GiB)))
