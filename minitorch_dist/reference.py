"""One harness for the claim every parallel technique makes: N ranks train like one process.

    ref = reference_run(model_fn, optimizer_fn, batches)            # one process, whole batch
    runs = launch(rank_fn, 4)     # each rank: run_training(its model, ..., rank=r, world_size=4)
    assert_runs_match(runs, ref)                                      # outputs, grads, weights

The recipe, the same for data parallelism, ZeRO and the model-parallel chapters:

1. :func:`make_batches` draws ``steps`` global batches of synthetic tokens, identical everywhere.
2. The reference is one process that builds the model after ``torch.manual_seed(seed)`` and
   trains it on each whole global batch (:func:`reference_run`).
3. Each rank builds the same model after the same seed, wraps or cuts it with the technique and
   trains it on its part of each batch: :func:`batch_slice` (data parallelism: rows
   ``r * gbs / N`` to ``(r + 1) * gbs / N``) or the whole batch (tensor parallelism), through the
   same :func:`run_training` loop.
4. :func:`compare_runs` (or :func:`assert_runs_match`, which raises) checks, per tensor, the
   first step's outputs, every parameter's gradient of the first step (or the slice of it a rank
   holds: :class:`Shard`) and the weights after the last step. In fp64 the only difference is the
   order of additions, so the tolerance is :data:`EXACT`; in fp32 it is :data:`TIGHT` (callers
   may pass their own).

Why equal slices give the reference's gradient: the loss is a mean over tokens, and each rank
divides its micro-batches' losses by ``grad_acc``; the mean over ranks of equal-sized slices'
means is the global mean (Li et al. 2020, "PyTorch Distributed", section 3.2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from minitorch_dist.checks import check_int
from minitorch_dist.comparison import (
    EXACT,
    TIGHT,
    Comparison,
    Holding,
    Run,
    Shard,
    assert_runs_match,
    compare,
    compare_runs,
    scale_mistake,
)
from minitorch_dist.models.configs import LlamaConfig
from minitorch_dist.models.data import synthetic_batch
from minitorch_dist.models.llama import cross_entropy

__all__ = [
    "EXACT",
    "TIGHT",
    "TINY",
    "Batch",
    "Comparison",
    "Holding",
    "Run",
    "Shard",
    "assert_runs_match",
    "adamw",
    "batch_slice",
    "compare",
    "compare_runs",
    "full_cross_entropy",
    "make_batches",
    "param_grads",
    "param_values",
    "rank_batch",
    "reference_run",
    "run_training",
    "scale_mistake",
    "train_step",
]

Batch = tuple[torch.Tensor, torch.Tensor]  # (inputs, targets), each (batch, seq_len)
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

TINY = LlamaConfig.from_preset("tiny")


def full_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean next-token loss in the logits' own dtype: fp64 stays fp64, so comparisons can be
    exact (:func:`~minitorch_dist.models.llama.cross_entropy` computes in fp32)."""
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    )


def adamw(lr: float) -> Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]:
    """The optimizer factory both sides of a model-parallel comparison use:
    ``AdamW(params, lr=lr, weight_decay=0.1)``."""
    return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=0.1)


def make_batches(
    vocab: int, global_batch: int, seq_len: int, steps: int, seed: int = 0
) -> list[Batch]:
    """``steps`` global batches ``(inputs, targets)`` of synthetic tokens, each (gbs, seq_len)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return [
        synthetic_batch(vocab, global_batch, seq_len, seed=seed, generator=gen)
        for _ in range(steps)
    ]


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


def rank_batch(batch: Batch, rank: int, world_size: int) -> Batch:
    """Rank ``rank``'s rows of both tensors of ``(inputs, targets)``."""
    return batch_slice(batch[0], rank, world_size), batch_slice(batch[1], rank, world_size)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: LossFn,
    *,
    grad_acc: int = 1,
) -> float:
    """One optimizer step on this rank's batch in ``grad_acc`` micro-batches; returns the loss.

    Works for a plain module (one process) and for any wrapper with ``no_sync()`` (ours and
    torch's ``DistributedDataParallel``): the backward passes of all micro-batches but the last
    run inside it, so gradients are reduced once per step (Li et al. 2020, section 3.2.4).
    """
    loss, _ = _forward_backward(model, optimizer, inputs, targets, loss_fn, grad_acc)
    optimizer.step()
    return loss


def _forward_backward(
    model: nn.Module,
    optimizer: Any,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: LossFn,
    grad_acc: int,
) -> tuple[float, torch.Tensor]:
    """Zero the gradients, then forward and backward every micro-batch: (loss, outputs)."""
    check_int("grad_acc", grad_acc)
    if inputs.shape[0] % grad_acc:
        raise ValueError(f"the batch ({inputs.shape[0]} rows) must divide by grad_acc={grad_acc}")
    optimizer.zero_grad()  # torch's default since 2.0: set_to_none=True
    total, outputs = 0.0, []
    for k, (x, y) in enumerate(zip(inputs.chunk(grad_acc), targets.chunk(grad_acc))):
        skip = getattr(model, "no_sync", None) if k < grad_acc - 1 else None
        with skip() if skip is not None else contextlib.nullcontext():
            out = model(x)
            loss = loss_fn(out, y) / grad_acc  # the mean over the rank's batch, in parts
            loss.backward()
        total += loss.item()
        outputs.append(out.detach())
    return total, torch.cat(outputs)


def param_grads(model: nn.Module, optimizer: Any = None) -> dict[str, torch.Tensor]:
    """Every trainable parameter's ``.grad`` by name (a tied weight once, under its first name)."""
    return {
        n: p.grad.detach().clone()
        for n, p in model.named_parameters()
        if p.requires_grad and p.grad is not None
    }


def param_values(model: nn.Module, optimizer: Any = None) -> dict[str, torch.Tensor]:
    """Every trainable parameter's value by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def run_training(
    model: nn.Module,
    optimizer: Any,
    batches: Iterable[Batch],
    *,
    loss_fn: LossFn = cross_entropy,
    rank: int = 0,
    world_size: int = 1,
    grad_acc: int = 1,
    split: Callable[[Batch, int, int], Batch] | None = rank_batch,
    grads: Callable[[nn.Module, Any], dict[str, torch.Tensor]] = param_grads,
    weights: Callable[[nn.Module, Any], dict[str, torch.Tensor]] | None = param_values,
    around_step: Callable[[int], contextlib.AbstractContextManager] | None = None,
) -> Run:
    """Train on ``batches``, recording a :class:`Run`; the loop both sides of a comparison run.

    ``split(batch, rank, world_size)`` picks this rank's part of each global batch (None: the
    whole batch, as tensor-parallel ranks see it). ``grads(model, optimizer)`` and
    ``weights(model, optimizer)`` read what to compare, by name: by default ``.grad`` and the
    values of the trainable parameters; a sharded technique passes functions that read its shards
    (``weights`` may be a collective, e.g. ZeRO-3 gathering its parameters: every rank calls it).
    ``model`` may be a wrapper: its ``no_sync()`` is used when present. ``around_step(step)``
    returns a context manager each step runs inside (a ``CommCounter``, a timer).
    """
    run = Run()
    for step, batch in enumerate(batches):
        inputs, targets = split(batch, rank, world_size) if split is not None else batch
        with around_step(step) if around_step is not None else contextlib.nullcontext():
            loss, outputs = _forward_backward(model, optimizer, inputs, targets, loss_fn, grad_acc)
            if step == 0:
                run.outputs, run.grads = outputs, grads(model, optimizer)
            optimizer.step()
        run.losses.append(loss)
    run.weights = weights(model, optimizer) if weights is not None else {}
    return run


def reference_run(
    model_fn: Callable[[], nn.Module],
    optimizer_fn: Callable[[Iterable[nn.Parameter]], Any],
    batches: Sequence[Batch],
    *,
    seed: int = 0,
    loss_fn: LossFn = cross_entropy,
    grad_acc: int = 1,
    dtype: torch.dtype | None = None,
    grads: Callable[[nn.Module, Any], dict[str, torch.Tensor]] = param_grads,
    weights: Callable[[nn.Module, Any], dict[str, torch.Tensor]] | None = param_values,
) -> Run:
    """The single-process reference: ``model_fn()`` after ``torch.manual_seed(seed)`` (then cast
    to ``dtype``), ``optimizer_fn`` over its trainable parameters, each whole global batch.
    ``grads`` and ``weights`` read what to compare, as in :func:`run_training`."""
    torch.manual_seed(seed)
    model = model_fn()
    if dtype is not None:
        model = model.to(dtype)
    optimizer = optimizer_fn([p for p in model.parameters() if p.requires_grad])
    return run_training(
        model,
        optimizer,
        batches,
        loss_fn=loss_fn,
        grad_acc=grad_acc,
        split=None,
        grads=grads,
        weights=weights,
    )
