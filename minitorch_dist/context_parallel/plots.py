"""Chapter 8's figures, drawn only from what they are given: positions from
:func:`shard_positions`, work per rank and per ring step from :func:`measure_work` (the
:class:`WorkCounter` of real runs), bytes from the estimator or the memory tracker. Kept apart
from the numbers: ``import minitorch_dist.context_parallel`` does not import matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib import colormaps

from minitorch_dist.figures import COLUMN_IN, BookFigure

__all__ = [
    "plot_activations_vs_seq",
    "plot_layouts",
    "plot_memory",
    "plot_ring_schedule",
    "plot_work",
]


def _rank_colours(cp: int) -> list:
    cmap = colormaps["tab10"]
    return [cmap(r % 10) for r in range(cp)]


def plot_layouts(positions: Mapping[str, Sequence[Sequence[int]]]) -> BookFigure:
    """One strip per layout: token positions 0..s-1 coloured by the rank that holds them.
    ``positions[layout][r]`` lists rank r's positions (``shard_positions``)."""
    fig = BookFigure(figsize=(COLUMN_IN, 1.1 + 0.7 * len(positions)), layout="constrained")
    ax = fig.add_subplot()
    for row, per_rank in enumerate(positions.values()):
        colours = _rank_colours(len(per_rank))
        for rank, pos in enumerate(per_rank):
            pos = [int(p) for p in pos]
            starts = [p for i, p in enumerate(pos) if i == 0 or pos[i - 1] != p - 1]
            for start in starts:  # one bar per contiguous piece the rank holds
                length = next(
                    (i for i, p in enumerate(pos[pos.index(start) :]) if p != start + i),
                    len(pos) - pos.index(start),
                )
                ax.barh(row, length, left=start, color=colours[rank], edgecolor="white", height=0.7)
                ax.text(start + length / 2, row, str(rank), ha="center", va="center", fontsize=8)
    ax.set_yticks(range(len(positions)), list(positions))
    ax.invert_yaxis()
    ax.set_xlabel("token position (the number on a piece: the rank that holds it)")
    s = 1 + max(int(p) for per_rank in positions.values() for pos in per_rank for p in pos)
    fig.description = (
        f"Token positions 0 to {s - 1} split over ranks by each layout "
        f"({', '.join(positions)}): one strip per layout, each piece coloured and numbered by "
        "the rank that holds it."
    )
    return fig


def plot_work(work: Mapping[str, Sequence[float]], *, title: str = "") -> BookFigure:
    """Grouped bars: causal attention work per rank (half-chunk block units) for each layout,
    with each layout's mean as a dashed line."""
    fig = BookFigure(figsize=(COLUMN_IN, 3.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(work)
    for i, (layout, units) in enumerate(work.items()):
        xs = [r + (i - (len(work) - 1) / 2) * width for r in range(len(units))]
        bars = ax.bar(xs, units, width=width, label=layout)
        ax.axhline(sum(units) / len(units), color=bars.patches[0].get_facecolor(), ls="--", lw=1)
    ax.set_xticks(range(len(next(iter(work.values())))))
    ax.set_xlabel("rank")
    ax.set_ylabel("attention work (half-chunk blocks)")
    ax.set_title(title)
    ax.legend()
    return fig


def plot_ring_schedule(
    per_step: Mapping[str, Sequence[Sequence[float]]], *, title: str = ""
) -> BookFigure:
    """One panel per layout, rank x ring step: the number in a cell is the rank whose K/V block
    the rank holds at that step, ``(r - step) mod cp``; the shade is the work it computed on
    it (``per_step[layout][r]``, from the WorkCounter)."""
    cp = len(next(iter(per_step.values())))
    top = max(max(max(row) for row in grid) for grid in per_step.values())
    fig = BookFigure(
        figsize=(min(COLUMN_IN, 1.0 + 2.2 * len(per_step) + 0.3 * cp), 1.2 + 0.4 * cp),
        layout="constrained",
    )
    axes = fig.subplots(1, len(per_step), squeeze=False)[0]
    for ax, (layout, grid) in zip(axes, per_step.items()):
        image = ax.imshow([list(row) for row in grid], cmap="Blues", vmin=0, vmax=1.5 * top)
        for r in range(cp):
            for step in range(cp):
                ax.text(step, r, str((r - step) % cp), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(cp))
        ax.set_yticks(range(cp))
        ax.set_xlabel("ring step")
        ax.set_ylabel("rank")
        ax.set_title(layout)
    fig.colorbar(image, ax=list(axes), label="work at this step")
    if title:
        fig.suptitle(title)
    return fig


def plot_activations_vs_seq(
    seq_lens: Sequence[int],
    per_cp: Mapping[int, Sequence[float]],
    *,
    budget: float | None = None,
    title: str = "",
) -> BookFigure:
    """Activation bytes per rank (GiB) against sequence length, one line per cp; ``budget``
    (GiB) as a horizontal line (a GPU's memory)."""
    fig = BookFigure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for cp, values in per_cp.items():
        ax.plot(seq_lens, [v / 2**30 for v in values], marker="o", label=f"cp={cp}")
    if budget is not None:
        ax.axhline(budget, color="black", ls="--", lw=1, label=f"{budget:g} GiB")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("activations per rank (GiB)")
    ax.set_title(title)
    ax.legend()
    return fig


def plot_memory(per_method: Mapping[str, Mapping[str, float]], *, title: str = "") -> BookFigure:
    """Bars per method: bytes kept for backward and the peak of one attention call, per rank
    (KiB), as measured by the memory tracker."""
    fig = BookFigure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    names = list(per_method)
    for i, (key, label) in enumerate(
        (("saved_bytes", "kept for backward"), ("peak_bytes", "peak during the call"))
    ):
        xs = [j + (i - 0.5) * 0.38 for j in range(len(names))]
        ax.bar(xs, [per_method[n][key] / 1024 for n in names], width=0.38, label=label)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("KiB per rank")
    ax.set_title(title)
    ax.legend()
    return fig
