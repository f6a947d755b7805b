"""The training step every data-parallel variant and its single-process reference share.

The global batch of ``gbs`` sequences is split over ``dp`` ranks and, on each rank, into
``grad_acc`` micro-batches of ``mbs``: ``gbs = mbs * grad_acc * dp``. Rank ``r`` takes rows
``r * gbs / dp`` to ``(r + 1) * gbs / dp``. Each micro-batch's loss is divided by ``grad_acc``,
so the accumulated gradient is that of the rank's mean loss; averaging over the ranks then gives
the gradient of the global batch's mean loss, which is what one process computes on the whole
batch. The backward passes of all micro-batches but the last run inside ``no_sync()``
(Li et al. 2020, §3.2.4), so the gradients are averaged over the ranks once per step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from minitorch_dist.models.data import synthetic_batch

__all__ = ["batch_slice", "make_batches", "train_step"]


def batch_slice(tensor: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s rows of a global batch: ``gbs / world_size`` consecutive rows."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if tensor.shape[0] % world_size:
        raise ValueError(
            f"the global batch ({tensor.shape[0]} rows) must divide by the {world_size} ranks"
        )
    rows = tensor.shape[0] // world_size
    return tensor[rank * rows : (rank + 1) * rows]


def make_batches(
    vocab: int, global_batch: int, seq_len: int, steps: int, seed: int = 0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` global batches ``(inputs, targets)`` of synthetic tokens, each (gbs, seq_len)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return [
        synthetic_batch(vocab, global_batch, seq_len, seed=seed, generator=gen)
        for _ in range(steps)
    ]


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    grad_acc: int = 1,
) -> float:
    """One optimizer step on this rank's batch in ``grad_acc`` micro-batches; returns the loss.

    Works for a plain module (one process) and for any wrapper with ``no_sync()`` (ours and
    torch's ``DistributedDataParallel``).
    """
    if isinstance(grad_acc, bool) or not isinstance(grad_acc, int) or grad_acc < 1:
        raise ValueError(f"grad_acc must be an int >= 1, got {grad_acc!r}")
    if inputs.shape[0] % grad_acc:
        raise ValueError(f"the batch ({inputs.shape[0]} rows) must divide by grad_acc={grad_acc}")
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    micro = list(zip(inputs.chunk(grad_acc), targets.chunk(grad_acc)))
    for k, (x, y) in enumerate(micro):
        last = k == grad_acc - 1
        skip = getattr(model, "no_sync", None) if not last else None
        with skip() if skip is not None else contextlib.nullcontext():
            loss = loss_fn(model(x), y) / grad_acc  # the mean over the rank's batch, in parts
            loss.backward()
        total += loss.item()
    optimizer.step()
    return total
