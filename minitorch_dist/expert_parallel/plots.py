"""Chapter 10's figures, drawn from what actually ran: a real routing (which tokens went to which
expert, hence to which rank) and the load imbalance over training with and without the auxiliary
loss. Kept apart from the numbers: ``import minitorch_dist.expert_parallel`` does not import
matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from minitorch_dist.figures import COLUMN_IN, BookFigure

__all__ = ["plot_dispatch_bytes", "plot_imbalance", "plot_routing"]

RANK_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
)


def plot_routing(
    last_experts: Sequence[Sequence[Sequence[int]]],
    experts: int,
    *,
    tokens: int = 32,
    capacity: int | None = None,
    title: str = "",
) -> BookFigure:
    """Left: the first ``tokens`` tokens of each rank (x) and the experts they chose (y), the
    first choice filled, the others hollow, coloured by the rank that owns the expert. Right:
    all choices per expert (summed over ranks), against the uniform share and ``capacity``.
    ``last_experts[r]`` is rank r's (T, k) choices, as ``train_with_aux_loss`` returns them."""
    ep = len(last_experts)
    per = experts // ep
    fig = BookFigure(figsize=(COLUMN_IN, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(2.2, 1))
    counts = [0] * experts
    for r, choices in enumerate(last_experts):
        for t, row in enumerate(choices):
            for slot, e in enumerate(row):
                counts[e] += 1
                if t < tokens:
                    colour = RANK_COLOURS[(e // per) % len(RANK_COLOURS)]
                    left.scatter(
                        r * tokens + t,
                        e,
                        s=22,
                        marker="o",
                        edgecolors=colour,
                        facecolors=colour if slot == 0 else "none",
                    )
        if r:
            left.axvline(r * tokens - 0.5, color="black", lw=0.8)
    left.set_xticks([r * tokens + tokens / 2 for r in range(ep)], [f"rank {r}" for r in range(ep)])
    left.set_xlabel("tokens, by the rank that holds them")
    left.set_yticks(range(experts), [f"e{e} (rank {e // per})" for e in range(experts)])
    left.set_title("which expert each token chose (filled: first choice)", fontsize=9)
    colours = [RANK_COLOURS[(e // per) % len(RANK_COLOURS)] for e in range(experts)]
    right.barh(range(experts), counts, color=colours)
    mean = sum(counts) / experts
    right.axvline(mean, color="black", ls="--", lw=1, label="uniform")
    if capacity is not None:
        right.axvline(capacity, color="red", ls=":", lw=1.5, label="capacity")
    right.set_yticks(range(experts), [f"e{e}" for e in range(experts)])
    right.set_xlabel("choices (all ranks)")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_imbalance(histories: Mapping[str, Sequence[float]], *, title: str = "") -> BookFigure:
    """Max / mean tokens per expert over the training steps, one line per run."""
    fig = BookFigure(figsize=(COLUMN_IN, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for label, values in histories.items():
        ax.plot(range(1, len(values) + 1), values, label=label)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel("training step")
    ax.set_ylabel("max / mean tokens per expert")
    ax.set_ylim(bottom=0.9)
    ax.set_title(title)
    ax.legend(fontsize=9)  # 8 pt or more where a page shows it at 90 % of the column
    return fig


def plot_dispatch_bytes(rows: Sequence[tuple[str, float, float]], *, title: str = "") -> BookFigure:
    """Grouped bars per routing ``(label, dropless bytes, capacity-buffer bytes)`` sent per rank
    per step, in KiB."""
    fig = BookFigure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] / 1024 for r in rows], width=0.4, label="dropless")
    ax.bar([x + 0.2 for x in xs], [r[2] / 1024 for r in rows], width=0.4, label="capacity buffer")
    ax.set_xticks(list(xs), [r[0] for r in rows])
    ax.set_ylabel("KiB sent per rank per step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig
