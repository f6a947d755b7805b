"""The figure base every chapter draws on: a matplotlib ``Figure`` that shows itself, and the
colours of the memory categories.

A leaf module: it imports matplotlib and the standard library, nothing of ``minitorch_dist``, so
any topic's ``plots`` module (``memory/plots.py``, ``precision/plots.py``, ``comm/plots.py``,
``recompute/plots.py`` ...) can build on it without importing another topic. Figures are built
without pyplot: nothing is shown twice in a notebook (a figure is shown once, as the cell's value
or through myst-nb's ``glue``), nothing leaks between figures, and tests render them headless.
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

__all__ = ["COLORS", "BookFigure"]

# One colour per memory category (matplotlib's tab10), the same in every figure of the book and
# in the memory predictor's bars, so "activations" is the same red in chapter 1 and chapter 6.
COLORS = {
    "params": "#1f77b4",
    "grads": "#ff7f0e",
    "optimizer": "#2ca02c",
    "activations": "#d62728",
    "other": "#7f7f7f",
}


class BookFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG in IPython without pyplot: Jupyter and
    myst-nb display it even where no ``%matplotlib inline`` registered a formatter."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
