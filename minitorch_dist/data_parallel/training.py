"""The training step every data-parallel variant and its single-process reference share.

It lives in :mod:`minitorch_dist.reference`, the one harness that compares N ranks with one
process for every technique of the book; the names are re-exported here because chapter 5 and
lab 5 introduce them as data parallelism's loop.

The global batch of ``gbs`` sequences is split over ``dp`` ranks and, on each rank, into
``grad_acc`` micro-batches of ``mbs``: ``gbs = mbs * grad_acc * dp``. Rank ``r`` takes rows
``r * gbs / dp`` to ``(r + 1) * gbs / dp``. Each micro-batch's loss is divided by ``grad_acc``,
so the accumulated gradient is that of the rank's mean loss; averaging over the ranks then gives
the gradient of the global batch's mean loss, which is what one process computes on the whole
batch. The backward passes of all micro-batches but the last run inside ``no_sync()``
(Li et al. 2020, §3.2.4), so the gradients are averaged over the ranks once per step.
"""

from __future__ import annotations

from minitorch_dist.reference import batch_slice, make_batches, train_step

__all__ = ["batch_slice", "make_batches", "train_step"]
