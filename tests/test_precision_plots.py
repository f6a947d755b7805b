"""The figures of chapter 2 and lab 2 (``minitorch_dist.precision.plots``), rendered headless.

Each test renders a figure to PNG and checks what it draws, so a figure that raises, or that
silently draws nothing, fails here rather than in the book build.
"""

from __future__ import annotations

import io
import math

import torch

from minitorch_dist.precision.plots import (
    plot_bit_layouts,
    plot_fp8_errors,
    plot_loss_curves,
    plot_loss_scale,
    plot_lost_updates,
    plot_magnitudes,
    plot_outlier_growth,
    plot_ranges,
    plot_running_sums,
    plot_spacing,
)

NAMES = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]


def render(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def test_bit_layouts_draw_one_box_per_bit() -> None:
    """Catches a layout that drops a field: 32 + 19 + 16 + 16 + 8 + 8 boxes."""
    fig = plot_bit_layouts(NAMES)
    assert len(fig.axes[0].patches) == 32 + 19 + 16 + 16 + 8 + 8
    assert render(fig)[:4] == b"\x89PNG"


def test_ranges_and_spacing() -> None:
    """Catches a range bar that does not end at the format's largest value."""
    fig = plot_ranges(["fp16", "fp8_e4m3"])
    right_ends = sorted(p.get_x() + p.get_width() for p in fig.axes[0].patches)
    assert math.isclose(right_ends[-1], math.log2(65504.0))
    assert math.isclose(right_ends[-2], math.log2(448.0))
    fig = plot_spacing(["fp16", "bf16"])
    assert len(fig.axes[0].lines) == 2
    render(fig)


def test_training_figures() -> None:
    """Catches a loss curve that plots NaN (it must stop at the last finite loss, marked)."""
    fig = plot_loss_curves({"fp32": [5.0, 4.0, 3.0], "fp16": [5.0, math.nan]}, floor=1.7)
    lines = fig.axes[0].lines
    assert list(lines[1].get_ydata()) == [5.0]  # the fp16 curve stops before the NaN
    render(fig)
    render(plot_loss_scale([16.0, 8.0, 16.0], [False, True, False]))
    render(plot_running_sums({"a": [1.0, 2.0]}, exact=[1.0, 2.0]))


def test_magnitude_and_error_figures() -> None:
    """Catches a histogram drawn without the format's limits."""
    fig = plot_magnitudes(torch.logspace(-10, 0, 100), "fp16", scales=(1.0, 2.0**8))
    assert len(fig.axes[0].lines) == 3  # min subnormal, min normal, max
    render(fig)
    render(plot_fp8_errors([1.0, 10.0], {"tensor": [0.04, 0.05], "block": [0.04, 0.04]}))
    fig = plot_outlier_growth({"lr 1e-3": [3.0, 4.0]}, 28672.0, losses={"fp32": [5.0, 4.0]})
    render(fig)
    assert len(fig.axes) == 2 and "28,672" in fig.axes[0].get_legend_handles_labels()[1][-1]
    render(plot_lost_updates([1e-5, 1e-4], {"fp16": [0.5, 0.1], "bf16": [0.9, 0.5]}))
