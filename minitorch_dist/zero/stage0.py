"""Stage 0: plain data parallelism, with the same interface as the ZeRO stages (the baseline).

Every rank keeps every model state whole: parameters, gradients and Adam's m and v, 16 bytes per
parameter in fp32. After the backward pass one all-reduce per unit sums the flat gradients, which
are then divided by N, and every rank runs the same Adam update on the same numbers: N copies of
identical work and identical memory, the redundancy ZeRO removes (Rajbhandari et al. 2020,
section 5). Each rank sends 2 (N - 1) / N bytes per gradient byte (the ring all-reduce,
section 7.1). Chapter 5 builds data parallelism properly (bucketed, overlapped with backward);
this one is only the reference point of the stage table.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import nn

from minitorch_dist.zero.base import ZeroOptimizer

__all__ = ["ZeroStage0"]


class ZeroStage0(ZeroOptimizer):
    """Replicated Adam: all-reduce the gradients, update everything on every rank."""

    stage = 0

    def _shards_per_unit(self) -> int:
        return 1  # everything whole: the flat buffers need no padding

    def _setup(self) -> None:
        for u in self.units:  # one "shard" per rank: the whole unit (no padding)
            u.full = u.flatten([p.detach() for p in u.params])  # (Psi_u,)
            u.view_params_on(u.full)
            u.flat_grad = u.full.new_zeros(u.padded_numel)  # (Psi_u,): p.grad are views of it
            u.shard = nn.Parameter(u.full)  # shares the storage: Adam updates the model in place
            u.shard.grad = u.flat_grad
            u.collect_grads()

    def _reduce_gradients(self) -> None:
        for u in self.units:
            u.collect_grads()
            dist.all_reduce(u.flat_grad, group=self.group)  # (Psi_u,): summed over the ranks
            u.flat_grad.div_(self.world_size)

    def _grad_shards(self) -> tuple[list, list]:
        return [], [u.shard.grad for u in self.units]  # every rank holds the whole average

    def comm_payloads(self) -> dict[str, int]:
        return {"all_reduce": self._unit_bytes()}
