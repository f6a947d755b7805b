"""Scatter/gather of pipeline messages over the tensor-parallel group (Narayanan et al. 2021,
section 4.1).

Without sequence parallelism every rank of a TP group ends a stage with the same activation
(the row-parallel linear's all-reduce leaves it whole on each), and the stage's backward ends
with the same input gradient on each. Sending it from each of the t ranks to its counterpart in
the next stage moves t copies of the same ``b s h`` elements across the stage boundary, usually
an inter-node link. Instead, each TP rank sends only its ``1/t`` slice (the scatter) and the
receiving ranks all-gather the slices over their TP group (the gather, on the fast intra-node
links): per rank, ``b s h / t`` elements cross the boundary per message instead of ``b s h``.

    enable_scatter_gather(stage, tp_group)   # stage: a PipelineStage of a TP group (no SP)

:meth:`~minitorch_dist.pipeline.PipelineStage.exchange` then hands its messages to
:meth:`ScatterGather.exchange`, which posts the slices through the stage's own exchange and
all-gathers the received slices into the full receive buffers. It needs messages that are the
same on every TP rank (sequence parallelism off): with sequence parallelism a message is
already each rank's own ``1/t`` of the sequence, and nothing is left to scatter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_int
from minitorch_dist.comm.groups import Group

__all__ = ["ScatterGather", "enable_scatter_gather", "scatter_gather_bytes"]


def scatter_gather_bytes(
    *, micro_batch: int, seq_len: int, hidden: int, tp: int, bytes_per_element: int = 2
) -> int:
    """Bytes one rank sends across a stage boundary per message with scatter/gather:
    ``b s h / t`` elements (Narayanan et al. 2021, section 4.1). ValueError unless t divides
    ``b s h``."""
    for name, value in (
        ("micro_batch", micro_batch),
        ("seq_len", seq_len),
        ("hidden", hidden),
        ("tp", tp),
        ("bytes_per_element", bytes_per_element),
    ):
        check_int(name, value)
    elements = micro_batch * seq_len * hidden
    if elements % tp:
        raise ValueError(f"b*s*h = {elements} is not divisible by tp={tp} (scatter/gather)")
    return elements // tp * bytes_per_element


class ScatterGather:
    """Sends each message's ``1/t`` slice (this rank's index in ``tp_group``) and all-gathers the
    received slices over ``tp_group``. ``sent_bytes`` counts what this rank posted."""

    def __init__(self, tp_group: Group) -> None:
        self.group = tp_group
        self.tp = dist.get_world_size(tp_group)
        self.index = dist.get_rank(tp_group)
        self.sent_bytes = 0

    def _slice(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.numel() % self.tp:
            raise ValueError(
                f"a pipeline message of {tensor.numel()} elements is not divisible "
                f"by tp={self.tp} (scatter/gather)"
            )
        return tensor.reshape(-1).chunk(self.tp)[self.index].contiguous()

    def exchange(self, stage: Any, sends: Sequence[Any], recvs: Sequence[Any]) -> None:
        """``stage.exchange(sends, recvs)`` with every tensor cut to this rank's slice, then the
        full receive buffers filled by an all-gather over the TP group."""
        small_sends = [replace(m, tensor=self._slice(m.tensor)) for m in sends]
        small_recvs = [replace(m, tensor=torch.empty_like(self._slice(m.tensor))) for m in recvs]
        self.sent_bytes += sum(m.tensor.numel() * m.tensor.element_size() for m in small_sends)
        stage.scatter_gather = None  # the stage's own exchange, once, without this hook
        try:
            stage.exchange(small_sends, small_recvs)
        finally:
            stage.scatter_gather = self
        for full, small in zip(recvs, small_recvs):
            parts = [torch.empty_like(small.tensor) for _ in range(self.tp)]
            dist.all_gather(parts, small.tensor, group=self.group)
            with torch.no_grad():
                full.tensor.view(-1).copy_(torch.cat(parts))


def enable_scatter_gather(stage: Any, tp_group: Group) -> ScatterGather:
    """Make ``stage`` (a :class:`~minitorch_dist.pipeline.PipelineStage`) scatter its messages
    over ``tp_group`` and gather what it receives; returns the :class:`ScatterGather` (its
    ``sent_bytes``)."""
    sg = ScatterGather(tp_group)
    stage.scatter_gather = sg
    return sg
