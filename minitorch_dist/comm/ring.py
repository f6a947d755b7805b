"""The ring algorithm, built from point-to-point sends: reduce-scatter, all-gather, all-reduce.

Ranks sit in a ring and only ever talk to their neighbours: send right, receive from the left.
A tensor is cut into ``n`` chunks (``tensor_split``, so sizes need not divide; with fewer elements
than ranks some chunks are empty). Each step moves one chunk per rank, so every link is busy at
once and each rank sends ``(n - 1) / n * S`` bytes per phase, whatever ``n`` is: the
bandwidth-optimal schedule (Patarasuk and Yuan 2009, §3; Thakur et al. 2005 build the same
all-reduce from a reduce-scatter and an all-gather for long messages).

    reduce-scatter: after n-1 steps rank r holds chunk r summed over all ranks
    all-gather:     after n-1 steps every rank holds every chunk
    all-reduce:     reduce-scatter, then all-gather                     2 (n - 1) / n * S bytes

Lab 5, task lab05.1, asks for the three functions below; ``_exchange`` is given.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from minitorch_dist.comm.groups import Group

__all__ = ["ring_all_gather", "ring_all_reduce", "ring_reduce_scatter"]


def _exchange(send: torch.Tensor, recv: torch.Tensor, group: Group) -> None:
    """Send ``send`` to the right neighbour while receiving ``recv`` from the left one."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    right = dist.get_global_rank(group, (rank + 1) % n) if group else (rank + 1) % n
    left = dist.get_global_rank(group, (rank - 1) % n) if group else (rank - 1) % n
    ops = [dist.P2POp(dist.isend, send, right, group), dist.P2POp(dist.irecv, recv, left, group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def _check(tensor: torch.Tensor, name: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} needs a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} needs a contiguous tensor (it works on a flat view)")


def ring_reduce_scatter(tensor: torch.Tensor, group: Group = None) -> None:
    """Sum ``tensor`` over ranks in place, chunk-wise: afterwards chunk ``rank`` is complete.

    Chunks are ``tensor.view(-1).tensor_split(n)``. At step ``t`` (``t = 0 .. n-2``) rank ``r``
    sends its partial sum of chunk ``(r - t - 1) mod n`` to the right and adds what arrives from
    the left into chunk ``(r - t - 2) mod n``; after ``n - 1`` steps chunk ``r`` holds the sum
    over all ``n`` ranks (Patarasuk and Yuan 2009, §3). The other chunks hold partial sums.
    """
    _check(tensor, "ring_reduce_scatter")
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    # BEGIN SOLUTION lab05.1: the reduce-scatter phase of the ring
    chunks = tensor.view(-1).tensor_split(n)  # n views, sizes differ by at most one element
    for step in range(n - 1):
        out, inc = (rank - step - 1) % n, (rank - step - 2) % n
        buf = torch.empty_like(chunks[inc])
        _exchange(chunks[out].contiguous(), buf, group)
        chunks[inc].add_(buf)  # partial sum of chunk `inc` over step + 2 ranks
    # END SOLUTION


def ring_all_gather(tensor: torch.Tensor, group: Group = None) -> None:
    """In place: rank r contributes chunk r of ``tensor``; afterwards all chunks are everywhere.

    At step ``t`` rank ``r`` forwards chunk ``(r - t) mod n`` (its own at ``t = 0``, then the
    one it just received) to the right and stores what arrives from the left as chunk
    ``(r - t - 1) mod n``.
    """
    _check(tensor, "ring_all_gather")
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    # BEGIN SOLUTION lab05.1: the all-gather phase of the ring
    chunks = tensor.view(-1).tensor_split(n)
    for step in range(n - 1):
        out, inc = (rank - step) % n, (rank - step - 1) % n
        buf = torch.empty_like(chunks[inc])
        _exchange(chunks[out].contiguous(), buf, group)
        chunks[inc].copy_(buf)  # a finished chunk: stored, and forwarded at the next step
    # END SOLUTION


def ring_all_reduce(tensor: torch.Tensor, group: Group = None) -> None:
    """Sum ``tensor`` over ranks in place: a ring reduce-scatter followed by a ring all-gather.

    Equal to ``dist.all_reduce(tensor, group=group)`` (up to the order of floating-point
    additions); each rank sends ``2 (n - 1) / n * S`` bytes for a tensor of ``S`` bytes, exactly
    when ``n`` divides the number of elements (Patarasuk and Yuan 2009, §3).
    """
    _check(tensor, "ring_all_reduce")
    # BEGIN SOLUTION lab05.1: all-reduce = reduce-scatter, then all-gather
    ring_reduce_scatter(tensor, group)  # rank r now owns the finished chunk r
    ring_all_gather(tensor, group)  # ... and sends it around the ring
    # END SOLUTION
