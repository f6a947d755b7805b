"""How a sequence is cut over the ranks of a context-parallel group (chapter 8, lab08.4).

Two layouts of a sequence of ``s`` tokens over ``cp`` ranks:

    contiguous   rank r holds tokens [r s/cp, (r + 1) s/cp): chunk r of cp
    zigzag       the sequence is cut into 2 cp half-chunks; rank r holds half-chunks r and
                 2 cp - 1 - r, concatenated (Megatron-LM's context parallelism; Brandon et al.
                 2023, "Striped Attention", section 3, and the "zig-zag" ring of ring-flash-attn)

Under a causal mask, the contiguous layout gives the last rank the most work (its queries see
every earlier key) and rank 0 the least; the zig-zag pairs an early half-chunk with a late one,
so every rank's work is the same (:func:`minitorch_dist.context_parallel.cost.causal_work`).

Everything that is a function of a token's place must move with the token: the RoPE position
ids and the labels. :func:`shard_positions` gives a rank's position ids; the labels are sharded
with :func:`shard_sequence` like the inputs.
"""

from __future__ import annotations

import torch

from minitorch_dist.checks import check_int
from minitorch_dist.context_parallel.chunks import LAYOUTS, check_layout, chunk_ids

__all__ = [
    "LAYOUTS",
    "check_layout",
    "chunk_ids",
    "shard_positions",
    "shard_sequence",
    "unshard_sequence",
]


def shard_sequence(
    x: torch.Tensor, rank: int, world_size: int, *, layout: str = "zigzag", dim: int = 2
) -> torch.Tensor:
    """Rank ``rank``'s part of ``x`` along ``dim`` (the sequence): ``seq / cp`` tokens, laid out
    by ``layout``. q, k, v (b, heads, s, d) use ``dim=2``; tokens and labels (b, s) ``dim=1``."""
    check_layout(x.shape[dim], world_size, layout)
    check_int("rank", rank, minimum=0, maximum=world_size - 1)
    if layout == "contiguous":
        return x.chunk(world_size, dim=dim)[rank].contiguous()  # (.., s/cp, ..)
    # BEGIN SOLUTION lab08.4: zig-zag: half-chunks r and 2cp-1-r, concatenated
    halves = x.chunk(2 * world_size, dim=dim)  # 2cp pieces of s/(2cp)
    first, last = halves[rank], halves[2 * world_size - 1 - rank]
    return torch.cat([first, last], dim=dim)  # (.., s/cp, ..)
    # END SOLUTION


def unshard_sequence(
    shards: list[torch.Tensor], *, layout: str = "zigzag", dim: int = 2
) -> torch.Tensor:
    """The whole sequence from every rank's shard (in rank order): the inverse of
    :func:`shard_sequence`."""
    cp = len(shards)
    check_layout(sum(t.shape[dim] for t in shards), cp, layout)
    if layout == "contiguous":
        return torch.cat(list(shards), dim=dim)
    halves: list[torch.Tensor | None] = [None] * (2 * cp)
    for rank, shard in enumerate(shards):
        first, last = shard.chunk(2, dim=dim)
        halves[rank], halves[2 * cp - 1 - rank] = first, last
    return torch.cat(halves, dim=dim)  # type: ignore[arg-type]


def shard_positions(
    seq_len: int, rank: int, world_size: int, *, layout: str = "zigzag"
) -> torch.Tensor:
    """The position ids (int64, ``seq_len / cp`` of them) of the tokens rank ``rank`` holds:
    what RoPE must rotate them by, and where their labels come from."""
    check_layout(seq_len, world_size, layout)
    check_int("rank", rank, minimum=0, maximum=world_size - 1)
    if layout == "contiguous":
        return torch.arange(seq_len).chunk(world_size)[rank].clone()
    # BEGIN SOLUTION lab08.4: the positions of half-chunks r and 2cp-1-r
    half = seq_len // (2 * world_size)
    first, last = rank, 2 * world_size - 1 - rank
    return torch.cat(
        [
            torch.arange(first * half, (first + 1) * half),
            torch.arange(last * half, (last + 1) * half),
        ]
    )
    # END SOLUTION
