"""Chapter 5's drawings of one data-parallel step: the wrappers' own timelines
(:mod:`~minitorch_dist.data_parallel.timeline`) and a profiler's trace
(:mod:`~minitorch_dist.data_parallel.profiling`). Not imported by the package's ``__init__``:
``import minitorch_dist.data_parallel`` does not import matplotlib.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from minitorch_dist.data_parallel.timeline import (
    Timeline,
    _comm_intervals,
    _phases,
    overlap_fraction,
)
from minitorch_dist.figures import COLUMN_IN, BookFigure  # shows itself as a PNG

__all__ = ["plot_step_timelines", "plot_trace_phases"]


def plot_step_timelines(timelines: dict[str, Timeline], title: str = "") -> Figure:
    """One row pair per wrapper: compute (forward, backward, wait, step) above communication."""
    if not timelines:
        raise ValueError("timelines must name at least one Timeline")
    fig = BookFigure(figsize=(COLUMN_IN, 1.6 * len(timelines) + 0.9))
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False)[:, 0]
    colors = {"forward": "#4c72b0", "backward": "#55a868", "wait": "#c44e52", "step": "#8172b2"}
    for ax, (name, tl) in zip(axes, timelines.items()):
        ph = _phases(tl)
        t0 = ph["forward_start"]
        ms = lambda t, t0=t0: 1e3 * (t - t0)  # noqa: E731 - time since the step began, in ms
        spans = [
            ("forward", ph["forward_start"], ph["backward_start"]),
            ("backward", ph["backward_start"], ph["last_grad"]),
            ("wait", ph.get("sync_start", ph["last_grad"]), ph.get("sync_end", ph["last_grad"])),
            ("step", ph["backward_end"], ph["step_end"]),
        ]
        for label, a, b in spans:
            ax.broken_barh([(ms(a), ms(b) - ms(a))], (1.1, 0.8), color=colors[label], label=label)
        for _, t in tl.times("grad"):
            ax.plot([ms(t)] * 2, [1.1, 1.9], color="black", lw=0.6)
        comm = _comm_intervals(tl)
        lane = 0.8 / max(1, len(comm))  # one thin lane per all-reduce, first at the top
        for k, (a, b) in enumerate(comm):
            y = 0.9 - (k + 1) * lane
            ax.broken_barh([(ms(a), ms(b) - ms(a))], (y, lane * 0.85), color="#dd8452")
        ax.set_yticks([0.5, 1.5], ["all-reduce", "compute"])
        ax.set_ylim(0, 2)
        messages = len(tl.times("launch")) or len(tl.times("grad"))  # naive: one per tensor
        ax.set_title(
            f"{name}: {messages} all-reduces, "
            f"{overlap_fraction(tl):.0%} of their time under backward",
            fontsize=9,
        )
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Patch(color="#dd8452"))
    labels.append("all-reduce (launch to completion)")
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    axes[-1].set_xlabel("time since the step began (ms); ticks: a gradient is ready", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def plot_trace_phases(phases: dict[str, Any], title: str = "") -> BookFigure:
    """Draw a traced step from :func:`trace_phases`: the main thread's forward and backward above,
    one lane per collective below, in milliseconds since the forward began. The title (``title``,
    else a default), the legend and both axes' labels sit inside the picture (constrained
    layout), so none is cut off."""
    fig = BookFigure(figsize=(6.88, 3.0), layout="constrained")  # the column: shown 1:1
    ax = fig.subplots()
    colors = {"forward": "#4c72b0", "backward": "#55a868", "wait": "#c44e52"}
    for label in [k for k in ("forward", "backward", "wait") if k in phases]:
        a, b = phases[label]
        ax.broken_barh([(a / 1e3, (b - a) / 1e3)], (1.1, 0.8), color=colors[label], label=label)
    comm = phases["collectives"]
    lane = 0.8 / max(1, len(comm))
    for k, (a, b, _) in enumerate(comm):
        label = "collective (gloo threads)" if k == 0 else None
        y = 0.9 - (k + 1) * lane
        ax.broken_barh([(a / 1e3, (b - a) / 1e3)], (y, lane * 0.85), color="#dd8452", label=label)
    ax.set_yticks([0.5, 1.5], ["communication\n(gloo threads)", "main thread\n(compute)"])
    ax.set_ylim(0, 2)
    ax.set_xlabel("time since the forward began (ms), from the profiler's trace")
    ax.set_ylabel("thread")
    ax.set_title(title or "One traced data-parallel step: compute and communication")
    fig.legend(loc="outside lower center", ncol=3, frameon=False)
    fig.description = (
        f"{ax.get_title()}: a timeline in ms of the main thread's forward and backward above "
        f"and {len(comm)} collectives on the gloo threads below; "
        f"{phases['overlap']:.0%} of the communication time ran under the backward compute"
    )
    return fig
