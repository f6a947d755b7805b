"""Hybrid context parallelism: Ulysses inside a node, the ring across nodes.

USP (Fang and Zhao 2024, "USP: A Unified Sequence Parallelism Approach") and
Megatron-LM's ``cp_comm_type="a2a+p2p"`` (Transformer Engine's hierarchical context
parallelism) arrange the ``c = u * r`` ranks of a context-parallel group as a grid: ``u`` ranks
(one node, fast links) form a Ulysses group, ``r`` such groups form the ring. Rank
``g = i * u + j`` is Ulysses rank ``j`` of ring rank ``i``.

    q, k, v: (b, H, s/c, d), this rank's shard in the usual layout over all c ranks
    all-to-all over the Ulysses group   -> (b, H/u, s/r, d): H/u heads, the ring rank's tokens
    ring attention over the ring group  -> (b, H/u, s/r, d)
    inverse all-to-all                  -> (b, H, s/c, d)

The sequence is laid out over all ``c`` ranks exactly as for the ring or Ulysses
(:func:`~minitorch_dist.context_parallel.shard_sequence` with ``world_size = c``), so nothing
else in the model changes. The Ulysses group of ring rank ``i`` holds, together, the ring's
shard of ring rank ``i`` over ``r`` ranks: contiguous, chunks ``i u .. i u + u - 1`` of ``c``
(chunk ``i`` of ``r``); zig-zag, half-chunks ``i u + j`` (together half-chunk ``i`` of ``2r``)
and ``2c - 1 - i u - j`` (together half-chunk ``2r - 1 - i`` of ``2r``, in reverse order of
``j``). After the all-to-all a rank puts the second halves back in order and runs the
package's ring attention, with its zig-zag block plan, over ``r`` ranks.

Bytes (:func:`~minitorch_dist.context_parallel.cost.hybrid_attention_bytes`): Ulysses' four
all-to-alls over ``u`` ranks plus the ring's K/V blocks of ``KV/u`` heads over ``r`` ranks. The
all-to-alls are exposed (attention waits for them); the ring's messages overlap its blocks.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_divisible, check_int
from minitorch_dist.context_parallel.alternatives import _AllToAll
from minitorch_dist.context_parallel.layout import check_layout
from minitorch_dist.context_parallel.ring import ring_attention

__all__ = ["HybridGroups", "hybrid_attention", "hybrid_groups", "hybrid_order"]


class HybridGroups:
    """The two sub-groups of one rank of a ``u x r`` hybrid group: ``ulysses`` (the ``u``
    consecutive ranks ``i u .. i u + u - 1``) and ``ring`` (the ``r`` ranks ``j, j + u, ...``).
    Build it with :func:`hybrid_groups` on every rank."""

    def __init__(self, u: int, r: int, ulysses: Any, ring: Any) -> None:
        self.u, self.r, self.ulysses, self.ring = u, r, ulysses, ring


def hybrid_groups(u: int, r: int, *, ranks: list[int] | None = None) -> HybridGroups:
    """Create the Ulysses and ring sub-groups of ``ranks`` (default: the whole world, which must
    have ``u * r`` ranks). Every rank of the world must call it (``dist.new_group`` is
    collective), with the same arguments."""
    check_int("u", u)
    check_int("r", r)
    ranks = list(range(dist.get_world_size())) if ranks is None else list(ranks)
    if len(ranks) != u * r:
        raise ValueError(f"the hybrid group needs u*r={u * r} ranks, got {len(ranks)}")
    me = dist.get_rank()
    ulysses = ring = None
    for i in range(r):  # every rank creates every group, in the same order
        group = dist.new_group([ranks[i * u + j] for j in range(u)])
        if me in ranks[i * u : (i + 1) * u]:
            ulysses = group
    for j in range(u):
        members = [ranks[i * u + j] for i in range(r)]
        group = dist.new_group(members)
        if me in members:
            ring = group
    return HybridGroups(u, r, ulysses, ring)


def hybrid_order(local: int, u: int, layout: str) -> torch.Tensor:
    """Index into the ``u * local`` tokens an all-to-all gathers (the Ulysses ranks' shards one
    after another) that gives the ring rank's shard in its layout. Contiguous: the identity.
    Zig-zag: the first halves in rank order, then the second halves in reverse rank order."""
    idx = torch.arange(u * local).view(u, local)
    if layout == "contiguous":
        return idx.flatten()
    first, second = idx.chunk(2, dim=1)  # (u, local/2) each
    return torch.cat([first.flatten(), second.flip(0).flatten()])


def hybrid_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    groups: HybridGroups,
    layout: str = "zigzag",
    counter: Any = None,
) -> torch.Tensor:
    """Causal attention of this rank's shard by Ulysses over ``groups.ulysses`` and the ring
    over ``groups.ring``: q (b, H, s/c, d), k and v (b, KV, s/c, d), laid out over the ``c = u r``
    ranks by ``shard_sequence(x, rank, c, layout=layout)``; returns (b, H, s/c, d), equal to
    that shard of full causal attention, differentiable. ``counter``: a CommCounter entered
    around the ring's messages (enter one around the whole call to count the all-to-alls too).
    ValueError unless u divides the heads and the kv heads."""
    u, r = groups.u, groups.r
    check_divisible("heads", q.shape[1], "u", u)
    check_divisible("kv_heads", k.shape[1], "u", u)
    check_layout(q.shape[2] * u * r, u * r, layout)
    order = hybrid_order(q.shape[2], u, layout)
    back = torch.argsort(order)
    # heads scattered, sequence gathered: (b, H/u, s/r, d) in the ring's layout over r ranks
    q, k, v = (_AllToAll.apply(t, groups.ulysses, 1, 2)[:, :, order] for t in (q, k, v))
    out = ring_attention(q, k, v, group=groups.ring, layout=layout, counter=counter)
    return _AllToAll.apply(out[:, :, back], groups.ulysses, 2, 1)  # (b, H, s/c, d)
