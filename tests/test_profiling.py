"""Profiling a data-parallel step (minitorch_dist.data_parallel.profiling): the trace is a Chrome trace a
viewer opens, and it shows one collective per bucket inside the traced step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_dist.data_parallel.profiling import load_trace, plot_trace_phases, profile_ddp_step


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
    step_end = phases["backward"][1]
    assert all(0 < a <= b <= step_end for a, b, _ in phases["collectives"])
    assert 0.0 <= phases["overlap"] <= 1.0 and phases["operators"] > 100
    assert plot_trace_phases(phases, title="test")._repr_png_()[:4] == b"\x89PNG"


def test_load_trace_rejects_other_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(ValueError, match="not a Chrome trace"):
        load_trace(bad)


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
        "collective (gloo thread)",
    ]
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_yticklabels(), *legend.get_texts()]
    for text in texts:
        extent = text.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1, text.get_text()
    assert "2 collectives" in fig.description and "50%" in fig.description
