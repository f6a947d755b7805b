"""The interactive memory predictor: ipywidgets controls over :func:`minitorch_dist.memory.predict`.

The only UI package. Figures live beside their topic (``memory.plots``, ``precision.plots``,
``comm.plots``, ``recompute.plots``, ``accumulate.plots``, all on ``minitorch_dist.figures``), and
the accounting the widget shows is :func:`minitorch_dist.memory.predict`; nothing in the package
imports ``viz``. :func:`memory_predictor` builds the widget (ipywidgets is imported only then);
:func:`render_prediction` is the HTML it displays.
"""

from minitorch_dist.viz.predictor import MemoryPredictor, memory_predictor, render_prediction

__all__ = ["MemoryPredictor", "memory_predictor", "render_prediction"]
