"""Record one training step of a data-parallel wrapper: when it computed and communicated.

The wrappers stamp their own events with ``time.perf_counter()`` when ``model.timeline`` is a
:class:`Timeline`: each gradient hook, each bucket's launch, the moment its all-reduce
completed (a callback on the work's future), and the synchronisation at the end of backward.
:func:`record_step` adds the phase boundaries. Li et al. 2020 (§3.2.3, Figure 3) draw the same
picture: with overlap, communication runs under the backward pass. Timings vary from run to
run, so notebooks show these figures without comparing them; they are drawn by
:func:`~minitorch_dist.data_parallel.plots.plot_step_timelines`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["Timeline", "overlap_fraction", "record_step"]


class Timeline:
    """Events of one training step, stamped with ``time.perf_counter()`` (seconds).

    Each event is ``(kind, index, t)``. Kinds recorded by the wrappers: ``"grad"`` (the
    gradient of parameter ``index`` is ready), ``"launch"`` and ``"done"`` (bucket ``index``'s
    all-reduce started, finished), ``"sync_start"``/``"sync_end"`` (around
    ``finish_gradient_synchronization``). ``record_step`` adds ``forward_start``,
    ``backward_start``, ``backward_end`` and ``step_end``.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, int, float]] = []

    def record(self, kind: str, index: int = -1) -> None:
        self.events.append((kind, index, time.perf_counter()))  # list.append is thread-safe

    def times(self, kind: str) -> list[tuple[int, float]]:
        """``(index, t)`` of every event of ``kind``, in order of recording."""
        return [(i, t) for k, i, t in self.events if k == kind]


def record_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Timeline:
    """Run one training step of a wrapper (``DataParallelNaive``/``Bucket``) and time it."""
    if not hasattr(model, "timeline"):
        raise ValueError("record_step needs one of this package's data-parallel wrappers")
    timeline = Timeline()
    model.timeline = timeline
    try:
        optimizer.zero_grad(set_to_none=True)
        timeline.record("forward_start")
        loss = loss_fn(model(inputs), targets)
        timeline.record("backward_start")
        loss.backward()  # hooks, launches and the final synchronisation record themselves
        timeline.record("backward_end")
        optimizer.step()
        timeline.record("step_end")
    finally:
        model.timeline = None
    return timeline


def _phases(tl: Timeline) -> dict[str, float]:
    first = {}
    for kind, _, t in tl.events:
        first.setdefault(kind, t)
    grads = [t for _, t in tl.times("grad")]
    return {**first, "last_grad": max(grads) if grads else first["backward_start"]}


def _comm_intervals(tl: Timeline) -> list[tuple[float, float]]:
    """(start, end) of every all-reduce; the naive wrapper's are the whole synchronisation."""
    launches, done = dict(tl.times("launch")), dict(tl.times("done"))
    if launches:
        end = _phases(tl)["sync_end"]
        return [(t, max(done.get(b, end), t)) for b, t in sorted(launches.items())]
    ph = _phases(tl)
    return [(ph["sync_start"], ph["sync_end"])] if "sync_start" in ph else []


def overlap_fraction(tl: Timeline) -> float:
    """Fraction of the communication time that ran while backward was still computing."""
    ph = _phases(tl)
    lo, hi = ph["backward_start"], ph["last_grad"]
    total = hidden = 0.0
    for a, b in _comm_intervals(tl):
        total += b - a
        hidden += max(0.0, min(b, hi) - max(a, lo))
    return hidden / total if total > 0 else 0.0
