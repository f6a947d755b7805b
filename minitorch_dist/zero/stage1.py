"""Stage 1 (P_os): each rank keeps and updates only its 1/N shard of the optimizer states.

Rajbhandari et al. 2020, section 5.1. Parameters and gradients stay whole on every rank; Adam's m
and v exist only for this rank's shard, so a rank holds 4 Psi + 4 Psi + 8 Psi / N bytes in fp32
(2 Psi + 2 Psi + 12 Psi / N with mixed precision). The step, per unit:

    flat_grad (N*S,)  --reduce-scatter-->  shard of the summed gradient (S,), / N
    Adam on the shard (S,) of the parameters, with m, v of size S
    shard (S,) of every rank  --all-gather-->  full (N*S,): every parameter updated

A reduce-scatter and an all-gather move exactly what one all-reduce moves (the ring all-reduce is
those two phases), so stage 1 costs plain data parallelism's 2 Psi (section 7.2.1), and saves
memory for free. Both collectives work in place: rank r's shard of the flat buffer is both its
input and its output.

Lab 6, task lab06.1, asks for the two collectives.
"""

from __future__ import annotations

from torch import nn

from minitorch_dist.comm import all_gather_into_tensor, reduce_scatter_tensor
from minitorch_dist.zero.base import ZeroOptimizer

__all__ = ["ZeroStage1"]


class ZeroStage1(ZeroOptimizer):
    """ZeRO stage 1: optimizer states sharded; parameters and gradients whole."""

    stage = 1

    def _setup(self) -> None:
        for u in self.units:
            u.full = u.flatten([p.detach() for p in u.params])  # (N*S,), zero padding at the end
            u.view_params_on(u.full)
            u.flat_grad = u.full.new_zeros(u.padded_numel)  # (N*S,): p.grad are views of it
            lo, hi = u.shard_range(self.rank)
            u.shard = nn.Parameter(u.full[lo:hi])  # a view: Adam writes into the parameters
            u.shard.grad = u.flat_grad[lo:hi]
            u.collect_grads()

    def _reduce_gradients(self) -> None:
        """Leave in this rank's shard of each ``flat_grad`` the gradient averaged over ranks."""
        for u in self.units:
            u.collect_grads()
            lo, hi = u.shard_range(self.rank)
            # BEGIN SOLUTION lab06.1: reduce-scatter the flat gradient, keep this rank's shard, average it
            reduce_scatter_tensor(u.flat_grad[lo:hi], u.flat_grad, group=self.group)  # (S,)
            u.flat_grad[lo:hi].div_(self.world_size)
            # END SOLUTION

    def _gather_parameters(self) -> None:
        """Copy every rank's updated shard into every rank's ``full`` parameters."""
        for u in self.units:
            lo, hi = u.shard_range(self.rank)
            # BEGIN SOLUTION lab06.1: all-gather the updated shards into the full flat parameters
            all_gather_into_tensor(u.full, u.full[lo:hi], group=self.group)  # (S,) -> (N*S,)
            # END SOLUTION

    def comm_payloads(self) -> dict[str, int]:
        """A reduce-scatter and an all-gather of every unit (stage 2 the same)."""
        return {"reduce_scatter": self._unit_bytes(), "all_gather": self._unit_bytes()}
