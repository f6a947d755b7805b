"""Data parallelism overlapped with backward: gradients in buckets, each all-reduced asynchronously.

The naive wrapper waits for the whole backward pass, then runs one collective per parameter.
Li et al. 2020 ("PyTorch Distributed", §3.2.2-3.2.3) fix both costs at once:

* **overlap**: a gradient is final as soon as autograd has accumulated it, long before backward
  ends, so a hook on each parameter can start communicating while the earlier layers are still
  computing theirs;
* **buckets**: instead of one all-reduce per tensor, gradients are copied into flat buckets of
  about ``bucket_cap_mb`` megabytes, and a bucket is all-reduced (asynchronously, ``async_op=True``)
  as soon as all its gradients are in. Fewer, larger messages pay the latency ``alpha`` fewer
  times (the alpha-beta model of ``comm.cost``), while small enough buckets still start early.

Backward produces gradients roughly from the last layer to the first, so buckets are filled in
reverse order of ``module.parameters()``; the first bucket is kept small (1 MiB, as in torch's
DDP) so that the first all-reduce starts early. Every rank must launch its collectives in the same
order, so a full bucket waits until all buckets before it have been launched. Before the
optimizer step (at the end of backward, from the callback ``DataParallelBase`` queues), each
all-reduce is waited on, the bucket divided by ``n``, and each ``.grad`` made a view of its slot.

Lab 5, task lab05.3: ``build_buckets``, and ``_grad_ready``, ``_launch`` and
``finish_gradient_synchronization`` of ``DataParallelBucket``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.checks import check_int, check_positive
from minitorch_dist.comm.groups import Group
from minitorch_dist.data_parallel.base import DataParallelBase
from minitorch_dist.data_parallel.naive import broadcast_parameters

__all__ = ["Bucket", "DataParallelBucket", "build_buckets"]


def build_buckets(tensors: Sequence[torch.Tensor], bucket_cap_bytes: int) -> list[list[int]]:
    """Cut ``tensors`` (in the order given) into consecutive buckets; return their indices.

    A bucket takes the next tensor while its bytes stay within ``bucket_cap_bytes``; a tensor
    larger than the cap gets a bucket of its own. A bucket holds one dtype and one device only
    (it becomes one flat buffer), so a change of either starts a new bucket.
    Example: sizes 40, 40, 40, 100 bytes with a cap of 100 -> ``[[0, 1], [2], [3]]``.
    """
    check_int("bucket_cap_bytes", bucket_cap_bytes)
    # BEGIN SOLUTION lab05.3: cut the tensors into consecutive buckets of at most the cap
    buckets: list[list[int]] = []
    size = 0
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        first = tensors[buckets[-1][0]] if buckets else None
        fits = first is not None and size + nbytes <= bucket_cap_bytes
        if fits and (t.dtype, t.device) == (first.dtype, first.device):
            buckets[-1].append(i)
            size += nbytes
        else:
            buckets.append([i])
            size = nbytes
    return buckets
    # END SOLUTION


class Bucket:
    """Parameters whose gradients travel together, in one flat buffer."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self.offsets = [0]
        for p in params:
            self.offsets.append(self.offsets[-1] + p.numel())
        first = params[0]
        self.buffer = torch.zeros(self.offsets[-1], dtype=first.dtype, device=first.device)
        # slots[i]: the view of the buffer that holds params[i]'s gradient, shaped like it
        spans = zip(self.offsets, self.offsets[1:])
        self.slots = [self.buffer[a:b].view_as(p) for (a, b), p in zip(spans, params)]
        self.ready = [False] * len(params)  # ready[i]: params[i]'s gradient is in the buffer
        self.work: dist.Work | None = None  # the handle of the running all-reduce

    def slot(self, i: int) -> torch.Tensor:
        """The view of the buffer that holds ``params[i]``'s gradient, shaped like it."""
        return self.slots[i]

    @property
    def nbytes(self) -> int:
        return self.buffer.numel() * self.buffer.element_size()


class DataParallelBucket(DataParallelBase):
    """Bucketed data parallelism: async all-reduce per bucket, launched from gradient hooks.

    Same interface as ``DataParallelNaive`` and as torch's ``DistributedDataParallel``, whose
    ``bucket_cap_mb`` is in the same unit (MiB, 2**20 bytes). Like torch, the first bucket is
    capped at ``first_bucket_cap_mb`` (at most ``bucket_cap_mb``); torch closes a bucket once it
    reaches the cap, so its buckets still differ from ours a little. State during a backward
    pass: ``buckets[b].ready`` marks the gradients already copied in, ``_next`` counts the
    buckets launched so far (always a prefix: bucket 0, 1, ...), ``buckets[b].work`` holds the
    handle of a launched all-reduce. ``bucket_cap_mb=None``: one bucket.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        bucket_cap_mb: float | None = 25.0,
        first_bucket_cap_mb: float = 1.0,
        group: Group = None,
        find_unused_parameters: bool = False,
    ) -> None:
        if bucket_cap_mb is not None:
            check_positive("bucket_cap_mb", bucket_cap_mb)
        check_positive("first_bucket_cap_mb", first_bucket_cap_mb)
        super().__init__(module, group, find_unused_parameters=find_unused_parameters)
        broadcast_parameters(module, group)
        if bucket_cap_mb is None:  # one bucket (per dtype and device): the first one too
            total = sum(p.numel() * p.element_size() for p in self.params)
            bucket_cap_mb = first_bucket_cap_mb = max(1, total) / 2**20
        self.bucket_cap_bytes = max(1, int(bucket_cap_mb * 2**20))
        first_cap = min(self.bucket_cap_bytes, max(1, int(first_bucket_cap_mb * 2**20)))
        order = self.params[::-1]  # gradients arrive roughly last layer first (Li et al., §3.2.3)
        # A small first bucket (torch's DDP uses 1 MiB) gets the communication going early.
        head = build_buckets(order, first_cap)[:1]  # the first bucket only ([] without params)
        k = len(head[0]) if head else 0
        groups = [[order[i] for i in idx] for idx in head]
        groups += [
            [order[k + i] for i in idx] for idx in build_buckets(order[k:], self.bucket_cap_bytes)
        ]
        self.buckets = [Bucket(params) for params in groups]
        self._where = {}  # id(param) -> (its bucket, its place in the bucket)
        for b, bucket in enumerate(self.buckets):
            for i, p in enumerate(bucket.params):
                self._where[id(p)] = (b, i)
        self._next = 0

    def _grad_ready(self, param: nn.Parameter) -> None:
        """Copy ``param.grad`` into its bucket; launch every full bucket whose turn has come."""
        b, i = self._where[id(param)]
        bucket = self.buckets[b]
        if bucket.ready[i]:
            raise RuntimeError(
                f"the gradient of {self.name_of(param)} arrived twice before the gradients were "
                "synchronised (did an earlier backward pass stop halfway?)"
            )
        # BEGIN SOLUTION lab05.3: copy the gradient into its slot, launch full buckets in order
        bucket.slot(i).copy_(param.grad)
        bucket.ready[i] = True
        while self._next < len(self.buckets) and all(self.buckets[self._next].ready):
            self._launch(self._next)
            self._next += 1
        # END SOLUTION

    def _launch(self, b: int) -> None:
        """Start the all-reduce (sum) of bucket ``b`` without waiting for it: set its ``work``."""
        bucket = self.buckets[b]
        self._record("launch", b)
        # BEGIN SOLUTION lab05.3: start the bucket's all-reduce without waiting for it
        bucket.work = dist.all_reduce(bucket.buffer, group=self.group, async_op=True)
        # END SOLUTION
        if self.timeline is not None:  # note when the communication really finished
            bucket.work.get_future().then(lambda _: self._record("done", b))

    def finish_gradient_synchronization(self) -> None:
        """Wait for every bucket, divide it by ``n``, make each ``.grad`` a view of its slot.

        Pointing ``.grad`` at the bucket (rather than copying into it) is what torch's
        ``gradient_as_bucket_view=True`` does: no copy back, and the gradient tensors autograd
        allocated are freed. Then reset the bucket state for the next step.
        """
        if not self._start_sync():  # given: already done (a no-op), or unused parameters
            return
        # BEGIN SOLUTION lab05.3: wait for each bucket, average it, point the grads at their slots
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.buffer.div_(self.world_size)  # sum over ranks -> mean over ranks
            for i, p in enumerate(bucket.params):
                p.grad = bucket.slot(i)  # the averaged gradient, a view: no copy back
            bucket.ready = [False] * len(bucket.params)
            bucket.work = None
        self._next = 0
        # END SOLUTION
        self._end_sync()

    def _locally_used(self) -> list[bool]:
        return [self.buckets[b].ready[i] for b, i in (self._where[id(p)] for p in self.params)]

    def _fill_unused(self, used: list[bool]) -> None:
        """Zeros in the slots of the gradients that never came; launch the buckets left, in
        order (every rank launches the same all-reduces in the same order)."""
        for p, u in zip(self.params, used):
            if not u:
                b, i = self._where[id(p)]
                self.buckets[b].slot(i).zero_()
                self.buckets[b].ready[i] = True
        while self._next < len(self.buckets):
            self._launch(self._next)
            self._next += 1
