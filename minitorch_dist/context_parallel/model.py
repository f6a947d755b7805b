"""The tiny Llama with context parallelism: every rank holds the whole model and ``s / cp`` of
each sequence's tokens.

    apply_context_parallel(model, group, layout="zigzag")            # in place
    logits = model(shard_sequence(tokens, rank, cp, dim=1))          # this rank's tokens only

Three things change, none of them in the model's code (the transform swaps classes, as
tensor parallelism does): each Block's attention core becomes ring attention over ``group``;
RoPE rotates each token by its position in the WHOLE sequence (:func:`shard_positions`), not
by its place in the shard; and after backward each weight's gradient is averaged over the group
(every rank's loss is the mean over its own ``s / cp`` tokens, so the mean of the ranks' losses is
the global mean, and the average of their gradients its gradient). With data parallelism too,
``grad_group`` is the dp x cp group (Megatron-LM reduces weight gradients over both).

Everything else -- the embedding, the norms, the MLP, the head, the loss -- works token by token
and needs nothing: the labels are sharded like the tokens (:func:`cp_split`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.checks import check_choice
from minitorch_dist.context_parallel.layout import LAYOUTS, shard_positions, shard_sequence
from minitorch_dist.context_parallel.ring import ring_attention
from minitorch_dist.models.llama import Llama
from minitorch_dist.reference import Batch

__all__ = [
    "ContextParallelCore",
    "ContextParallelLlama",
    "LayoutShard",
    "apply_context_parallel",
    "average_grads",
    "cp_split",
]


def _size(group: Any) -> int:
    return dist.get_world_size(group) if dist.is_initialized() else 1


def _rank(group: Any) -> int:
    return dist.get_rank(group) if dist.is_initialized() else 0


class ContextParallelCore(nn.Module):
    """Causal attention of this rank's shard of q, k, v (b, heads, s/cp, d) by ``attention``
    (default :func:`ring_attention`), in place of the Llama's ``AttentionCore``."""

    def __init__(self, group: Any, layout: str, attention: Any = None) -> None:
        super().__init__()
        self.group, self.layout = group, layout
        self.attention = ring_attention if attention is None else attention

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attention(q, k, v, group=self.group, layout=self.layout)


class ContextParallelLlama(Llama):
    """A Llama whose forward takes this rank's shard of the tokens (b, s/cp) and returns its
    logits (b, s/cp, V); RoPE uses the tokens' positions in the whole sequence."""

    cp_group: Any
    layout: str

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        cp, rank = _size(self.cp_group), _rank(self.cp_group)
        seq_len = tokens.shape[1] * cp  # the whole sequence
        x = self.embed_tokens(tokens)  # (b, s/cp, h)
        cos, sin = self.rope(seq_len, tokens.device, x.dtype)  # (s, d) each
        positions = shard_positions(seq_len, rank, cp, layout=self.layout).to(tokens.device)
        return self.output(self.run_blocks(x, cos[positions], sin[positions]))  # (b, s/cp, V)


def average_grads(model: nn.Module, group: Any) -> None:
    """Average every parameter's gradient over ``group`` as backward finishes it (a hook per
    parameter: all-reduce, then divide by the group's size)."""
    n = _size(group)

    def hook(param: torch.Tensor) -> None:
        dist.all_reduce(param.grad, group=group)
        param.grad.div_(n)

    for p in model.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(hook)


def apply_context_parallel(
    model: Llama,
    group: Any = None,
    *,
    layout: str = "zigzag",
    attention: Any = None,
    grad_group: Any = None,
) -> ContextParallelLlama:
    """Make ``model`` context-parallel over ``group`` (None: the default group), in place.
    ``attention(q, k, v, *, group, layout)`` replaces each core (default ring attention; the
    all-gather or Ulysses variants of ``alternatives`` fit too). Weight gradients are averaged
    over ``grad_group`` (default ``group``; dp x cp with data parallelism)."""
    check_choice("layout", layout, LAYOUTS)
    for block in model.layers:
        block.attn.core = ContextParallelCore(group, layout, attention)
    model.__class__ = ContextParallelLlama
    model.cp_group, model.layout = group, layout
    if _size(group) > 1:
        average_grads(model, group if grad_group is None else grad_group)
    return model  # type: ignore[return-value]


def cp_split(layout: str = "zigzag") -> Any:
    """``split(batch, rank, cp)`` for :func:`minitorch_dist.reference.run_training`: this rank's
    tokens and labels of every row, laid out by ``layout``."""

    def split(batch: Batch, rank: int, world_size: int) -> Batch:
        x, y = batch  # (b, s) each
        return (shard_sequence(x, rank, world_size, layout=layout, dim=1),
                shard_sequence(y, rank, world_size, layout=layout, dim=1))  # fmt: skip

    return split


class LayoutShard:
    """The part of a full tensor rank ``rank`` of ``cp`` holds along ``dim`` under ``layout``:
    a :class:`~minitorch_dist.reference.Shard` for layouts (``.of(full)``)."""

    def __init__(self, rank: int, cp: int, layout: str, dim: int = 1) -> None:
        self.rank, self.cp, self.layout, self.dim = rank, cp, layout, dim

    def of(self, full: torch.Tensor) -> torch.Tensor:
        return shard_sequence(full, self.rank, self.cp, layout=self.layout, dim=self.dim)
