"""Chapter 12's figures of the planner: every configuration by step time and bytes, and the
published runs against the planner's prediction. Drawn from what the planner computed."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.ticker import NullFormatter

from minitorch_dist.figures import COLUMN_IN, BookFigure

from .config import ParallelConfig
from .published import Verdict, comparable_tflops
from .roofline import link_intensity, roofline
from .search import Plan

__all__ = ["plot_published", "plot_ranking", "plot_roofline"]

GIB = 2**30


def plot_ranking(result: Plan, *, marked: dict[str, ParallelConfig] | None = None) -> BookFigure:
    """Predicted step time against the fullest rank's bytes, one dot per configuration that was
    evaluated (rejected for memory: grey, at their time as if they fit); the best starred and
    ``marked`` configurations (label -> config) circled."""
    from .cost import step_time

    kw = {"global_batch": result.global_batch, "seq_len": result.seq_len}
    fig = BookFigure(figsize=(COLUMN_IN, 4), layout="constrained")
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
    ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_published(verdicts: Sequence[Verdict]) -> BookFigure:
    """Achieved TFLOP/s per GPU (the paper's count) against the planner's prediction for the
    published layout and for the planner's own choice, one group per run that reports one."""
    rows = [v for v in verdicts if v.run.tflops_per_gpu and v.row is not None]
    fig = BookFigure(figsize=(COLUMN_IN, 3.6), layout="constrained")
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
        fontsize=8,
    )
    ax.set_ylabel("TFLOP/s per GPU")
    ax.legend(fontsize=8)
    return fig


def plot_roofline(verdicts: Sequence[Verdict]) -> BookFigure:
    """The published runs on the roofline. x: a run's products per byte on a link
    (:func:`~.roofline.link_intensity` of its layout as the planner completes it; filled: the
    network, open: NVLink); y: its throughput over the GPU's peak (the paper's MFU or
    TFLOP/s, else the planner's prediction, a cross); lines: each machine's roofs
    ``min(1, I B / peak)``, B one GPU's network share (solid) or its NVLink (dashed)."""
    fig = BookFigure(figsize=(COLUMN_IN, 5.2), layout="constrained")
    ax = fig.add_subplot()
    colors = {"dgx-a100": "#1f77b4", "dgx-h100": "#d62728", "h800": "#2ca02c"}
    names = {"dgx-a100": "A100", "dgx-h100": "H100", "h800": "H800"}
    xs = [10 ** (k / 20) for k in range(50, 141)]  # 10^2.5 to 10^7 FLOPs per byte
    roofs = {}
    for v in (v for v in verdicts if v.row is not None):
        run, cluster = v.run, v.run.cluster
        roofs[cluster.name] = cluster
        phases = roofline(
            run.model, cluster, v.row.config, seq_len=run.seq_len, global_batch=run.global_batch
        )
        given = run.mfu or (run.tflops_per_gpu or 0) * 1e12 / cluster.peak_flops
        y = given or v.row.time.mfu
        color = colors.get(cluster.name, "#7f7f7f")
        links = (
            ("InfiniBand", cluster.nic_share, color),
            ("NVLink", cluster.intra_bandwidth, "none"),
        )
        for resource, bandwidth, face in links:
            x = link_intensity(phases, resource, bandwidth)
            if x != float("inf"):
                marker = "o" if given else "X"
                ax.scatter(
                    [x], [y], s=36, marker=marker, facecolors=face, edgecolors=color, zorder=4
                )
    lines: dict[tuple[float, float, str], list[str]] = {}  # one line per distinct roof
    for name, cluster in roofs.items():
        for bandwidth, style in ((cluster.nic_share, "-"), (cluster.intra_bandwidth, "--")):
            lines.setdefault((bandwidth, cluster.peak_flops, style), []).append(name)
    for (bandwidth, peak, style), which in lines.items():
        ys = [min(1.0, x * bandwidth / peak) for x in xs]
        link = "network" if style == "-" else "NVLink"
        label = f"{' and '.join(names.get(n, n) for n in which)} roof, {link}"
        ax.plot(xs, ys, style, color=colors.get(which[0], "#7f7f7f"), linewidth=1, label=label)
    ax.scatter([], [], s=36, color="#555555", label="run, its network bytes")
    ax.scatter([], [], s=36, facecolors="none", edgecolors="#555555", label="run, its NVLink bytes")
    ax.scatter(
        [], [], s=36, marker="X", color="#555555", label="planner's prediction (no paper figure)"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(0.1, 1.5)
    ticks = (0.1, 0.2, 0.3, 0.5, 1.0)
    ax.set_yticks(ticks, labels=[f"{t:.0%}" for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity: the step's FLOPs per byte on the link")
    ax.set_ylabel("throughput / peak FLOP/s")
    ax.set_title("Published runs on the roofline of their links", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    below = all(p.get_offsets()[0][1] <= 1 for p in ax.collections if len(p.get_offsets()))
    fig.description = (
        "Roofline of the published runs: throughput over the GPU's peak against the step's FLOPs "
        "per byte on each link (filled: the network, open: NVLink), with each machine's "
        "compute roof and link roofs; "
        + ("every run lies below its roofs" if below else "some run lies above a roof")
    )
    return fig
