"""Tensor parallelism as a transform of the tiny Llama: ``apply_tensor_parallel(model, group)``.

In place, like torchtitan's ``apply_tp``: each Block's attention is split by heads (wq, wk, wv
column-parallel, wo row-parallel) and its SwiGLU by the intermediate width (w1, w3
column-parallel, w2 row-parallel); the embedding and the head become vocabulary-parallel. Each
shard is cut from the full master weight, so a model built after the same seed on every rank is
the single-process model, distributed. Parameter names do not change (``layers.0.attn.wq.weight``
is rank r's slice of the reference's tensor of that name):
:func:`~minitorch_dist.tensor_parallel.measure.tp_shards` says which slice.

Attention and SwiGLU enter their region once (f, or the all-gather under sp) for the linears that
share their input; their class is swapped for a subclass that does that, as FSDP2's
``fully_shard`` swaps a module's class, so the submodules and their names stay.

Grouped-query attention: when tp divides kv_heads each rank keeps kv_heads/t key/value heads.
When tp is a multiple of kv_heads, rank r keeps a COPY of kv head ``r // (t / kv_heads)`` -- the
one its query heads read -- and the copies' gradients are summed over the ranks that share it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from minitorch_dist.checks import check_bool, check_divisible, check_int
from minitorch_dist.comm.collectives import all_reduce_copy
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.models.llama import Attention, Block, Llama, SwiGLU
from minitorch_dist.tensor_parallel.cost import kv_heads_per_rank
from minitorch_dist.tensor_parallel.functions import copy_to_tp, gather_from_sp
from minitorch_dist.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from minitorch_dist.tensor_parallel.sequence import save_shard_regather, sequence_parallel_norms
from minitorch_dist.tensor_parallel.vocab import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
    vocab_parallel_head,
)

__all__ = [
    "TensorParallelAttention",
    "TensorParallelSwiGLU",
    "apply_tensor_parallel",
    "check_tp_config",
    "parallelize_block",
    "sum_replica_grads",
    "tp_group_of",
    "tp_loss_fn",
]


def tp_group_of(group_or_grid: Any) -> Any:
    """A process group, or the tp group of a :class:`~minitorch_dist.grid.ProcessGrid`."""
    if hasattr(group_or_grid, "layout") and callable(getattr(group_or_grid, "group", None)):
        return group_or_grid.group("tp")
    return group_or_grid


def check_tp_config(config: Any, tp: int) -> None:
    """ValueError naming the constraint tp violates: heads, ffn_hidden (and kv_heads, or tp by
    kv_heads) must divide."""
    check_int("tp", tp)
    check_divisible("heads", config.heads, "tp", tp)
    check_divisible("ffn_hidden", config.ffn_hidden, "tp", tp)
    kv_heads_per_rank(config.kv_heads, tp)
    if config.tie_embeddings:
        raise ValueError("tie_embeddings=True is not supported by apply_tensor_parallel")


class _Region:
    """Enter a tensor-parallel region once: f (copy_to_tp), or under sp the all-gather of the
    sequence -- with ``regather``, saving only this rank's shard of the gathered input."""

    tp_group: Any
    sp: bool
    regather: bool = False

    def _run(self, x: torch.Tensor, body: Any) -> torch.Tensor:
        if not self.sp:
            return body(copy_to_tp(x, self.tp_group))
        full = gather_from_sp(x, self.tp_group)  # (b, s/t, h) -> (b, s, h)
        if not self.regather:
            return body(full)
        with save_shard_regather(full, x, self.tp_group):
            return body(full)


class TensorParallelAttention(_Region, Attention):
    """Attention over this rank's heads; enters the region once for wq, wk and wv."""

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return self._run(x, lambda full: Attention.forward(self, full, cos, sin))  # wo reduces


class TensorParallelSwiGLU(_Region, SwiGLU):
    """SwiGLU over this rank's f/t intermediate columns; enters the region once for w1 and w3."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._run(x, lambda full: SwiGLU.forward(self, full))  # w2 reduces


def sum_replica_grads(param: nn.Parameter, group: Group, index: int, parts: int) -> None:
    """Make the gradient of ``param`` -- copy ``index`` of ``parts`` distinct slices, each held by
    t/parts ranks -- the sum over the ranks holding the same copy (one all-reduce over the tp
    group of a (parts, ...) buffer in which each rank fills its own slot)."""

    def hook(grad: torch.Tensor) -> torch.Tensor:
        slots = grad.new_zeros((parts, *grad.shape))  # (KV, d, h)
        slots[index] = grad
        return all_reduce_copy(slots, group)[index]  # slot k: sum over the ranks holding copy k

    param.register_hook(hook)


def parallelize_block(
    block: Block, group: Group, *, sp: bool = False, regather: bool = False
) -> Block:
    """Split one Block's attention by heads and its SwiGLU by columns over ``group``, in place.
    ``regather`` (with sp): save the regions' gathered inputs as shards, gather them again in
    backward (Megatron-LM's choice)."""
    t, r = group_size(group), group_rank(group)
    attn, mlp = block.attn, block.mlp
    check_divisible("heads", attn.heads, "tp", t)
    check_divisible("ffn_hidden", mlp.w1.out_features, "tp", t)
    kv_heads_per_rank(attn.kv_heads, t)
    # BEGIN SOLUTION lab07.3: column-parallel wq, wk, wv, w1, w3; row-parallel wo, w2; GQA copies
    column = dict(sp=sp, enter_region=False)  # the region is entered once, by the module
    attn.wq = ColumnParallelLinear.from_linear(attn.wq, group, **column)
    if attn.kv_heads % t == 0:  # each rank its own kv_heads/t heads
        attn.wk = ColumnParallelLinear.from_linear(attn.wk, group, **column)
        attn.wv = ColumnParallelLinear.from_linear(attn.wv, group, **column)
    else:  # t = m * kv_heads: rank r keeps a copy of kv head r // m, the one its q heads read
        index = r // (t // attn.kv_heads)
        for name in ("wk", "wv"):
            layer = ColumnParallelLinear.from_linear(
                getattr(attn, name), group, index=index, parts=attn.kv_heads, **column
            )
            sum_replica_grads(layer.weight, group, index, attn.kv_heads)
            setattr(attn, name, layer)
    attn.wo = RowParallelLinear.from_linear(attn.wo, group, sp=sp)
    mlp.w1 = ColumnParallelLinear.from_linear(mlp.w1, group, **column)
    mlp.w3 = ColumnParallelLinear.from_linear(mlp.w3, group, **column)
    mlp.w2 = RowParallelLinear.from_linear(mlp.w2, group, sp=sp)
    attn.__class__, mlp.__class__ = TensorParallelAttention, TensorParallelSwiGLU
    for module in (attn, mlp):
        module.tp_group, module.sp = group, sp
    # END SOLUTION
    attn.regather = mlp.regather = check_bool("regather", regather) and sp
    return block


def apply_tensor_parallel(
    model: Llama,
    group: Group,
    *,
    sp: bool = False,
    vocab_multiple: int = 128,
    reduce_norm_grads: bool = True,
    regather: bool = False,
) -> Llama:
    """Tensor-parallelise the tiny Llama over ``group`` (a process group or a ProcessGrid, whose
    tp group is used), in place; returns ``model``, whose forward then gives this rank's logits
    (b, s, V_p/t) over the vocabulary padded to :func:`padded_vocab_size` (``vocab_multiple``).

    ``model`` may be a part of the Llama, such as a pipeline stage (a :class:`LlamaStage`): its
    blocks are cut, and its embedding and head where it has them.

    ``sp=True`` adds sequence parallelism: the embedding's output, every norm and residual work on
    s/t tokens. The RMSNorm weights stay replicated and their gradients are all-reduced over the
    group as backward computes them (``reduce_norm_grads=False`` leaves that out: the replicas
    drift apart -- don't). ``regather=True`` (with sp) stores the gathered inputs of the regions
    as s/t shards and all-gathers them again in backward, as Megatron-LM does: every stored
    activation 1/t, two more all-gathers per layer. ValueError when heads, ffn_hidden or kv_heads
    do not fit tp.
    """
    group = tp_group_of(group)
    t = group_size(group)
    check_tp_config(model.config, t)
    check_bool("sp", sp)
    check_bool("reduce_norm_grads", reduce_norm_grads)
    if sp and reduce_norm_grads:
        sequence_parallel_norms(model, group)  # before the weights are cut: see lab 7
    for block in model.layers:
        parallelize_block(block, group, sp=sp, regather=regather)
    if getattr(model, "embed", None) is not None:
        model.embed = VocabParallelEmbedding.from_embedding(
            model.embed, group, multiple=vocab_multiple, sp=sp
        )
    if getattr(model, "head", None) is not None:
        model.head = vocab_parallel_head(model.head, group, multiple=vocab_multiple, sp=sp)
    model.tp_group, model.sp = group, sp
    if sp:
        model.sequence_shards = t  # what flows between blocks: 1/t of the tokens attention sees
    return model


def tp_loss_fn(group: Group, vocab_size: int | None) -> Any:
    """``(local_logits, targets) -> mean loss`` for the harness: the vocab-parallel cross-entropy
    with the padded columns (index >= vocab_size) masked, averaged over tokens."""
    group = tp_group_of(group)

    def loss_fn(local_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return vocab_parallel_cross_entropy(
            local_logits, targets, group, vocab_size=vocab_size
        ).mean()

    return loss_fn
