"""Figures of chapter 1: where the bytes of a training step go, predicted and measured.

Every function returns a :class:`~minitorch_dist.figures.BookFigure` (a matplotlib ``Figure``
that shows itself as a PNG, built without pyplot). They draw only what they are given: the numbers
come from ``minitorch_dist.memory`` (closed forms, :func:`~minitorch_dist.memory.predict`, or a
:class:`~minitorch_dist.memory.MemoryTracker`), never from constants in this file. Colours are
fixed per category (:data:`~minitorch_dist.figures.COLORS`), the same in every figure.

Kept apart from the numbers: ``import minitorch_dist.memory`` does not import matplotlib; import
this module for the figures. The log-scale figures (the budget, the activations' growth) live in
:mod:`minitorch_dist.memory.plots_budget`; this module re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from minitorch_dist.figures import COLORS, COLUMN_IN, BookFigure
from minitorch_dist.memory.estimate import format_bytes
from minitorch_dist.memory.plots_budget import (
    budget_table,
    plot_activation_growth,
    plot_budget,
    recipe_label,
)

__all__ = [
    "COLORS",
    "budget_table",
    "plot_activation_growth",
    "plot_breakdown",
    "plot_budget",
    "plot_predictions",
    "plot_timeline",
    "recipe_label",
]

STATES = ("params", "grads", "optimizer")
RESIDENTS = ("params", "grads", "optimizer", "activations")
_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


def _unit(largest: float) -> tuple[str, int]:
    """The largest binary unit not above ``largest``: plot in MiB when the data are megabytes."""
    name, factor = _UNITS[0]
    for candidate, size in _UNITS:
        if largest >= size:
            name, factor = candidate, size
    return name, factor


def _timeline_samples(source: Any) -> list[tuple[int, str, dict[str, int]]]:
    """Accept a MemoryTracker, the dict ``measure_step`` returns, or a timeline list."""
    if hasattr(source, "timeline"):
        source = source.timeline
    elif isinstance(source, Mapping):
        source = source["timeline"]
    samples = list(source)
    if not samples:
        raise ValueError("the timeline is empty: was anything run under the tracker?")
    return samples


def plot_timeline(
    source: Any,
    *,
    categories: Sequence[str] = ("params", "grads", "optimizer", "activations", "other"),
    title: str | None = None,
    skip_idle_start: bool = True,
) -> Figure:
    """Stacked area of live bytes by category over one step, one sample per operator.

    ``source`` is a :class:`~minitorch_dist.memory.MemoryTracker`, the result of
    :func:`~minitorch_dist.memory.measure_step`, or its ``timeline`` list of
    ``(op_index, phase, {category: bytes})``. Phase changes (the tracker's ``mark`` calls) are
    drawn as dotted lines labelled with the phase; the peak total is marked. With
    ``skip_idle_start`` the samples before the first non-idle phase (making the batch) are left
    out.
    """
    samples = _timeline_samples(source)
    if skip_idle_start:
        first = next((i for i, s in enumerate(samples) if s[1] != "idle"), 0)
        samples = samples[first:]
    xs = list(range(len(samples)))  # sample index: marks share an op index with an operator
    totals = [sum(s[2].get(c, 0) for c in categories) for s in samples]
    name, factor = _unit(max(totals))
    shown = [c for c in categories if any(s[2].get(c, 0) for s in samples)]
    ys = [[s[2].get(c, 0) / factor for s in samples] for c in shown]

    fig = BookFigure(figsize=(COLUMN_IN, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.stackplot(
        xs,
        ys,
        labels=shown,
        colors=[COLORS.get(c, "#bcbd22") for c in shown],
        alpha=0.85,
        linewidth=0,
    )
    top = max(totals) / factor
    changes = [i for i in range(len(samples)) if i == 0 or samples[i][1] != samples[i - 1][1]]
    for k, start in enumerate(changes):
        end = changes[k + 1] if k + 1 < len(changes) else len(samples) - 1
        ax.axvline(start, color="black", linestyle=":", linewidth=0.8)
        if end - start > len(samples) // 50:  # label the phases wide enough to hold a word
            x, ha = (start + end) / 2, "center"
            if end - start < len(samples) // 8 and k in (0, len(changes) - 1):
                x, ha = (start, "left") if k == 0 else (end, "right")  # not past the axes
            ax.text(
                x,
                top * 1.02,
                samples[start][1],
                ha=ha,
                va="bottom",
                fontsize=9,
            )
    peak = max(range(len(totals)), key=totals.__getitem__)
    ax.annotate(
        f"peak {format_bytes(totals[peak])}",
        xy=(peak, totals[peak] / factor),
        xytext=(peak + len(samples) * 0.04, top * 0.8),
        arrowprops={"arrowstyle": "->", "linewidth": 0.8},
        fontsize=9,
    )
    ax.set_xlim(0, len(samples) - 1)
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel("operator calls in the step (one sample each)")
    ax.set_ylabel(f"live tensor bytes ({name})")
    fig.legend(loc="outside lower center", fontsize=8, ncols=len(shown))
    ax.set_title(title or "Memory over one training step, measured")
    return fig


def plot_breakdown(
    predicted: Mapping[str, int],
    measured: Mapping[str, int],
    *,
    categories: Sequence[str] = RESIDENTS,
    title: str | None = None,
) -> Figure:
    """Predicted and measured bytes side by side per category, with measured / predicted."""
    name, factor = _unit(max(max(predicted[c], measured[c]) for c in categories))
    fig = BookFigure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.38
    for i, category in enumerate(categories):
        p, m = predicted[category], measured[category]
        color = COLORS.get(category, "#bcbd22")
        ax.bar(
            i - width / 2,
            p / factor,
            width,
            color=color,
            alpha=0.45,
            edgecolor=color,
            hatch="//",
            label="predicted" if i == 0 else None,
        )
        ax.bar(i + width / 2, m / factor, width, color=color, label="measured" if i == 0 else None)
        ratio = f"{m / p:.4f}" if p else "n/a"
        ax.text(i, max(p, m) / factor * 1.02, ratio, ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(categories)), list(categories))
    ax.set_ylabel(f"bytes ({name})")
    ax.margins(y=0.15)
    ax.legend(fontsize=8)
    ax.set_title(title or "Predicted vs measured (number above: measured / predicted)")
    return fig


def plot_predictions(
    results: Mapping[str, Mapping[str, int]],
    *,
    categories: Sequence[str] = RESIDENTS,
    device_bytes: int | None = None,
    title: str | None = None,
) -> Figure:
    """Horizontal stacked bars of per-rank bytes by category, one bar per configuration.

    ``results`` maps a label to a :func:`~minitorch_dist.memory.predict` result (or any mapping
    with the ``categories``). The static twin of the interactive predictor.
    """
    largest = max(max(sum(r[c] for c in categories) for r in results.values()), device_bytes or 0)
    name, factor = _unit(largest)
    fig = BookFigure(figsize=(COLUMN_IN, 0.55 * len(results) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    labels = list(results)
    for category in categories:
        left = [
            sum(results[k][c] for c in categories[: categories.index(category)]) for k in labels
        ]
        ax.barh(
            range(len(labels)),
            [results[k][category] / factor for k in labels],
            left=[x / factor for x in left],
            color=COLORS.get(category, "#bcbd22"),
            label=category,
        )
    for i, k in enumerate(labels):
        total = sum(results[k][c] for c in categories)
        ax.text(total / factor, i, f" {format_bytes(total)}", va="center", fontsize=8)
    if device_bytes:
        ax.axvline(device_bytes / factor, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, largest / factor * 1.18)
    ax.set_xlabel(f"bytes per rank ({name})" + ("; dashed: one device" if device_bytes else ""))
    ax.legend(fontsize=8, ncols=len(categories), loc="lower right")
    ax.set_title(title or "Predicted memory per rank")
    return fig
