"""The tiny Llama with context parallelism: every rank holds the whole model and ``s / cp`` of
each sequence's tokens.

    apply_context_parallel(model, group, layout="zigzag")            # in place
    logits = model(shard_sequence(tokens, rank, cp, dim=1))          # this rank's tokens only

Three things change, none of them in the model's code: each Block's attention core becomes ring
attention over ``group``; RoPE rotates each token by its position in the WHOLE sequence
(:func:`shard_positions`), not by its place in the shard (the transform sets the model's
``positions`` hook, :class:`ShardPositions`); and after backward each weight's gradient is
averaged over the group (every rank's loss is the mean over its own ``s / cp`` tokens, so the mean of the ranks' losses is
the global mean, and the average of their gradients its gradient). With data parallelism too,
``grad_group`` is the dp x cp group (Megatron-LM reduces weight gradients over both).

Everything else -- the embedding, the norms, the MLP, the head, the loss -- works token by token
and needs nothing: the labels are sharded like the tokens
(:func:`~minitorch_dist.context_parallel.compare.cp_split`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.checks import check_bool, check_choice
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.context_parallel.layout import LAYOUTS, shard_positions
from minitorch_dist.context_parallel.ring import ring_attention
from minitorch_dist.models.llama import Llama

__all__ = [
    "ContextParallelCore",
    "ShardPositions",
    "apply_context_parallel",
    "average_grads",
]


class ContextParallelCore(nn.Module):
    """Causal attention of this rank's shard of q, k, v (b, heads, s/cp, d) by ``attention``
    (default :func:`ring_attention`), in place of the Llama's ``AttentionCore``."""

    def __init__(self, group: Group, layout: str, attention: Any = None) -> None:
        super().__init__()
        self.group, self.layout = group, layout
        self.attention = ring_attention if attention is None else attention

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attention(q, k, v, group=self.group, layout=self.layout)


class ShardPositions:
    """The RoPE positions hook (:meth:`Llama.rope_at`) of a context-parallel model: this rank's
    ``length`` tokens are the tokens ``shard_positions(seq_len, rank, cp, layout)`` of the whole
    sequence, whose length is ``seq_len`` if given, else ``length * cp``."""

    def __init__(self, group: Group, layout: str, seq_len: int | None = None) -> None:
        self.group, self.layout, self.seq_len = group, layout, seq_len

    def __call__(self, length: int) -> tuple[int, torch.Tensor]:
        cp, rank = group_size(self.group), group_rank(self.group)
        seq_len = length * cp if self.seq_len is None else self.seq_len  # the whole sequence
        return seq_len, shard_positions(seq_len, rank, cp, layout=self.layout)  # (s/cp,)


def average_grads(model: nn.Module, group: Group) -> None:
    """Average every parameter's gradient over ``group`` as backward finishes it (a hook per
    parameter: all-reduce, then divide by the group's size)."""
    n = group_size(group)

    def hook(param: torch.Tensor) -> None:
        dist.all_reduce(param.grad, group=group)
        param.grad.div_(n)

    for p in model.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(hook)


def apply_context_parallel(
    model: Llama,
    group: Group = None,
    *,
    layout: str = "zigzag",
    attention: Any = None,
    grad_group: Group = None,
    seq_len: int | None = None,
    sync_grads: bool = True,
) -> Llama:
    """Make ``model`` -- a :class:`Llama` or any part of one, such as a pipeline stage --
    context-parallel over ``group`` (None: the default group), in place; returns it.

    Each core becomes ``attention(q, k, v, *, group, layout)`` (default ring attention; the
    all-gather or Ulysses variants of ``alternatives`` fit too), and the model's ``positions``
    hook gives RoPE each token's place in the whole sequence (of ``seq_len`` tokens; default:
    the shard's length times cp). With ``sync_grads`` weight gradients are averaged over
    ``grad_group`` (default ``group``; dp x cp with data parallelism); leave it False where an
    optimizer over dp x cp reduces them (ZeRO, chapter 11)."""
    check_choice("layout", layout, LAYOUTS)
    check_bool("sync_grads", sync_grads)
    for block in model.layers:
        block.attn.core = ContextParallelCore(group, layout, attention)
    model.positions = ShardPositions(group, layout, seq_len)
    model.cp_group, model.layout = group, layout
    if sync_grads and group_size(group) > 1:
        average_grads(model, group if grad_group is None else grad_group)
    return model
