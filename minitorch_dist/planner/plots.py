"""Chapter 12's figures of the planner: every configuration by step time and bytes, and the
published runs against the planner's prediction. Drawn from what the planner computed."""

from __future__ import annotations

from collections.abc import Sequence

from minitorch_dist.figures import BookFigure

from .config import ParallelConfig
from .published import Verdict, comparable_tflops
from .search import Plan

__all__ = ["plot_published", "plot_ranking"]

GIB = 2**30


def plot_ranking(result: Plan, *, marked: dict[str, ParallelConfig] | None = None) -> BookFigure:
    """Predicted step time against the fullest rank's bytes, one dot per configuration that was
    evaluated (rejected for memory: grey, at their time as if they fit); the best starred and
    ``marked`` configurations (label -> config) circled."""
    from .cost import step_time

    kw = {"global_batch": result.global_batch, "seq_len": result.seq_len}
    fig = BookFigure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    fit = [(r.time.total, r.memory["total"] / GIB) for r in result.fitting]
    over = [r for r in result.rejected if r.memory is not None][::7]  # every 7th, for legibility
    too_big = [
        (step_time(result.model, result.cluster, r.config, **kw).total, r.memory["total"] / GIB)
        for r in over
    ]
    if too_big:
        ax.scatter(*zip(*too_big), s=3, color="#bbbbbb", label="does not fit (every 7th)")
    ax.scatter(*zip(*fit), s=3, color="#1f77b4", label="fits")
    best = result.fitting[0]
    ax.scatter(
        [best.time.total],
        [best.memory["total"] / GIB],
        marker="*",
        s=220,
        color="#d62728",
        zorder=5,
        label=f"planner's choice: {best.config.label()}",
    )
    for label, config in (marked or {}).items():
        row = next((r for r in result.fitting if r.config == config), None)
        if row is not None:
            ax.scatter(
                [row.time.total],
                [row.memory["total"] / GIB],
                s=90,
                facecolors="none",
                edgecolors="black",
                zorder=4,
                label=label,
            )
    ax.axhline(result.cluster.memory_bytes / GIB, color="black", linewidth=1, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted step time (s)")
    ax.set_ylabel("fullest rank (GiB)")
    ax.set_title(
        f"{result.model.name} on {result.cluster.gpus} GPUs: {len(result.fitting):,} of "
        f"{len(result.rows):,} configurations fit",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="upper right")
    return fig


def plot_published(verdicts: Sequence[Verdict]) -> BookFigure:
    """Achieved TFLOP/s per GPU (the paper's count) against the planner's prediction for the
    published layout and for the planner's own choice, one group per run that reports one."""
    rows = [v for v in verdicts if v.run.tflops_per_gpu and v.row is not None]
    fig = BookFigure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    xs = range(len(rows))
    width = 0.27
    ax.bar(
        [x - width for x in xs],
        [v.run.tflops_per_gpu for v in rows],
        width,
        color="#7f7f7f",
        label="published (achieved)",
    )
    ax.bar(
        list(xs),
        [comparable_tflops(v.run, v.row) for v in rows],
        width,
        color="#1f77b4",
        label="planner, published layout",
    )
    ax.bar(
        [x + width for x in xs],
        [comparable_tflops(v.run, v.best) for v in rows],
        width,
        color="#d62728",
        label="planner's own choice",
    )
    ax.set_xticks(
        list(xs),
        [v.run.label.replace(", seq", "\nseq") for v in rows],
        rotation=60,
        ha="right",
        fontsize=7,
    )
    ax.set_ylabel("TFLOP/s per GPU")
    ax.legend(fontsize=7)
    return fig
