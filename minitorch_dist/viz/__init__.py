"""Figures and the interactive memory predictor of chapter 1 (and the chapters after it).

``memory_plots`` draws matplotlib figures from the package's numbers -- a measured step's
timeline, predicted against measured bytes, model-state budgets, activation growth -- and returns
them without showing them (``matplotlib.figure.Figure``, no pyplot state), so a notebook shows each
once and a test renders them headless. ``predictor`` holds :func:`predict`, the per-rank memory of
one training configuration as a pure function, and :func:`memory_predictor`, the ipywidgets UI
that calls it (ipywidgets is imported only when the UI is built).
"""

from minitorch_dist.viz.memory_plots import (
    COLORS,
    budget_table,
    plot_activation_growth,
    plot_breakdown,
    plot_budget,
    plot_predictions,
    plot_timeline,
)
from minitorch_dist.viz.predictor import (
    ACTIVATION_DTYPE_BYTES,
    MemoryPredictor,
    memory_predictor,
    predict,
    render_prediction,
)

__all__ = [
    "ACTIVATION_DTYPE_BYTES",
    "COLORS",
    "MemoryPredictor",
    "budget_table",
    "memory_predictor",
    "plot_activation_growth",
    "plot_breakdown",
    "plot_budget",
    "plot_predictions",
    "plot_timeline",
    "predict",
    "render_prediction",
]
