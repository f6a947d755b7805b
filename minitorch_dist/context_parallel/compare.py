"""How a context-parallel run is held against the single-process reference: each rank's part
of a batch (:func:`cp_split`, for :func:`~minitorch_dist.reference.run_training`) and of a full
output (:class:`LayoutShard`, for :func:`~minitorch_dist.reference.assert_runs_match`), both cut
by the sequence layout (:func:`~minitorch_dist.context_parallel.layout.shard_sequence`).
"""

from __future__ import annotations

from typing import Any

import torch

from minitorch_dist.context_parallel.layout import shard_sequence
from minitorch_dist.reference import Batch

__all__ = ["LayoutShard", "cp_split"]


def cp_split(layout: str = "zigzag") -> Any:
    """``split(batch, rank, cp)`` for :func:`minitorch_dist.reference.run_training`: this rank's
    tokens and labels of every row, laid out by ``layout``."""

    def split(batch: Batch, rank: int, world_size: int) -> Batch:
        x, y = batch  # (b, s) each
        return (
            shard_sequence(x, rank, world_size, layout=layout, dim=1),
            shard_sequence(y, rank, world_size, layout=layout, dim=1),
        )

    return split


class LayoutShard:
    """The part of a full tensor rank ``rank`` of ``cp`` holds along ``dim`` under ``layout``:
    a :class:`~minitorch_dist.reference.Shard` for layouts (``.of(full)``)."""

    def __init__(self, rank: int, cp: int, layout: str, dim: int = 1) -> None:
        self.rank, self.cp, self.layout, self.dim = rank, cp, layout, dim

    def of(self, full: torch.Tensor) -> torch.Tensor:
        return shard_sequence(full, self.rank, self.cp, layout=self.layout, dim=self.dim)
