"""Profiling a data-parallel step (minitorch_dist.data_parallel.profiling): the trace is a Chrome trace a
viewer opens, and it shows one collective per bucket inside the traced step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_dist.data_parallel.plots import plot_trace_phases
from minitorch_dist.data_parallel.profiling import load_trace, profile_ddp_step, trace_phases


def test_trace_of_a_ddp_step(tmp_path: Path) -> None:
    """Catches a trace that is not Chrome JSON, one that names the machine, or a profiler that
    misses the gloo thread's collectives: one all-reduce per bucket, all inside the step."""
    path = tmp_path / "ddp.json"
    phases = profile_ddp_step(path, world_size=2)
    raw = json.loads(path.read_text())
    assert (
        isinstance(raw["traceEvents"], list) and "host_name" not in raw and "traceName" not in raw
    )
    events = load_trace(path)
    assert all({"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys() for e in events)
    assert sum(e["name"] == "gloo:all_reduce" for e in events) == phases["buckets"] > 1
    assert len(phases["collectives"]) == phases["buckets"]
    step_end = phases["wait"][1]
    assert phases["backward"][0] < phases["backward"][1] == phases["wait"][0] <= step_end
    assert all(0 < a <= b <= step_end for a, b, _ in phases["collectives"])
    assert 0.0 <= phases["overlap"] <= 1.0 and phases["operators"] > 100
    assert phases["threads"] >= 1
    assert plot_trace_phases(phases, title="test")._repr_png_()[:4] == b"\x89PNG"


def test_load_trace_rejects_other_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(ValueError, match="not a Chrome trace"):
        load_trace(bad)


def _event(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid, "cat": cat}


def test_overlap_ends_with_the_last_autograd_event_not_the_final_wait() -> None:
    """Catches the overlap that was 100 % by construction: the ``backward`` annotation includes
    the final callback that waits on every bucket, so any collective lies inside it. The
    backward compute ends with the last autograd event (the last gradient hook), as
    ``timeline.overlap_fraction`` ends it; a collective that runs after it is exposed."""
    events = [
        _event("forward", 0, 1000, cat="user_annotation"),
        _event("backward", 1000, 9000, cat="user_annotation"),  # ends at 10000: the wait too
        _event("autograd::engine::evaluate_function: MmBackward0", 1100, 2900),
        _event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 4000, 0),
        _event("gloo:all_reduce", 3000, 2000, tid=2, cat="user_annotation"),  # 1000 hidden
        _event("gloo:all_reduce", 4000, 6000, tid=3, cat="user_annotation"),  # 0 hidden
    ]
    phases = trace_phases(sorted(events, key=lambda e: e["ts"]))
    assert phases["backward"] == (1000.0, 4000.0) and phases["wait"] == (4000.0, 10000.0)
    assert phases["overlap"] == pytest.approx(1000 / 8000)
    assert phases["threads"] == 2


PHASES = {
    "forward": (0.0, 3000.0),
    "backward": (3100.0, 9000.0),
    "collectives": [(5000.0, 6000.0, "gloo:all_reduce"), (7000.0, 8800.0, "gloo:all_reduce")],
    "overlap": 0.5,
}


def test_trace_figure_has_title_labels_and_legend_inside_the_picture() -> None:
    """Catches the trace figure whose title and legend sat above the picture and whose
    "communication" tick label was cut at its left edge: every text is drawn inside it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot_trace_phases(PHASES)
    FigureCanvasAgg(fig).draw()
    (ax,) = fig.axes
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    legend = fig.legends[0] if fig.legends else ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "forward",
        "backward",
        "collective (gloo threads)",
    ]
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_yticklabels(), *legend.get_texts()]
    for text in texts:
        extent = text.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1, text.get_text()
    assert "2 collectives" in fig.description and "50%" in fig.description
