"""Two other ways to attend over a sequence split across ranks, for comparison with the ring.

All-gather K/V (Megatron-LM's first context parallelism; Llama 3 trains its long-context stage
this way, Dubey et al. 2024, section 3.3.2): gather every rank's keys and values, then attend
locally. Simple, the same forward bytes as the ring, but every rank stores all ``s`` keys and
values for backward -- ``cp`` times the ring's. Its backward reduce-scatters dK and dV. The local
attention here walks the gathered K/V block by block, as the ring does, so that the two differ
only in where the K/V blocks come from. Those loops are the ring's own (tasks lab08.2 and lab08.3):
they sit in the same tasks' solution blocks, so a student edition stubs them with the ring.

Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses", section 3): an all-to-all turns "all heads,
s/cp tokens" into "H/cp heads, all s tokens", attention runs whole on those heads, and a second
all-to-all turns the output back. cp must divide the number of heads (and of kv heads).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minitorch_dist.checks import check_divisible
from minitorch_dist.comm.collectives import (
    all_gather_stacked,
    all_to_all_copy,
    reduce_scatter_stacked,
)
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.context_parallel.blocks import (
    block_attention,
    block_attention_backward,
    merge_partials,
)
from minitorch_dist.context_parallel.layout import check_layout, shard_positions
from minitorch_dist.context_parallel.ring import block_plan, pieces_of

__all__ = ["allgather_attention", "ulysses_attention"]


class _AllGatherAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: Group, layout: str
    ) -> torch.Tensor:
        cp, rank = group_size(group), group_rank(group)
        k_all = all_gather_stacked(k, group)  # (cp, b, KV, s/cp, d): every rank's shard
        v_all = all_gather_stacked(v, group)
        # BEGIN SOLUTION lab08.2: the ring's block loop, on the gathered K/V of each rank in turn
        qs, out = pieces_of(q, layout), [None] * (1 if layout == "contiguous" else 2)
        for src in range(cp):
            ks, vs = pieces_of(k_all[src], layout), pieces_of(v_all[src], layout)
            for i, j, kind in block_plan(rank, src, cp, layout):
                part = block_attention(qs[i], ks[j], vs[j], causal=kind == "diagonal")
                out[i] = part if out[i] is None else merge_partials(*out[i], *part)
        o, lse = torch.cat([x for x, _ in out], dim=2), torch.cat([x for _, x in out], dim=2)
        # END SOLUTION
        ctx.save_for_backward(q, k_all, v_all, o, lse)  # all s keys and values stay
        ctx.group, ctx.layout = group, layout
        return o

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
        q, k_all, v_all, o, lse = ctx.saved_tensors
        cp, rank, layout = group_size(ctx.group), group_rank(ctx.group), ctx.layout
        # BEGIN SOLUTION lab08.3: the ring's backward block loop, on the gathered K/V
        delta = (dout * o).sum(-1)
        qs, dos, lses, deltas = (pieces_of(t, layout) for t in (q, dout, lse, delta))
        dq = [torch.zeros_like(x) for x in qs]
        dk_all, dv_all = torch.zeros_like(k_all), torch.zeros_like(v_all)
        for src in range(cp):
            ks, vs = pieces_of(k_all[src], layout), pieces_of(v_all[src], layout)
            dks, dvs = pieces_of(dk_all[src], layout), pieces_of(dv_all[src], layout)
            for i, j, kind in block_plan(rank, src, cp, layout):
                g = block_attention_backward(
                    dos[i], qs[i], ks[j], vs[j], lses[i], deltas[i], causal=kind == "diagonal"
                )
                dq[i] += g[0]
                dks[j].add_(g[1])
                dvs[j].add_(g[2])
        # END SOLUTION
        dk = reduce_scatter_stacked(dk_all, ctx.group)  # each owner gets the sum of the shares
        dv = reduce_scatter_stacked(dv_all, ctx.group)
        return torch.cat(dq, dim=2), dk, dv, None, None


def allgather_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    group: Group = None,
    layout: str = "zigzag",
) -> torch.Tensor:
    """Causal attention of this rank's shard (as :func:`ring_attention`) after all-gathering
    K and V; backward reduce-scatters their gradients."""
    check_layout(q.shape[2] * group_size(group), group_size(group), layout)
    return _AllGatherAttention.apply(q, k, v, group, layout)


class _AllToAll(torch.autograd.Function):
    """Split ``scatter_dim`` into cp pieces, send piece j to rank j, concatenate what arrives
    along ``gather_dim``; backward is the reverse all-to-all."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, group: Group, scatter_dim: int, gather_dim: int
    ) -> torch.Tensor:
        ctx.group, ctx.dims = group, (scatter_dim, gather_dim)
        return all_to_all_copy(x, group, scatter_dim, gather_dim)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        scatter_dim, gather_dim = ctx.dims
        return all_to_all_copy(grad, ctx.group, gather_dim, scatter_dim), None, None, None


def ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    group: Group = None,
    layout: str = "zigzag",
) -> torch.Tensor:
    """Causal attention of this rank's shard by Ulysses: all-to-all to (b, H/cp, s, d), fused
    causal attention over the whole sequence in order, all-to-all back. ValueError unless cp
    divides the heads and the kv heads."""
    cp = group_size(group)
    check_divisible("heads", q.shape[1], "cp", cp)
    check_divisible("kv_heads", k.shape[1], "cp", cp)
    seq_len = check_layout(q.shape[2] * cp, cp, layout) * cp
    # the gathered sequence is the ranks' shards one after another: put it back in order
    order = torch.cat([shard_positions(seq_len, r, cp, layout=layout) for r in range(cp)])
    back = torch.argsort(order)  # natural position -> index in the gathered sequence
    q, k, v = (_AllToAll.apply(t, group, 1, 2)[:, :, back] for t in (q, k, v))  # (b, H/cp, s, d)
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, H/cp, s, d)
    return _AllToAll.apply(out[:, :, order], group, 2, 1)  # (b, H, s/cp, d)
