"""Profiling one data-parallel step: a ``torch.profiler`` trace on emulated ranks, saved in the
Chrome trace format that Perfetto (ui.perfetto.dev) and chrome://tracing open, and read back to
find the step's phases (chapter 5; drawn by
:func:`~minitorch_dist.data_parallel.plots.plot_trace_phases`).

On CPU ranks the trace holds every operator the main thread ran (``cpu_op`` events) and, on the
gloo backend's own threads, each collective (``gloo:all_reduce``). On a GPU the same call with
``ProfilerActivity.CUDA`` adds the kernels of every stream, NCCL's among them.

    summary = profile_ddp_step("trace.json", world_size=2)
    events = load_trace("trace.json")
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from minitorch_dist.checks import check_int
from minitorch_dist.launching import launch

__all__ = ["load_trace", "profile_ddp_step", "trace_phases"]


@contextlib.contextmanager
def _quiet_output() -> Iterator[None]:
    """Silence file descriptors 1 and 2: the profiler's C++ side logs its start and stop there."""
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            ctypes.CDLL(None).fflush(None)  # C's buffers, before the descriptors come back
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)


def _profiled_rank(
    rank: int, world_size: int, path: str, seq_len: int, bucket_cap_mb: float
) -> None:
    from minitorch_dist.data_parallel import DataParallelBucket
    from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch

    torch.manual_seed(0)
    config = LlamaConfig.from_preset("tiny")
    model = DataParallelBucket(Llama(config), bucket_cap_mb=bucket_cap_mb)
    inputs, targets = synthetic_batch(config.vocab_size, 2, seq_len, seed=rank)
    cross_entropy(model(inputs), targets).backward()  # warm-up: allocations, gloo's first calls
    for p in model.parameters():
        p.grad = None
    with _quiet_output(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            loss = cross_entropy(model(inputs), targets)
        with record_function("backward"):
            loss.backward()
    if rank == 0:
        prof.export_chrome_trace(path)
        trace = json.loads(Path(path).read_text())
        for key in ("host_name", "traceName"):  # no machine names or paths in a shipped file
            trace.pop(key, None)
        Path(path).write_text(json.dumps(trace))
    return len(model.buckets)


def profile_ddp_step(
    path: str | Path, *, world_size: int = 2, seq_len: int = 64, bucket_cap_mb: float = 0.05
) -> dict[str, Any]:
    """Profile one step of chapter 5's bucketed data parallelism on the tiny Llama (after one
    warm-up step) on ``world_size`` emulated ranks; write rank 0's trace to ``path`` (Chrome
    trace JSON) and return :func:`trace_phases` of it, with the number of ``buckets``."""
    check_int("world_size", world_size, minimum=2)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buckets = launch(_profiled_rank, world_size, str(path), seq_len, bucket_cap_mb)[0]
    return {**trace_phases(load_trace(path)), "buckets": buckets}


def load_trace(path: str | Path) -> list[dict[str, Any]]:
    """The complete events (``"ph": "X"``) of a Chrome trace file, sorted by start time; a
    ValueError if the file is not a Chrome trace."""
    trace = json.loads(Path(path).read_text())
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError(f"{path} is not a Chrome trace: no 'traceEvents' list")
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    for e in events:
        missing = {"name", "ts", "dur", "pid", "tid"} - e.keys()
        if missing:
            raise ValueError(f"{path}: event {e.get('name')!r} lacks {sorted(missing)}")
    return sorted(events, key=lambda e: e["ts"])


def trace_phases(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Times in microseconds from a traced step: the ``forward`` span; the ``backward`` compute,
    from its annotation's start to the end of the last autograd event
    (``autograd::engine::evaluate_function``, the last gradient hook included); the ``wait``
    after it, to the annotation's end (the final callback waiting on every bucket); each
    collective (events whose name starts with ``gloo:`` or ``nccl:``) as ``(start, end)``
    relative to the forward's start; and the share of communication time that ran under the
    backward compute (``overlap``), measured as ``timeline.overlap_fraction`` measures it."""
    spans = {e["name"]: e for e in events if e["name"] in ("forward", "backward")}
    if spans.keys() != {"forward", "backward"}:
        raise ValueError(f"trace lacks forward/backward annotations, found {sorted(spans)}")
    t0 = spans["forward"]["ts"]
    comm = [
        (e["ts"] - t0, e["ts"] + e["dur"] - t0, e["name"])
        for e in events
        if e["name"].startswith(("gloo:", "nccl:"))
    ]
    b_start = spans["backward"]["ts"] - t0
    b_end = b_start + spans["backward"]["dur"]  # the annotation: the final wait included
    autograd = [
        e["ts"] + e["dur"] - t0
        for e in events
        if e["name"].startswith("autograd::engine::evaluate_function")
        and b_start <= e["ts"] - t0 <= b_end
    ]
    compute_end = max(autograd, default=b_end)
    total = sum(end - start for start, end, _ in comm)
    under = sum(max(0.0, min(end, compute_end) - max(start, b_start)) for start, end, _ in comm)
    return {
        "forward": (0.0, float(spans["forward"]["dur"])),
        "backward": (float(b_start), float(compute_end)),
        "wait": (float(compute_end), float(b_end)),
        "collectives": comm,
        "overlap": under / total if total else 0.0,
        "operators": sum(1 for e in events if e.get("cat") == "cpu_op"),
        "threads": len({e["tid"] for e in events if e["name"].startswith(("gloo:", "nccl:"))}),
    }
