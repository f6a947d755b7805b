"""Collective names that moved between torch versions, behind one stable name each.

torch 2.13 renamed ``all_gather_into_tensor`` / ``reduce_scatter_tensor`` to ``all_gather_single``
/ ``reduce_scatter_single`` and makes the old names print a FutureWarning, which would land in
every notebook's output. These wrappers call whichever name this torch has, quietly, inside
:func:`~minitorch_dist.scopes.backend_scope`, so that a memory tracker leaves out the
buffers gloo makes for itself.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.comm.groups import Group
from minitorch_dist.scopes import backend_scope

__all__ = ["all_gather_into_tensor", "reduce_scatter_tensor"]

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_gather_into_tensor(
    output: torch.Tensor, input: torch.Tensor, group: Group = None, async_op: bool = False
) -> Any:
    """Concatenate every rank's ``input`` (shape ``(k, ...)``) into ``output`` (``(n*k, ...)``)."""
    with backend_scope():
        return _all_gather(output, input, group=group, async_op=async_op)


def reduce_scatter_tensor(
    output: torch.Tensor,
    input: torch.Tensor,
    op: Any = dist.ReduceOp.SUM,
    group: Group = None,
    async_op: bool = False,
) -> Any:
    """Reduce ``input`` (``(n*k, ...)``) over ranks; rank r keeps chunk r in ``output``."""
    with backend_scope():
        return _reduce_scatter(output, input, op=op, group=group, async_op=async_op)
