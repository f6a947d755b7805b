"""The grid as it was built: one box per rank, placed by its coordinates, with what it held.

    check = compare_grid_with_reference(dp=2, pp=2, tp=2)
    plot_grid(check.held)          # each rank's coordinates, groups, parameters and ZeRO shard

Nothing is laid out from the configuration: every box, colour and frame comes from what a rank
reported after training (``ProcessGrid.coords``, ``grid.ranks(group)`` and the names and sizes of
the parameters it kept), so a grid built in the wrong order draws wrongly.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch, Rectangle

from minitorch_dist.figures import BookFigure

__all__ = ["held_summary", "plot_grid"]

STAGE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
COLUMN_IN = 6.88  # the book's text column at a desktop width (688 px), at the PNGs' 100 dpi
MIN_PT = 8  # the smallest text, in points at the displayed width
UNIT_IN = 1.45  # one box's column, in inches, where the text is MIN_PT


def held_summary(names: Sequence[str]) -> str:
    """``embed, layers 0`` from a rank's parameter names."""
    layers = sorted({int(n.split(".")[1]) for n in names if n.startswith("layers.")})
    parts = ["embed"] if "embed.weight" in names else []
    if layers:
        parts.append(
            f"layer {layers[0]}" if len(layers) == 1 else f"layers {layers[0]}-{layers[-1]}"
        )
    parts += [n.split(".")[0] for n in ("norm.weight", "head.weight") if n in names]
    return ", ".join(parts)


def plot_grid(held: Sequence[dict[str, Any]], ax: Axes | None = None, title: str = "") -> Any:
    """Draw each rank of ``held`` (per rank: ``coords``, ``groups``, ``names``, ``numel``,
    ``zero_shard``, as :func:`~minitorch_dist.parallel3d.grid_rank` returns them): columns are
    pipeline stages, grouped by dp x cp replica; rows are tp ranks; a frame around each tp group,
    a dashed line through each dp x cp group (the ranks whose gradients ZeRO-1 averages).
    Replicas stand side by side as far as the book's column holds them with text of
    ``MIN_PT`` points at its width, then wrap below."""
    pp = 1 + max(h["coords"]["pp"] for h in held)
    tp = 1 + max(h["coords"]["tp"] for h in held)
    # as many replicas side by side as the book's column holds in MIN_PT text, the next below
    per_row = max(1, int((COLUMN_IN / UNIT_IN + 0.5) // (pp + 0.5)))
    pos = {}
    for rank, h in enumerate(held):
        c, replica = h["coords"], h["groups"]["dp_cp"].index(rank)
        row, col = divmod(replica, per_row)
        pos[rank] = (col * (pp + 0.5) + c["pp"], -(row * (tp + 0.35) + c["tp"]) * 1.15)
    xs, ys = zip(*pos.values())
    # wider than the column only where one replica's stages do not fit: then shown smaller
    width = max(COLUMN_IN, UNIT_IN * (max(xs) + 1.2 - min(xs)))
    pt = MIN_PT
    if ax is None:
        height = (max(ys) - min(ys) + 1.4) * 0.95 + 0.6
        fig = BookFigure(figsize=(width, height), layout="constrained")
        ax = fig.subplots()
    for rank, h in enumerate(held):
        x, y = pos[rank]
        c = h["coords"]
        ax.add_patch(
            Rectangle(
                (x + 0.05, y - 0.5),
                0.9,
                1.0,
                alpha=0.25,
                color=STAGE_COLOURS[c["pp"] % len(STAGE_COLOURS)],
            )
        )
        axes = " ".join(f"{a}{c[a]}" for a in ("dp", "pp", "cp", "tp") if len(h["groups"][a]) > 1)
        ax.text(
            x + 0.5,
            y + 0.3,
            f"rank {rank}\n{axes}",
            ha="center",
            va="center",
            fontsize=pt,
            weight="bold",
        )
        ax.text(x + 0.5, y + 0.0, held_summary(h["names"]), ha="center", va="center", fontsize=pt)
        ax.text(
            x + 0.5,
            y - 0.27,
            f"{h['numel']:,} params\nZeRO-1 shard {h['zero_shard']:,}",
            ha="center",
            va="center",
            fontsize=pt,
        )
    seen = set()
    for h in held:
        group = tuple(h["groups"]["tp"])
        if len(group) > 1 and group not in seen:
            seen.add(group)
            gx, gy = zip(*(pos[r] for r in group))
            ax.add_patch(
                FancyBboxPatch(
                    (min(gx) + 0.02, min(gy) - 0.53),
                    0.96 + max(gx) - min(gx),
                    1.06 + max(gy) - min(gy),
                    boxstyle="round,pad=0.01",
                    fill=False,
                    lw=1.5,
                    ec="black",
                )
            )
        group = tuple(h["groups"]["dp_cp"])
        if len(group) > 1 and group not in seen:
            seen.add(group)
            for y in dict.fromkeys(pos[r][1] for r in group):  # one line per row of replicas
                gx = [pos[r][0] for r in group if pos[r][1] == y]
                ax.plot([min(gx) + 0.1, max(gx) + 0.9], [y - 0.47] * 2, "k--", lw=1)
    ax.set_xlim(min(xs) - 0.1, max(xs) + 1.1)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.set_axis_off()
    title = (
        title
        or "the grid as built: solid frames = tp groups, dashed = dp x cp groups "
        "(ZeRO-1), colour = pipeline stage"
    )
    # wrapped to the figure's width (about 0.55 em a character)
    ax.set_title(textwrap.fill(title, int(72 * width / (0.55 * (pt + 1)))), fontsize=pt + 1)
    return ax.figure
