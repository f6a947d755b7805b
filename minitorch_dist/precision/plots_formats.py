"""Figures of chapter 2 about the formats themselves: bit layouts, range and spacing.

Split from :mod:`minitorch_dist.precision.plots` (which re-exports every name here); the same
rules hold: each function returns a :class:`~minitorch_dist.figures.BookFigure` built without
pyplot and draws only what ``minitorch_dist.precision.formats`` computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from minitorch_dist.figures import COLUMN_IN, BookFigure
from minitorch_dist.precision.formats import FloatFormat, format_range, get_format, spacing

FIELD_COLORS = {"sign": "#d62728", "exponent": "#1f77b4", "mantissa": "#2ca02c"}
FORMAT_COLORS = {
    "fp32": "#1f77b4",
    "tf32": "#17becf",
    "fp16": "#ff7f0e",
    "bf16": "#2ca02c",
    "fp8_e4m3": "#d62728",
    "fp8_e5m2": "#9467bd",
}


def _formats(formats: Sequence[str | FloatFormat]) -> list[FloatFormat]:
    found = [get_format(f) for f in formats]
    if not found:
        raise ValueError("formats must name at least one format")
    return found


def plot_bit_layouts(formats: Sequence[str | FloatFormat]) -> Figure:
    """One row of boxes per format, one box per bit: sign, exponent and mantissa fields."""
    fmts = _formats(formats)
    width = max(f.bits for f in fmts)
    fig = BookFigure(figsize=(COLUMN_IN, 0.55 * len(fmts) + 0.9))
    ax = fig.add_subplot()
    for row, f in enumerate(fmts):
        y = len(fmts) - 1 - row
        fields = (("sign", 1), ("exponent", f.exponent_bits), ("mantissa", f.mantissa_bits))
        x = 0
        for name, n in fields:
            for _ in range(n):
                ax.add_patch(Rectangle((x, y), 0.92, 0.8, color=FIELD_COLORS[name], alpha=0.85))
                x += 1
            if n > 1:
                ax.text(
                    x - n / 2,
                    y + 0.4,
                    str(n),
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=9,
                    fontweight="bold",
                )
        ax.text(-0.6, y + 0.4, f"{f.name} ({f.bits} bits)", ha="right", va="center", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, color=c, alpha=0.85) for c in FIELD_COLORS.values()]
    ax.legend(
        handles,
        list(FIELD_COLORS),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        frameon=False,
    )
    ax.set_xlim(-9, width + 0.5)
    ax.set_ylim(-0.2, len(fmts))
    ax.axis("off")
    ax.set_title("Bit layouts: sign | exponent | mantissa (numbers: field widths)")
    fig.tight_layout()
    fig.description = "Bit layouts of " + ", ".join(
        f"{f.name} (sign 1, exponent {f.exponent_bits}, mantissa {f.mantissa_bits} bits)"
        for f in fmts
    )
    return fig


def plot_ranges(formats: Sequence[str | FloatFormat]) -> Figure:
    """Horizontal bars on a log2 axis: subnormals (light), then normals up to the largest value."""
    fmts = _formats(formats)
    fig = BookFigure(figsize=(COLUMN_IN, 0.5 * len(fmts) + 1.2))
    ax = fig.add_subplot()
    for row, f in enumerate(fmts):
        r = format_range(f)
        lo, mid, hi = (math.log2(r[k]) for k in ("min_subnormal", "min_normal", "max"))
        y = len(fmts) - 1 - row
        color = FORMAT_COLORS.get(f.name, "#7f7f7f")
        ax.barh(y, mid - lo, left=lo, color=color, alpha=0.35, height=0.6)
        ax.barh(y, hi - mid, left=mid, color=color, alpha=0.9, height=0.6)
        ax.text(hi + 2, y, f"max {r['max']:.3g}", va="center", fontsize=8)
    ax.set_yticks(range(len(fmts)), [f.name for f in reversed(fmts)])
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlim(right=ax.get_xlim()[1] + 30)  # room for the labels
    ax.set_xlabel("log2 |x|   (light: subnormals; dark: normal numbers up to the largest value)")
    ax.set_title("Representable magnitudes")
    fig.tight_layout()
    return fig


def plot_spacing(
    formats: Sequence[str | FloatFormat],
    lo: float = 2.0**-30,
    hi: float = 2.0**20,
    points: int = 2000,
) -> Figure:
    """The gap to the next representable value against |x| (log-log), within each range."""
    fmts = _formats(formats)
    xs = torch.logspace(math.log10(lo), math.log10(hi), points, dtype=torch.float64)
    fig = BookFigure(figsize=(COLUMN_IN, 4.5))
    ax = fig.add_subplot()
    for f in fmts:
        r = format_range(f)
        x = xs[(xs >= r["min_subnormal"]) & (xs <= r["max"])]
        ax.step(
            x.numpy(),
            spacing(x, f).numpy(),
            where="post",
            label=f.name,
            color=FORMAT_COLORS.get(f.name, "#7f7f7f"),
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("|x|")
    ax.set_ylabel("spacing to the next value")
    ax.set_title("Precision: spacing between neighbouring values")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
