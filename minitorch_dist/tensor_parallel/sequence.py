"""Sequence parallelism's other half: the replicated RMSNorm weights (Korthikanti et al. 2022,
section 4.2.2).

Under sequence parallelism every norm runs on this rank's s/t tokens. Its weight is replicated,
but the gradient a rank computes covers only its tokens: a partial sum. The whole gradient is the
sum over the tp group. Without that all-reduce each replica takes a different step and the
"replicated" weights drift apart from the first step on (Megatron-LM all-reduces them in
``finalize_model_grads``; lab 7 breaks it on purpose).

:func:`sequence_parallel_norms` registers a hook that all-reduces each norm weight's gradient as
backward computes it (correct with gradient accumulation: each micro-batch's part is summed);
:func:`reduce_norm_grads` does the same once, on ``.grad``, for a loop that calls it after
backward and before the optimizer step.

:func:`save_shard_regather` is the option Megatron-LM always takes: a region's all-gathered input
is saved as this rank's shard and gathered again in backward (``regather=True`` in
:func:`~minitorch_dist.tensor_parallel.apply_tensor_parallel`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from minitorch_dist.comm.collectives import all_gather_copy, all_reduce_copy
from minitorch_dist.comm.groups import Group
from minitorch_dist.models.llama import RMSNorm

__all__ = ["norm_weights", "reduce_norm_grads", "save_shard_regather", "sequence_parallel_norms"]


def norm_weights(model: nn.Module) -> list[nn.Parameter]:
    """The weight of every RMSNorm in ``model`` (replicated over the tp group)."""
    return [m.weight for m in model.modules() if isinstance(m, RMSNorm)]


def sequence_parallel_norms(model: nn.Module, group: Group) -> list[Any]:
    """Register, on every RMSNorm weight of ``model``, a hook that all-reduces its gradient over
    ``group`` (sum) as backward computes it; returns the hook handles."""
    handles = []
    # BEGIN SOLUTION lab07.5: each rank's norm gradient covers its s/t tokens: sum them
    for weight in norm_weights(model):
        handles.append(weight.register_hook(lambda grad: all_reduce_copy(grad, group)))
    # END SOLUTION
    return handles


def reduce_norm_grads(model: nn.Module, group: Group) -> None:
    """All-reduce (sum) the ``.grad`` of every RMSNorm weight over ``group``, in place: the
    explicit, once-per-step form of :func:`sequence_parallel_norms` (don't use both)."""
    # BEGIN SOLUTION lab07.5: sum the partial norm gradients over the group
    for weight in norm_weights(model):
        if weight.grad is not None:
            weight.grad.copy_(all_reduce_copy(weight.grad, group))
    # END SOLUTION


class _Regather:
    """What a region keeps of its gathered input: this rank's shard, gathered again (once) when
    backward first asks for it; the copy lives until the last linear's backward has used it."""

    def __init__(self, full: torch.Tensor, local: torch.Tensor, group: Group) -> None:
        self.storage = full.untyped_storage()._cdata  # identifies full and its views
        self.local, self.group, self.full = local, group, None

    def pack(self, saved: torch.Tensor) -> Any:
        if saved.untyped_storage()._cdata != self.storage:
            return saved  # anything else the region saves is kept as it is
        return (self, saved.shape, saved.stride(), saved.storage_offset())

    @staticmethod
    def unpack(packed: Any) -> torch.Tensor:
        if isinstance(packed, torch.Tensor):
            return packed
        region, shape, stride, offset = packed
        if region.full is None:  # the first of wq, wk, wv (or w1, w3) to need it: one all-gather
            region.full = all_gather_copy(region.local, region.group, 1)  # (b, s/t, h) -> (b, s, h)
        return region.full.as_strided(shape, stride, offset)  # the view the linear saved


def save_shard_regather(
    full: torch.Tensor, local: torch.Tensor, group: Group
) -> contextlib.AbstractContextManager:
    """Inside this context, tensors saved for backward that are ``full`` (the all-gathered input
    of a region) or views of it are stored as this rank's ``local`` shard (b, s/t, h) and
    all-gathered again in backward -- Megatron-LM's sequence parallelism (Korthikanti et al.
    2022, section 4.2.2): every stored activation 1/t, for one more all-gather per region."""
    region = _Regather(full, local, group)
    return torch.autograd.graph.saved_tensors_hooks(region.pack, _Regather.unpack)
