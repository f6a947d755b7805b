"""The interactive memory predictor: ipywidgets controls over :func:`minitorch_dist.memory.predict`.

The only UI package. Figures live beside their topic (``memory.plots``, ``precision.plots``,
``comm.plots``, ``recompute.plots``, ``accumulate.plots``, all on ``minitorch_dist.figures``), and
the accounting the widget shows is :func:`minitorch_dist.memory.predict`; nothing in the package
imports ``viz``. :func:`memory_predictor` builds the widget (ipywidgets is imported only then);
:func:`render_prediction` is the HTML it displays. :func:`planner_widget` (chapter 12) grows it
to every parallel axis and shows the planner's ranking (:func:`render_config`).
:func:`live_result` is what the book's live widgets show, the same function in Python and in
the reader's browser (:mod:`minitorch_dist.viz.live`, run by Pyodide).

Names are imported on first use (:mod:`minitorch_dist.lazy`): a module of ``viz`` that needs only
the arithmetic layer (:mod:`minitorch_dist.arithmetic`) loads no widget and no matplotlib.
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .live import live_result
    from .planner_widget import PlannerWidget, planner_widget, render_config
    from .predictor import MemoryPredictor, memory_predictor, render_prediction

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
