"""Record one training step of a data-parallel wrapper, and draw when it computed and communicated.

The wrappers stamp their own events with ``time.perf_counter()`` when ``model.timeline`` is a
:class:`~minitorch_dist.data_parallel.base.Timeline`: each gradient hook, each bucket's launch,
the moment its all-reduce completed (a callback on the work's future), and the synchronisation
at the end of backward. :func:`record_step` adds the phase boundaries. Li et al. 2020 (§3.2.3,
Figure 3) draw the same picture: with overlap, communication runs under the backward pass.
Timings vary from run to run, so notebooks show these figures without comparing them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from torch import nn

from minitorch_dist.data_parallel.base import Timeline
from minitorch_dist.figures import BookFigure  # shows itself as a PNG

__all__ = ["overlap_fraction", "plot_step_timelines", "record_step"]


def record_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Timeline:
    """Run one training step of a wrapper (``DataParallelNaive``/``Bucket``) and time it."""
    if not hasattr(model, "timeline"):
        raise ValueError("record_step needs one of this package's data-parallel wrappers")
    timeline = Timeline()
    model.timeline = timeline
    try:
        optimizer.zero_grad(set_to_none=True)
        timeline.record("forward_start")
        loss = loss_fn(model(inputs), targets)
        timeline.record("backward_start")
        loss.backward()  # hooks, launches and the final synchronisation record themselves
        timeline.record("backward_end")
        optimizer.step()
        timeline.record("step_end")
    finally:
        model.timeline = None
    return timeline


def _phases(tl: Timeline) -> dict[str, float]:
    first = {}
    for kind, _, t in tl.events:
        first.setdefault(kind, t)
    grads = [t for _, t in tl.times("grad")]
    return {**first, "last_grad": max(grads) if grads else first["backward_start"]}


def _comm_intervals(tl: Timeline) -> list[tuple[float, float]]:
    """(start, end) of every all-reduce; the naive wrapper's are the whole synchronisation."""
    launches, done = dict(tl.times("launch")), dict(tl.times("done"))
    if launches:
        end = _phases(tl)["sync_end"]
        return [(t, max(done.get(b, end), t)) for b, t in sorted(launches.items())]
    ph = _phases(tl)
    return [(ph["sync_start"], ph["sync_end"])] if "sync_start" in ph else []


def overlap_fraction(tl: Timeline) -> float:
    """Fraction of the communication time that ran while backward was still computing."""
    ph = _phases(tl)
    lo, hi = ph["backward_start"], ph["last_grad"]
    total = hidden = 0.0
    for a, b in _comm_intervals(tl):
        total += b - a
        hidden += max(0.0, min(b, hi) - max(a, lo))
    return hidden / total if total > 0 else 0.0


def plot_step_timelines(timelines: dict[str, Timeline], title: str = "") -> Figure:
    """One row pair per wrapper: compute (forward, backward, wait, step) above communication."""
    if not timelines:
        raise ValueError("timelines must name at least one Timeline")
    fig = BookFigure(figsize=(9, 1.6 * len(timelines) + 0.9))
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
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7, frameon=False)
    axes[-1].set_xlabel("time since the step began (ms); ticks: a gradient is ready", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
