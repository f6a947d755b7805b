"""The interactive memory predictor: ipywidgets controls over :func:`minitorch_dist.memory.predict`.

The only UI package. Figures live beside their topic (``memory.plots``, ``precision.plots``,
``comm.plots``, ``recompute.plots``, ``accumulate.plots``, all on ``minitorch_dist.figures``), and
the accounting the widget shows is :func:`minitorch_dist.memory.predict`; nothing in the package
imports ``viz``. :func:`memory_predictor` builds the widget (ipywidgets is imported only then);
:func:`render_prediction` is the HTML it displays. :func:`planner_widget` (chapter 11) grows it
to every parallel axis and shows the planner's ranking (:func:`render_config`).
"""

from minitorch_dist.viz.planner_widget import PlannerWidget, planner_widget, render_config
from minitorch_dist.viz.predictor import MemoryPredictor, memory_predictor, render_prediction

__all__ = [
    "MemoryPredictor",
    "PlannerWidget",
    "memory_predictor",
    "planner_widget",
    "render_config",
    "render_prediction",
]
