"""The same initial weights on every rank: checked at construction, or rank 0's broadcast.

ZeRO stitches each parameter together from the shards the ranks updated. If the ranks started
from different weights (a different seed, pretrained weights loaded on rank 0 only), the model
after one step is a mixture: each element comes from whichever rank owns it. DDP broadcasts rank
0's parameters when it is built; ZeRO does the same with ``sync_params=True``, and otherwise checks
and refuses. The check is cheap: per parameter three fp64 numbers (the sum, the sum of squares,
and a sum weighted by the position, so that a permutation shows too) are all-gathered and
compared with rank 0's, exactly. Buffers are checked and broadcast too, as DDP broadcasts them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from minitorch_dist.comm.groups import Group

__all__ = ["check_or_sync_params", "fingerprint"]


def fingerprint(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(len(tensors), 3) fp64: sum, sum of squares and position-weighted sum of each tensor."""
    rows = []
    for t in tensors:
        x = t.detach().reshape(-1).double()
        weight = torch.arange(1, x.numel() + 1, dtype=torch.float64, device=x.device) % 7 + 1
        rows.append(torch.stack([x.sum(), (x * x).sum(), (x * weight).sum()]))
    if not rows:
        return torch.zeros(0, 3, dtype=torch.float64)
    return torch.stack(rows)  # (P, 3)


@torch.no_grad()
def check_or_sync_params(
    named: Sequence[tuple[str, torch.Tensor]], group: Group, sync: bool | None
) -> None:
    """Broadcast rank 0's values of ``named`` (parameters, then buffers: ``(label, tensor)``
    with labels such as ``"parameter 'w'"``) over ``group`` (``sync``), or raise ``ValueError``
    naming the first one that differs from rank 0's on some rank (every rank raises);
    ``sync=None``: neither (only to show what the mistake does, as chapter 11's pitfalls)."""
    world = dist.get_world_size(group)
    if world == 1 or not named or sync is None:
        return
    if sync:
        src = dist.get_global_rank(group, 0) if group is not None else 0
        for _, t in named:
            dist.broadcast(t.data, src=src, group=group)
        return
    mine = fingerprint([t for _, t in named])
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine, group=group)
    for i, (name, _) in enumerate(named):
        for r in range(1, world):
            if not torch.equal(everyone[r][i], everyone[0][i]):
                raise ValueError(
                    f"{name} differs between rank 0 and rank {r}: ZeRO needs the same "
                    "initial weights on every rank (seed every rank alike, or pass "
                    "sync_params=True to broadcast rank 0's, as DDP does)"
                )
