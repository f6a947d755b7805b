"""Figures of chapter 9 and lab 9, drawn from what ran: a schedule's timeline and the
micro-batches each stage keeps alive over time.

Both take events ``(rank, action, start, end)``: the simulator's (:func:`simulate`), the
runtime's executed lists on the logical clock (:func:`logical_events`, deterministic) or its
wall-clock timestamps (:func:`wall_events`, on a GPU). Nothing here is hand-placed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minitorch_dist.figures import COLORS, COLUMN_IN, BookFigure
from minitorch_dist.pipeline.simulate import Event

__all__ = ["OP_COLORS", "in_flight_over_time", "plot_in_flight", "plot_schedule"]

# forward like the parameters it reads, backward like the gradients it makes, W like the
# optimizer's green (it only feeds the update); the bubble is left white
OP_COLORS = {"F": COLORS["params"], "B": COLORS["grads"], "W": COLORS["optimizer"]}


def plot_schedule(
    events: Sequence[Event],
    *,
    title: str | None = None,
    unit: str = "time",
    ax: Axes | None = None,
    labels: bool = True,
) -> Figure:
    """A timeline: one row per rank (rank 0 on top), one box per action, coloured by F/B/W and
    labelled with its micro-batch; a later chunk of an interleaved schedule is hatched."""
    fig = (
        ax.figure
        if ax is not None
        else BookFigure(figsize=(COLUMN_IN, 0.45 * _ranks(events) + 1.2), layout="constrained")
    )
    ax = ax if ax is not None else fig.add_subplot()
    ranks = _ranks(events)
    for rank, a, start, end in events:
        ax.barh(
            rank,
            end - start,
            left=start,
            height=0.8,
            color=OP_COLORS[a.op],
            edgecolor="black",
            linewidth=0.5,
            hatch="//" if a.chunk % 2 else None,
        )
        if labels:
            ax.text(
                (start + end) / 2,
                rank,
                str(a.micro_batch),
                ha="center",
                va="center",
                fontsize=8,
                color="white",
            )
    ax.set_ylim(ranks - 0.5, -0.5)
    ax.set_yticks(range(ranks), [f"rank {r}" for r in range(ranks)])
    ax.set_xlim(
        0,
        max(
            max((e[3] for e in events), default=1.0),
            ax.get_xlim()[1] if ax.has_data() and ax.get_xlim()[0] == 0 else 0,
        ),
    )
    ax.set_xlabel(unit)
    handles = [
        ax.bar(0, 0, color=c, label=op)
        for op, c in OP_COLORS.items()
        if any(e[1].op == op for e in events)
    ]
    ax.legend(
        handles=handles,
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
        ncols=len(handles),
        frameon=False,
    )
    if title:  # wrapped, to leave the legend above the axes' right end its own room
        ax.set_title(textwrap.fill(title, 46), loc="left")
    return fig


def in_flight_over_time(events: Sequence[Event], rank: int) -> tuple[list[float], list[int]]:
    """A step function ``(times, counts)``: chunk-micro-batches ``rank`` keeps alive, rising at
    the end of each F, falling at the end of its B (or of its W, when there are W passes)."""
    mine = sorted((e for e in events if e[0] == rank), key=lambda e: e[2])
    frees = "W" if any(e[1].op == "W" for e in events) else "B"
    times, counts, live = [0.0], [0], 0
    for _, a, _, end in mine:
        live += 1 if a.op == "F" else -1 if a.op == frees else 0
        times.append(end)
        counts.append(live)
    return times, counts


def plot_in_flight(
    events: Sequence[Event],
    *,
    title: str | None = None,
    unit: str = "time",
    memory: Sequence[Sequence[int]] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Live micro-batches per stage over time (one step line per rank), from the same events
    as :func:`plot_schedule`. ``memory`` (per rank, activation bytes after each of its actions,
    as the runtime's tracker recorded them) draws bytes instead, on the same times."""
    fig = ax.figure if ax is not None else BookFigure(figsize=(COLUMN_IN, 3), layout="constrained")
    ax = ax if ax is not None else fig.add_subplot()
    for rank in range(_ranks(events)):
        times, counts = in_flight_over_time(events, rank)
        values = counts if memory is None else [0, *memory[rank]]
        if memory is not None:
            values = [v / 2**10 for v in values]
        ax.step(times, values, where="post", label=f"rank {rank}")
    ax.set_xlabel(unit)
    ax.set_ylabel("live micro-batches" if memory is None else "activation KiB")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def _ranks(events: Sequence[Event]) -> int:
    return 1 + max((e[0] for e in events), default=0)
