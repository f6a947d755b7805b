"""Profiling a data-parallel step (minitorch_dist.profiling): the trace is a Chrome trace a
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
