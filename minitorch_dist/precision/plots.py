"""Figures of chapter 2 and lab 2: bit layouts, range and spacing of float formats, loss curves,
the loss scale over training, and fp8 quantisation error.

Like every topic's ``plots``, each function returns a :class:`~minitorch_dist.figures.BookFigure`
built without pyplot (shown once, as the cell's value or through myst-nb's ``glue``), and draws
only what it is given or what ``minitorch_dist.precision`` computes: no number in this file is a
fact about a format. ``import minitorch_dist.precision`` does not import this module (nor
matplotlib); import it for the figures. The formats' own figures (bit layouts, range, spacing)
live in :mod:`minitorch_dist.precision.plots_formats`; this module re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from matplotlib.figure import Figure

from minitorch_dist.figures import COLUMN_IN, BookFigure
from minitorch_dist.precision.formats import FloatFormat, format_range, get_format
from minitorch_dist.precision.plots_formats import (
    FIELD_COLORS,
    FORMAT_COLORS,
    plot_bit_layouts,
    plot_ranges,
    plot_spacing,
)

__all__ = [
    "FIELD_COLORS",
    "FORMAT_COLORS",
    "plot_bit_layouts",
    "plot_fp8_errors",
    "plot_loss_curves",
    "plot_loss_scale",
    "plot_lost_updates",
    "plot_magnitudes",
    "plot_outlier_growth",
    "plot_ranges",
    "plot_running_sums",
    "plot_spacing",
]


def plot_loss_curves(
    curves: Mapping[str, Sequence[float]], *, floor: float | None = None, title: str | None = None
) -> Figure:
    """Training loss per step (from step 1) for each run; the first run is drawn wide and light
    underneath, so a run that follows it stays visible. A run that hit inf/NaN ends with an x at
    its last finite loss, labelled with the step whose loss was not finite."""
    fig = BookFigure(figsize=(COLUMN_IN, 4.5))
    ax = fig.add_subplot()
    for i, (name, losses) in enumerate(curves.items()):
        finite = [v for v in losses if math.isfinite(v)]
        broke = len(finite) < len(losses)
        style = {"lw": 5, "alpha": 0.35} if i == 0 else {"lw": 1.5}
        steps = range(1, len(finite) + 1)
        ax.plot(steps, finite, label=name + (" (inf/NaN)" if broke else ""), **style)
        if broke and finite:
            ax.plot(len(finite), finite[-1], "x", color="black", markersize=10)
            ax.annotate(
                f"step {len(finite) + 1}: loss is {losses[len(finite)]}",
                (len(finite), finite[-1]),
                xytext=(10, -15),
                textcoords="offset points",
            )
    if floor is not None:
        ax.axhline(floor, color="gray", ls=":", label="entropy of the data (best possible)")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats)")
    ax.set_title(title or "Training loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_loss_scale(
    scales: Sequence[float], skipped: Sequence[bool], *, title: str | None = None
) -> Figure:
    """The loss scale after every step (log2 axis), skipped steps marked in red."""
    fig = BookFigure(figsize=(COLUMN_IN, 3.5))
    ax = fig.add_subplot()
    steps = range(1, len(scales) + 1)
    ax.step(steps, [math.log2(s) for s in scales], where="post", label="log2 of the loss scale")
    bad = [i for i, s in zip(steps, skipped) if s]
    ax.plot(
        bad,
        [math.log2(scales[i - 1]) for i in bad],
        "o",
        color="#d62728",
        label="inf/NaN: step skipped, scale halved",
    )
    ax.set_xlabel("step")
    ax.set_ylabel("log2 S")
    ax.set_title(title or "Dynamic loss scale")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_fp8_errors(
    magnitudes: Sequence[float], errors: Mapping[str, Sequence[float]], *, title: str | None = None
) -> Figure:
    """Relative error of an fp8 matmul against the outlier magnitude, one line per scaling."""
    fig = BookFigure(figsize=(COLUMN_IN, 4.5))
    ax = fig.add_subplot()
    for name, errs in errors.items():
        ax.plot(magnitudes, [100 * e for e in errs], "o-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("outlier magnitude (the other entries are N(0, 1))")
    ax.set_ylabel("relative error of a row (%, median)")
    ax.set_title(title or "FP8 matmul error: one scale per tensor vs per block")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def plot_outlier_growth(
    ratios: Mapping[str, Sequence[float]],
    headroom: float,
    *,
    losses: Mapping[str, Sequence[float]] | None = None,
    title: str | None = None,
) -> Figure:
    """Outlier ratio (amax / rms) against the training step, one line per run, under the ratio
    where per-tensor fp8 pushes typical entries into the subnormals (``headroom``); with
    ``losses`` (named "<run> <recipe>"), their loss curves on a second panel, one colour per run,
    its first recipe solid and the others dashed, below the first (the column is too narrow for
    the two side by side)."""
    fig = BookFigure(figsize=(COLUMN_IN, 7.6 if losses else 4.2))
    ax = fig.add_subplot(2 if losses else 1, 1, 1)
    for name, values in ratios.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.axhline(
        headroom, color="black", ls="--", label=f"per-tensor E4M3 headroom ({headroom:,.0f})"
    )
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("largest amax / rms over the linear inputs")
    ax.set_title(title or "Outliers grow faster at a higher learning rate")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    if losses:
        right = fig.add_subplot(2, 1, 2)
        colours: dict[str, str] = {}
        for name, values in losses.items():  # "<run> <recipe>": a colour per run, a dash per recipe
            run, _, recipe = name.rpartition(" ")
            first = run not in colours
            colour = colours.setdefault(run, f"C{len(colours)}")
            right.plot(
                range(1, len(values) + 1),
                values,
                label=name,
                lw=1,
                color=colour,
                ls="-" if first else "--",
            )
        right.set_xlabel("training step")
        right.set_ylabel("loss (nats)")
        right.set_title("fp32 and fp8 (per tensor) loss")
        right.legend(fontsize="small")
        right.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_running_sums(
    sums: Mapping[str, Sequence[float]],
    *,
    exact: Sequence[float] | None = None,
    title: str | None = None,
) -> Figure:
    """Running sums (one line per accumulator precision) against the number of terms added."""
    fig = BookFigure(figsize=(COLUMN_IN, 4))
    ax = fig.add_subplot()
    if exact is not None:
        ax.plot(range(1, len(exact) + 1), exact, color="black", ls=":", label="exact")
    for name, values in sums.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.set_xlabel("terms added")
    ax.set_ylabel("running sum")
    ax.set_title(title or "Accumulating a long sum")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_magnitudes(
    values: torch.Tensor,
    fmt: str | FloatFormat,
    scales: Sequence[float] = (1.0,),
    *,
    title: str | None = None,
) -> Figure:
    """Histogram of log2 |value| (zeros left out) after multiplying by each loss scale, with the
    format's limits drawn in: left of its smallest subnormal a value becomes 0, between that and
    the smallest normal it keeps fewer bits, right of its largest value it overflows."""
    f = get_format(fmt)
    r = format_range(f)
    logs = values.detach().double().abs()
    logs = logs[logs > 0].log2()
    fig = BookFigure(figsize=(COLUMN_IN, 4))
    ax = fig.add_subplot()
    lo = min(math.floor(logs.min().item()), math.log2(r["min_subnormal"])) - 1
    hi = max(math.ceil(logs.max().item() + math.log2(max(scales))), math.log2(r["max"])) + 2
    bins = torch.arange(lo, hi + 0.5, 0.5).numpy()
    for s in scales:
        ax.hist(
            (logs + math.log2(s)).numpy(), bins=bins, alpha=0.5, label=f"x S = 2^{math.log2(s):g}"
        )
    for key, style in (("min_subnormal", ":"), ("min_normal", "--"), ("max", "-")):
        ax.axvline(
            math.log2(r[key]),
            color="black",
            ls=style,
            lw=1,
            label=f"{f.name} {key.replace('_', ' ')}",
        )
    ax.set_xlabel("log2 |value|")
    ax.set_ylabel("count")
    ax.set_title(title or f"Magnitudes against the range of {f.name}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_lost_updates(
    sizes: Sequence[float], lost: Mapping[str, Sequence[float]], *, title: str | None = None
) -> Figure:
    """Fraction of weights that an update of each size leaves unchanged, one line per format."""
    fig = BookFigure(figsize=(COLUMN_IN, 4))
    ax = fig.add_subplot()
    for name, fractions in lost.items():
        ax.plot(
            sizes, [100 * v for v in fractions], "o-", label=name, color=FORMAT_COLORS.get(name)
        )
    ax.set_xscale("log")
    ax.set_xlabel("size of the update |lr * step|")
    ax.set_ylabel("weights left unchanged (%)")
    ax.set_title(title or "Updates that vanish: w + u == w")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
