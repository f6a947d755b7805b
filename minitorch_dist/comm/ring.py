"""The ring algorithm, built from point-to-point sends: reduce-scatter, all-gather, all-reduce.

Ranks sit in a ring and only ever talk to their neighbours: send right, receive from the left.
A tensor is cut into ``n`` chunks (``tensor_split``, so sizes need not divide). Each step moves
one chunk per rank, so every link is busy at once and each rank sends ``(n - 1) / n * S`` bytes
per phase, whatever ``n`` is: the bandwidth-optimal schedule (Patarasuk and Yuan 2009, §3).

    reduce-scatter: after n-1 steps rank r holds chunk r summed over all ranks
    all-gather:     after n-1 steps every rank holds every chunk
    all-reduce:     reduce-scatter, then all-gather                     2 (n - 1) / n * S bytes
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["ring_all_gather", "ring_all_reduce", "ring_reduce_scatter"]


def _exchange(send: torch.Tensor, recv: torch.Tensor, group: dist.ProcessGroup | None) -> None:
    """Send ``send`` to the right neighbour while receiving ``recv`` from the left one."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    right = dist.get_global_rank(group, (rank + 1) % n) if group else (rank + 1) % n
    left = dist.get_global_rank(group, (rank - 1) % n) if group else (rank - 1) % n
    ops = [dist.P2POp(dist.isend, send, right, group), dist.P2POp(dist.irecv, recv, left, group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def ring_reduce_scatter(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> None:
    """Sum ``tensor`` over ranks in place, chunk-wise: afterwards chunk ``rank`` is complete."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    chunks = tensor.view(-1).tensor_split(n)
    for step in range(n - 1):
        out, inc = (rank - step - 1) % n, (rank - step - 2) % n
        buf = torch.empty_like(chunks[inc])
        _exchange(chunks[out].contiguous(), buf, group)
        chunks[inc].add_(buf)  # partial sum of chunk `inc` over step + 2 ranks


def ring_all_gather(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> None:
    """In place: rank r contributes chunk r of ``tensor``; afterwards all chunks are everywhere."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    chunks = tensor.view(-1).tensor_split(n)
    for step in range(n - 1):
        out, inc = (rank - step) % n, (rank - step - 1) % n
        buf = torch.empty_like(chunks[inc])
        _exchange(chunks[out].contiguous(), buf, group)
        chunks[inc].copy_(buf)


def ring_all_reduce(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> None:
    """Sum ``tensor`` over ranks in place: a ring reduce-scatter followed by a ring all-gather."""
    if not tensor.is_contiguous():
        raise ValueError("ring_all_reduce needs a contiguous tensor (it works on a flat view)")
    ring_reduce_scatter(tensor, group)
    ring_all_gather(tensor, group)
