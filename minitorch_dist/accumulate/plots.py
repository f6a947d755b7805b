"""Figure of chapter 4 and lab 4: peak memory of an accumulated step against mbs and grad_acc.

Built without pyplot (:class:`~minitorch_dist.figures.BookFigure`); it draws only the
measurements it is given (``measure_accumulation`` results), never constants of this file.
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

from minitorch_dist.figures import COLUMN_IN, BookFigure
from minitorch_dist.recompute.plots import POLICY_STYLES

__all__ = ["plot_accumulation_memory"]


def plot_accumulation_memory(
    fixed_mbs: Mapping[str, Mapping[int, int]],
    fixed_gbs: Mapping[str, Mapping[int, int]],
    *,
    micro_batch: int,
    global_batch: int,
    title: str | None = None,
) -> Figure:
    """Two panels of measured peak bytes, one line per recompute policy.

    Left: ``fixed_mbs[policy][grad_acc]`` at micro-batch ``micro_batch`` (the global batch grows
    with grad_acc). Right: ``fixed_gbs[policy][mbs]`` at global batch ``global_batch``
    (grad_acc = global_batch / mbs).
    """
    fig = BookFigure(figsize=(COLUMN_IN, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    top = max(
        v for data in (fixed_mbs, fixed_gbs) for points in data.values() for v in points.values()
    )
    for ax, data, xlabel in (
        (left, fixed_mbs, f"grad_acc (mbs = {micro_batch}; gbs = {micro_batch} x grad_acc)"),
        (right, fixed_gbs, f"mbs (gbs = {global_batch}; grad_acc = {global_batch} / mbs)"),
    ):
        for policy, points in data.items():
            xs = sorted(points)
            color, marker = POLICY_STYLES.get(policy, ("#7f7f7f", "o"))
            ax.plot(
                xs,
                [points[x] / 2**20 for x in xs],
                marker=marker,
                color=color,
                label=f"recompute {policy}",
            )
            ax.set_xticks(xs, [str(x) for x in xs])  # linear axis: a line means linear growth
        ax.set_xlabel(xlabel)
        ax.set_ylim(0, top / 2**20 * 1.08)  # one scale for both panels, from zero
    left.set_ylabel("peak of the step (MiB)")
    left.set_title("same micro-batch, growing global batch", fontsize=10)
    right.set_title("same global batch, growing micro-batch", fontsize=10)
    right.legend(fontsize=8)
    fig.suptitle(title or "Peak memory follows the micro-batch, not the global batch (measured)")
    return fig
