"""Chapter 7's figure: what one Block stores per rank under tp and tp + sp, by term.

Draws only what it is given: the breakdowns come from :func:`tp_activation_breakdown` and the
measured totals from :func:`measure_tp_activations` (the memory tracker). Kept apart from the
numbers: ``import minitorch_dist.tensor_parallel`` does not import matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from minitorch_dist.figures import COLUMN_IN, BookFigure

__all__ = ["plot_tp_activations"]

TERMS = {  # term -> (label, colour)
    "norms": ("norms (inputs, x*rstd, rstd)", "#9467bd"),
    "linear_inputs": ("inputs of wq/wk/wv and w1/w3", "#8c564b"),
    "core": ("attention q, k, v, out, lse", "#d62728"),
    "mlp": ("SwiGLU intermediates", "#ff7f0e"),
}


def plot_tp_activations(
    rows: Sequence[tuple[str, Mapping[str, int], int]], *, title: str = ""
) -> BookFigure:
    """Stacked bars, one per ``(label, breakdown, measured)`` row: the formula's terms stacked,
    the tracker's measured total as a black tick on top (they coincide when the formula holds)."""
    fig = BookFigure(figsize=(COLUMN_IN, 4.2), layout="constrained")
    ax = fig.add_subplot()
    xs = range(len(rows))
    bottoms = [0.0] * len(rows)
    for term, (label, colour) in TERMS.items():
        heights = [row[1][term] / 1024 for row in rows]
        ax.bar(xs, heights, bottom=bottoms, color=colour, label=label, width=0.6)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.scatter(
        xs,
        [row[2] / 1024 for row in rows],
        marker="_",
        s=900,
        color="black",
        linewidths=2,
        zorder=3,
        label="measured (tracker)",
    )
    # a label on two lines after its first word ("t=2 sp regather"), unless it has its own
    ax.set_xticks(list(xs), [r[0] if "\n" in r[0] else r[0].replace(" ", "\n", 1) for r in rows])
    ax.set_ylabel("KiB stored per layer, per rank")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right", markerscale=0.4)  # the tick's marker fits its key
    return fig
