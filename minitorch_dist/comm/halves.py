"""Lab 0's task: an all-reduce made of its two halves, a reduce-scatter and an all-gather.

Each rank holds a tensor of ``S`` bytes. A reduce-scatter sums the tensors over the ``n`` ranks
and leaves rank ``r`` with chunk ``r`` of the sum (``(n - 1) / n * S`` bytes sent); an all-gather
then hands every rank every chunk (``(n - 1) / n * S`` again). Together: the all-reduce, with
its ``2 (n - 1) / n * S`` bytes (Patarasuk and Yuan 2009, §3). ZeRO (chapter 6) uses the two
halves apart; lab 5 builds them from point-to-point messages.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .shim import all_gather_into_tensor, reduce_scatter_tensor

__all__ = ["all_reduce_by_halves"]


def all_reduce_by_halves(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over every rank of the default group, in place, with one
    :func:`reduce_scatter_tensor` and one :func:`all_gather_into_tensor` (not ``dist.all_reduce``).

    ``tensor`` must be contiguous and its number of elements divisible by the world size (the
    chunks are equal). Returns ``tensor``, which then holds the sum on every rank.
    """
    world_size = dist.get_world_size()
    if not tensor.is_contiguous():
        raise ValueError("tensor must be contiguous")
    if tensor.numel() % world_size:
        raise ValueError(
            f"tensor.numel()={tensor.numel()} must be divisible by the world size {world_size}"
        )
    # BEGIN SOLUTION lab00.1: reduce-scatter into this rank's chunk, then all-gather the chunks
    flat = tensor.view(-1)
    chunk = torch.empty(flat.numel() // world_size, dtype=flat.dtype, device=flat.device)
    reduce_scatter_tensor(chunk, flat)  # chunk = chunk `rank` of the sum over ranks
    all_gather_into_tensor(flat, chunk)  # every rank gets every chunk back
    return tensor
    # END SOLUTION
