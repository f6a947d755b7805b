"""Naive data parallelism: same start everywhere, then one all-reduce per gradient after backward.

Li et al. 2020 ("PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
§3.2.1) describe this as the naive solution: broadcast the model from one rank so that every
replica starts from the same weights, let each rank run forward and backward on its own slice
of the global batch, then all-reduce every gradient and divide by the number of ranks ``n``.
Because the loss of the global batch is the mean of the ranks' mean losses (equal slices), the
averaged gradient is exactly the gradient of the global batch, and the replicas stay identical.

Its two costs are the subject of ``bucketed.py``: the communication starts only once backward
has finished, so nothing overlaps, and one collective per parameter pays the latency ``alpha``
once per tensor, however small the tensor.

Lab 5, task lab05.2: ``broadcast_parameters`` and
``DataParallelNaive.finish_gradient_synchronization``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.comm.groups import Group
from minitorch_dist.data_parallel.base import DataParallelBase

__all__ = ["DataParallelNaive", "broadcast_parameters"]


def broadcast_parameters(module: nn.Module, group: Group = None) -> None:
    """Copy rank 0's parameters and buffers (frozen ones included) to every rank, in place.

    Rank 0 of ``group``; ``dist.broadcast`` takes the *global* rank of the source.
    """
    # BEGIN SOLUTION lab05.2: copy rank 0's parameters and buffers to every rank
    src = dist.get_global_rank(group, 0) if group is not None else 0
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:  # a tied weight comes once
            dist.broadcast(tensor.detach(), src=src, group=group)
    # END SOLUTION


class DataParallelNaive(DataParallelBase):
    """Data parallelism without overlap or buckets: all-reduce each gradient after backward.

    ``loss.backward()`` returns with every trainable ``.grad`` averaged over ``group``; inside
    ``no_sync()`` it leaves them local, for gradient accumulation.
    """

    def __init__(
        self,
        module: nn.Module,
        group: Group = None,
        *,
        find_unused_parameters: bool = False,
    ) -> None:
        super().__init__(module, group, find_unused_parameters=find_unused_parameters)
        broadcast_parameters(module, group)

    def finish_gradient_synchronization(self) -> None:
        """All-reduce (sum) every trainable parameter's ``.grad``, then divide it by ``n``."""
        if not self._start_sync():  # given: already done (a no-op), or unused parameters
            return
        # BEGIN SOLUTION lab05.2: all-reduce every gradient and divide by the number of ranks
        for p in self.params:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=self.group)  # sum over ranks
            p.grad.div_(self.world_size)  # ... mean over ranks
        # END SOLUTION
        self._end_sync()
