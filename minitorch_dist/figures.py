"""The figure base every chapter draws on: a matplotlib ``Figure`` that shows itself and says what
it shows, and the colours of the memory categories.

A leaf module: it imports matplotlib and the standard library, nothing of ``minitorch_dist``, so
any topic's ``plots`` module (``memory/plots.py``, ``precision/plots.py``, ``comm/plots.py``,
``recompute/plots.py`` ...) can build on it without importing another topic. Figures are built
without pyplot: nothing is shown twice in a notebook (a figure is shown once, as the cell's value
or through myst-nb's ``glue``), nothing leaks between figures, and tests render them headless.

Every figure carries a one-sentence description, the text a screen reader reads instead of the
picture: the one written beside the code that draws it (``fig.description = "..."``) or else one
built from its titles, axis labels and legends (:func:`describe`). The PNG carries it in its
``Description`` text chunk; the book (``minitorch_dist.book_outputs``) makes it the image's alt
text.

The book's text column is :data:`COLUMN_IN` wide at the PNGs' 100 dpi, and a wider picture is
shrunk to fit it, its text with it. The PNG also records its smallest text (``MinFontPt``, and
``MinFontPx``: the same in the PNG's pixels), so the browser check can tell that every figure's
text is at least 8 pt as the page shows it (:mod:`minitorch_dist.course.browser_check_layout`).
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = ["COLORS", "COLUMN_IN", "BookFigure", "describe", "smallest_text_pt"]

# One colour per memory category (matplotlib's tab10), the same in every figure of the book and
# in the memory predictor's bars, so "activations" is the same red in chapter 1 and chapter 6.
COLORS = {
    "params": "#1f77b4",
    "grads": "#ff7f0e",
    "optimizer": "#2ca02c",
    "activations": "#d62728",
    "other": "#7f7f7f",
}
COLUMN_IN = 6.88  # the book's text column at a desktop width: 688 px at the PNGs' 100 dpi
MAX_DESCRIPTION = 400  # characters: an alt text is read aloud in full
MAX_SERIES = 6  # legend entries named in a description

_TEX_WORD = re.compile(r"\\(?:mathrm|text|mathbf|mathit|operatorname)\{([^{}]*)\}")


def _plain(text: str) -> str:
    """Label text as read aloud: mathtext's ``$``, backslashes and braces out, one line."""
    text = _TEX_WORD.sub(r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text).replace("$", "").replace("{", "").replace("}", "")
    return " ".join(text.split())


def _kind(ax: Axes) -> str:
    if ax.images:
        return "heat map"
    if any(isinstance(c, PathCollection) and len(c.get_offsets()) > 1 for c in ax.collections):
        return "scatter plot"
    bars = [c for c in ax.containers if isinstance(c, BarContainer) and len(c)]
    if bars:
        flat = all(getattr(c, "orientation", None) == "horizontal" for c in bars)
        return "horizontal bar chart" if flat else "bar chart"
    if any(len(line.get_xdata()) > 2 for line in ax.get_lines()) or any(
        isinstance(c, PolyCollection) for c in ax.collections
    ):
        return "line plot"
    return "diagram"


def _panel(ax: Axes) -> str:
    """``<kind> of <ylabel> against <xlabel>: <title> (series: ...)``, or "" with nothing to say."""
    x, y = _plain(ax.get_xlabel()), _plain(ax.get_ylabel())
    title = "; ".join(
        t for t in (_plain(ax.get_title(k)) for k in ("left", "center", "right")) if t
    )
    legend = ax.get_legend()
    series = [_plain(t.get_text()) for t in legend.get_texts()] if legend else []
    series = [s for s in series if s]
    if not (x or y or title or series):
        return ""
    text = _kind(ax)
    text += f" of {y} against {x}" if x and y else f" along {x}" if x else f" of {y}" if y else ""
    if title:
        text += f": {title}"
    if series:
        more = f" and {len(series) - MAX_SERIES} more" if len(series) > MAX_SERIES else ""
        # names with commas in them ("closed form, none") are told apart by semicolons
        sep = "; " if any("," in s for s in series[:MAX_SERIES]) else ", "
        text += f" (series: {sep.join(series[:MAX_SERIES])}{more})"
    return text


def describe(fig: Figure) -> str:
    """One sentence saying what ``fig`` shows: its ``description`` where one was written, else
    built from its titles, axis labels and legends; "" where the figure says nothing of itself."""
    written = getattr(fig, "_book_description", "")
    if written:
        return written
    panels = [_panel(ax) for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    panels = [p for p in panels if p]
    suptitle = _plain(fig.get_suptitle())
    if not panels:
        return f"Figure: {suptitle}." if suptitle else ""
    if len(panels) == 1:
        text = f"{suptitle}: {panels[0]}" if suptitle else panels[0]
    else:
        text = f"{suptitle}: " if suptitle else ""
        text += f"{len(panels)} panels: " + "; ".join(panels)
    text = text[0].upper() + text[1:]
    if len(text) > MAX_DESCRIPTION - 1:
        text = text[: MAX_DESCRIPTION - 2].rstrip() + "…"
    return text if text.endswith((".", "…")) else text + "."


def smallest_text_pt(fig: Figure) -> float | None:
    """The size in points of the smallest text ``fig`` draws (None: it draws no text).

    Lays the figure out first (tick labels exist only once drawn); counts visible, non-empty
    text in visible axes, legends and annotations."""
    fig.draw_without_rendering()
    sizes = []
    for text in fig.findobj(Text):
        if not (text.get_visible() and text.get_text().strip()):
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        sizes.append(float(text.get_fontsize()))
    return min(sizes) if sizes else None


class BookFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG in IPython without pyplot: Jupyter and
    myst-nb display it even where no ``%matplotlib inline`` registered a formatter. The PNG
    carries :attr:`description` as its ``Description`` text chunk, and its smallest text in
    ``MinFontPt`` (points) and ``MinFontPx`` (the PNG's pixels)."""

    @property
    def description(self) -> str:
        """What the figure shows, in one sentence (written, or :func:`describe`'s)."""
        return describe(self)

    @description.setter
    def description(self, text: str) -> None:
        text = " ".join(str(text).split())
        self._book_description = (
            text if not text or text.endswith((".", "!", "?", "…")) else text + "."
        )

    def savefig(self, fname: Any, *args: Any, **kwargs: Any) -> None:
        """``Figure.savefig``; a PNG carries :attr:`description` (benchmarks' committed figures
        too, so that the book's ``{figure}`` of one has its alt text) and its smallest text."""
        fmt = kwargs.get("format")
        if fmt is None and isinstance(fname, (str, os.PathLike)):
            fmt = os.path.splitext(os.fspath(fname))[1][1:] or rcParams["savefig.format"]
        if str(fmt or rcParams["savefig.format"]).lower() == "png":
            ours = {"Description": self.description}
            pt = smallest_text_pt(self)
            if pt is not None:
                dpi = kwargs.get("dpi") or rcParams["savefig.dpi"]
                dpi = self.dpi if dpi == "figure" else float(dpi)
                ours |= {"MinFontPt": f"{pt:.2f}", "MinFontPx": f"{pt * dpi / 72:.2f}"}
            ours = {k: v for k, v in ours.items() if v}
            kwargs["metadata"] = {**ours, **(kwargs.get("metadata") or {})}
        super().savefig(fname, *args, **kwargs)

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
