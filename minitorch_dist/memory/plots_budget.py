"""Figures of chapter 1 on a log scale of bytes: the model-state budget of one device and the
growth of activations (split from :mod:`minitorch_dist.memory.plots`, which re-exports them).

Same rules as every ``plots`` module: each function returns a
:class:`~minitorch_dist.figures.BookFigure` built without pyplot, and draws only numbers it is
given or that ``minitorch_dist.memory``'s closed forms compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from minitorch_dist.figures import COLUMN_IN, BookFigure
from minitorch_dist.memory.estimate import bytes_per_param, format_bytes, model_state_bytes

__all__ = ["budget_table", "plot_activation_growth", "plot_budget", "recipe_label"]


def _log_bytes_axis(ax: Any) -> None:
    """A log y axis with ticks at powers of two, labelled in binary units (16.0 GiB, 1.0 TiB)."""
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_locator(LogLocator(base=2, numticks=8))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_bytes(v) if v > 0 else "0"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def recipe_label(recipe: str, optimizer: str = "adam") -> str:
    """``"16Ψ"`` for mixed precision + Adam: the bytes per parameter as the papers write them."""
    return f"{bytes_per_param(recipe, optimizer)['total']}Ψ"


def budget_table(
    models: Mapping[str, int],
    *,
    recipes: Sequence[str] = ("mixed", "mixed_fp32_grads"),
    device_bytes: int | None = None,
) -> str:
    """A markdown table of model-state bytes (one device, no sharding) per model and recipe.

    ``models`` maps a label to a parameter count. With ``device_bytes``, a last column gives how
    many such devices the first recipe's model states fill (rounded up) before any activation.
    """
    header = ["model", "parameters Ψ"] + [f"{recipe_label(r)} (`{r}`)" for r in recipes]
    if device_bytes:
        header.append(f"devices of {format_bytes(device_bytes)} for {recipe_label(recipes[0])}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for label, n in models.items():
        row = [label, f"{n:,}"]
        row += [format_bytes(model_state_bytes(n, recipe=r)["total"]) for r in recipes]
        if device_bytes:
            row.append(str(-(-model_state_bytes(n, recipe=recipes[0])["total"] // device_bytes)))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot_budget(
    models: Mapping[str, int],
    *,
    recipes: Sequence[str] = ("mixed", "mixed_fp32_grads"),
    device_bytes: int | None = None,
    title: str | None = None,
) -> Figure:
    """Model-state bytes per model (log scale), one bar per recipe, and the device's capacity."""
    fig = BookFigure(figsize=(COLUMN_IN, 3.8), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(recipes)
    shades = ("#2ca02c", "#98df8a", "#17becf", "#9edae5")
    for j, recipe in enumerate(recipes):
        values = [model_state_bytes(n, recipe=recipe)["total"] for n in models.values()]
        offsets = [i + (j - (len(recipes) - 1) / 2) * width for i in range(len(models))]
        ax.bar(
            offsets,
            values,
            width,
            color=shades[j % len(shades)],
            label=f"{recipe_label(recipe)} ({recipe})",
        )
    if device_bytes:
        ax.axhline(device_bytes, color="black", linestyle="--", linewidth=1)
        ax.text(
            len(models) - 0.5,
            device_bytes * 1.15,
            f"one device: {format_bytes(device_bytes)}",
            ha="right",
            va="bottom",
            fontsize=8,
        )
    _log_bytes_axis(ax)
    ax.set_xticks(range(len(models)), list(models), rotation=20, ha="right")
    ax.set_ylabel("model states (bytes)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title or "Parameters + gradients + Adam states, on one device")
    return fig


def plot_activation_growth(
    xs: Sequence[int],
    series: Mapping[str, Sequence[int]],
    *,
    references: Mapping[str, int] | None = None,
    xlabel: str = "sequence length s",
    title: str | None = None,
) -> Figure:
    """Log-log lines of activation bytes against ``xs``, with horizontal reference levels (for
    example the model states, 16Ψ) to see where activations overtake them."""
    fig = BookFigure(figsize=(7, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for label, ys in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=label)
    for k, (label, level) in enumerate((references or {}).items()):
        ax.axhline(level, color="black", linestyle=("--", ":", "-.")[k % 3], linewidth=1)
        ax.text(xs[0], level * 1.12, label, fontsize=8, va="bottom")
    ax.set_xscale("log", base=2)
    _log_bytes_axis(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bytes")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "Stored activations grow with batch and sequence")
    return fig
