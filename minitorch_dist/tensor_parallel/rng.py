"""Random streams under tensor parallelism: which ranks must draw the same dropout mask.

Megatron-LM (Shoeybi et al. 2019, appendix B.2) keeps two generators per rank:

* outside the regions the activations are replicated, so every rank of the tensor-parallel
  group drops the same elements: one stream, seeded alike (Megatron seeds it with ``seed``);
* inside a region each rank holds its own heads (or its own slice of the MLP), which must
  drop independently: a stream per tensor-parallel rank (Megatron-LM's
  ``model_parallel_cuda_manual_seed``: ``seed + 2718 + tp_rank``).

Under sequence parallelism the activations outside the regions are split along the sequence:
each rank holds different tokens, so they need per-rank streams too (Megatron-LM then runs the
whole block under its tensor-parallel generator).
"""

from __future__ import annotations

import torch

from minitorch_dist.comm.groups import Group, group_rank

__all__ = ["REGION_SEED_OFFSET", "tp_generators"]

REGION_SEED_OFFSET = 2718  # Megatron-LM's offset for the tensor-parallel stream


def tp_generators(
    seed: int, group: Group = None, *, sp: bool = False
) -> tuple[torch.Generator, torch.Generator]:
    """``(outside, inside)`` CPU generators for this rank of ``group``: ``outside`` for dropout
    on the activations between regions (the same on every rank, or per rank when ``sp``),
    ``inside`` for dropout inside a region (per rank)."""
    rank = group_rank(group)
    inside = torch.Generator().manual_seed(seed + REGION_SEED_OFFSET + rank)
    if sp:
        return torch.Generator().manual_seed(seed + REGION_SEED_OFFSET + rank), inside
    return torch.Generator().manual_seed(seed), inside
