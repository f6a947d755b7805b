"""Figures of chapter 3 and lab 3: what recomputation removes, measured.

Each function returns a figure built without pyplot (:class:`~minitorch_dist.figures.BookFigure`,
which shows itself as a PNG), from numbers it is given: measurements of ``measure_recompute`` or
``measure_step_fake``, never constants of this file. Colours per category match chapter 1's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from minitorch_dist.figures import COLORS, COLUMN_IN, BookFigure
from minitorch_dist.memory.estimate import format_bytes

__all__ = ["POLICY_STYLES", "plot_policy_sweep", "plot_who_dominates", "plot_segments"]

STATES = ("params", "grads", "optimizer", "activations")
POLICY_STYLES = {"none": ("#d62728", "o"), "selective": ("#9467bd", "s"), "full": ("#2ca02c", "^")}


def _gib(n: float) -> float:
    return n / 2**30


def plot_who_dominates(
    results: Mapping[str, Mapping[tuple[int, str], Mapping[str, int]]],
    *,
    title: str | None = None,
) -> Figure:
    """Stacked bars of params, grads, optimizer states and activations, one bar per
    (sequence length, policy), one panel per model.

    ``results[model][(seq_len, policy)]`` holds bytes under ``params``, ``grads``, ``optimizer``
    and ``activations`` (the keys ``measure_step_fake`` returns).
    """
    fig = BookFigure(figsize=(COLUMN_IN, 4.4), layout="constrained")
    axes = fig.subplots(1, len(results), squeeze=False)[0]
    for ax, (model, runs) in zip(axes, results.items()):
        seqs = sorted({seq for seq, _ in runs})
        policies = [p for p in POLICY_STYLES if any(p == q for _, q in runs)]
        width = 0.8 / len(policies)
        for i, seq in enumerate(seqs):
            for j, policy in enumerate(policies):
                if (seq, policy) not in runs:
                    continue
                x = i + (j - (len(policies) - 1) / 2) * width
                bottom = 0.0
                for category in STATES:
                    value = _gib(runs[(seq, policy)][category])
                    label = category if (i, j) == (0, 0) else None
                    ax.bar(
                        x, value, width * 0.92, bottom=bottom, color=COLORS[category], label=label
                    )
                    bottom += value
                ax.text(x, bottom, policy, rotation=90, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(seqs)), [f"s = {s:,}" for s in seqs])
        ax.set_ylabel("GiB per device (one sequence)")
        ax.set_title(model)
        top = max(sum(_gib(run[c]) for c in STATES) for run in runs.values())
        ax.set_ylim(0, top * 1.25)  # room for the policy names above the bars
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(STATES), fontsize=8)
    fig.suptitle(title or "Who dominates: model states vs activations, measured on fake tensors")
    return fig


def plot_policy_sweep(
    seqs: Sequence[int],
    series: Mapping[str, Sequence[int]],
    *,
    references: Mapping[str, Sequence[float]] | None = None,
    title: str | None = None,
) -> Figure:
    """Stored activation bytes against sequence length, one line per policy (markers: measured),
    with optional dashed reference curves (closed forms)."""
    fig = BookFigure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    largest = max(max(v) for v in series.values())
    scale, unit = (2**20, "MiB") if largest >= 2**20 else (2**10, "KiB")
    for name, values in series.items():
        color, marker = POLICY_STYLES.get(name, ("#7f7f7f", "o"))
        ax.plot(seqs, [v / scale for v in values], marker=marker, color=color, label=name)
    for name, values in (references or {}).items():
        ax.plot(
            seqs,
            [v / scale for v in values],
            linestyle="--",
            color="#7f7f7f",
            linewidth=1,
            label=name,
        )
    ax.set_xlabel("sequence length s")
    ax.set_ylabel(f"stored activations ({unit})")
    ax.set_xticks(list(seqs))
    ax.legend(fontsize=8)
    ax.set_title(title or "Stored activations against sequence length, measured")
    return fig


def plot_segments(costs: Mapping[int, int], *, title: str | None = None) -> Figure:
    """Peak stored activations against the segment length k of Chen et al.'s checkpointing,
    with the best k marked."""
    ks = sorted(costs)
    best = min(ks, key=costs.__getitem__)
    fig = BookFigure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(ks, [_gib(costs[k]) for k in ks], marker=".", color="#2ca02c")
    ax.annotate(
        f"best k = {best}: {format_bytes(costs[best])}",
        xy=(best, _gib(costs[best])),
        xytext=(best + len(ks) * 0.12, _gib(costs[best]) * 1.6),
        arrowprops={"arrowstyle": "->", "linewidth": 0.8},
        fontsize=9,
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("layers per checkpointed segment k (log scale)")
    ax.set_ylabel("peak stored activations (GiB)")
    ax.set_title(title or "Checkpointing in segments of k layers")
    return fig
