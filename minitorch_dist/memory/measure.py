"""One training step measured: the tracker of lab 1 around a forward, a backward and a step.

:class:`~minitorch_dist.memory.track.MemoryTracker` is the tool; :func:`measure_step` is how the
chapters and labs use it on one step (and :func:`~minitorch_dist.memory.fake.measure_step_fake`
on fake tensors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from minitorch_dist.memory.track import MemoryTracker

__all__ = ["measure_step"]


def measure_step(
    model: torch.nn.Module,
    optimizer: Any,
    batch: tuple[torch.Tensor, torch.Tensor] | Callable[[], tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Run one training step under a :class:`MemoryTracker` and return where the memory went.

    ``batch`` is ``(inputs, targets)`` or a function returning them (called inside the tracker,
    so the batch is counted under ``other``); ``loss_fn(model(inputs), targets)`` defaults to the
    Llama's ``cross_entropy``. Does not zero the grads: call ``optimizer.zero_grad()`` between
    steps as usual. Returns the breakdown after ``forward`` (the loss computed), after
    ``backward`` and after ``optimizer`` (the step), plus ``peak``, ``peak_total``, ``timeline``
    and ``cuda``.
    """
    if loss_fn is None:
        from minitorch_dist.models import cross_entropy as loss_fn
    result: dict[str, Any] = {}
    with MemoryTracker(model, optimizer) as tracker:
        with torch.no_grad():  # making data is not part of the forward pass
            inputs, targets = batch() if callable(batch) else batch
        tracker.mark("forward")
        # the logits die inside this line: only what autograd saved stays alive
        loss = loss_fn(model(inputs), targets)
        result["forward"] = tracker.current()
        tracker.mark("backward")
        loss.backward()
        del loss
        result["backward"] = tracker.current()
        tracker.mark("optimizer")
        optimizer.step()
        result["optimizer"] = tracker.current()
        tracker.mark("idle")
    result.update(
        peak=tracker.peak(),
        peak_total=tracker.peak_total,
        timeline=tracker.timeline,
        cuda=dict(tracker.cuda),
    )
    return result
