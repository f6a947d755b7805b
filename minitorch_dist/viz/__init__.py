"""The interactive memory predictor: ipywidgets controls over :func:`minitorch_dist.memory.predict`.

The only UI package. Figures live beside their topic (``memory.plots``, ``precision.plots``,
``comm.plots``, ``recompute.plots``, ``accumulate.plots``, all on ``minitorch_dist.figures``), and
the accounting the widget shows is :func:`minitorch_dist.memory.predict`; nothing in the package
imports ``viz``. :func:`memory_predictor` builds the widget (ipywidgets is imported only then);
:func:`render_prediction` is the HTML it displays. :func:`planner_widget` (chapter 11) grows it
to every parallel axis and shows the planner's ranking (:func:`render_config`).
:func:`live_result` is what the book's live widgets show, the same function in Python and in
the reader's browser (:mod:`minitorch_dist.viz.live`, run by Pyodide).

``minitorch_dist.viz.live`` imports without torch or matplotlib: in the page's Python, which has
neither, this package holds :func:`live_result` only.
"""

from minitorch_dist.viz.live import live_result

__all__ = ["live_result"]
try:
    from minitorch_dist.viz.planner_widget import PlannerWidget, planner_widget, render_config
    from minitorch_dist.viz.predictor import MemoryPredictor, memory_predictor, render_prediction
except ModuleNotFoundError as e:  # Pyodide in the book's pages: the arithmetic layer only
    if (e.name or "").split(".")[0] not in ("torch", "numpy", "matplotlib") and e.name not in (
        "minitorch_dist.viz.planner_widget",  # not copied into the page
        "minitorch_dist.figures",
    ):
        raise
else:
    __all__ += [
        "MemoryPredictor",
        "PlannerWidget",
        "memory_predictor",
        "planner_widget",
        "render_config",
        "render_prediction",
    ]
