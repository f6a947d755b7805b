"""Gradient accumulation: one optimizer step over a batch too large to process at once (lab04.1).

The global batch of ``gbs = mbs x grad_acc`` sequences (times the data-parallel degree, in
chapter 5) is cut into ``grad_acc`` micro-batches of ``mbs`` sequences. Each micro-batch runs
forward and backward on its own, and its gradient is *added* to ``.grad`` (autograd accumulates
by default); the optimizer steps once, after the last one. Only one micro-batch's activations are
alive at a time, so activation memory follows ``mbs``, not ``gbs``.

Since the gradient is linear in the loss, accumulation reproduces the large batch exactly -- if
the loss is normalised the same way. The large batch's loss is the mean over its *tokens*:

    L = (1 / N) sum_{tokens t} l_t,     N = number of real (non-padding) target tokens.

The tempting implementation averages each micro-batch's mean loss, (1 / G) sum_g mean_g, which
weights every micro-batch alike: a token in a micro-batch with few real tokens counts more than
one in a full micro-batch. The two agree only when every micro-batch holds the same number of real
tokens, which padding and packing break. The correct step counts the tokens of the whole global
batch first and divides each micro-batch's *summed* loss by that count.

The same averaging question comes back across data-parallel ranks; Goyal et al. 2017 ("Accurate,
Large Minibatch SGD", section 3) settle it by normalising each worker's loss by the total
minibatch size kn, not by the per-worker size n.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.checks import check_int
from minitorch_dist.models.llama import cross_entropy

__all__ = [
    "IGNORE_INDEX",
    "MicroBatch",
    "accumulation_step",
    "count_tokens",
    "grad_acc_steps",
    "naive_accumulation_step",
    "pad_ragged",
    "split_micro_batches",
    "token_loss_sum",
]

IGNORE_INDEX = -100  # target id that the loss skips (padding), as in F.cross_entropy
MicroBatch = tuple[torch.Tensor, torch.Tensor]  # (inputs, targets), each (mbs, s)


def count_tokens(targets: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> int:
    """Number of real target tokens: those not equal to ``ignore_index``."""
    return int((targets != ignore_index).sum())


def grad_acc_steps(global_tokens: int, *, seq_len: int, micro_batch: int, dp: int = 1) -> int:
    """Micro-batches per optimizer step for a global batch of ``global_tokens`` tokens:
    gbs = mbs x grad_acc x dp sequences of ``seq_len`` tokens, so
    grad_acc = global_tokens / (seq_len x micro_batch x dp), which must come out whole."""
    for name, value in (
        ("global_tokens", global_tokens),
        ("seq_len", seq_len),
        ("micro_batch", micro_batch),
        ("dp", dp),
    ):
        check_int(name, value)
    per_round = seq_len * micro_batch * dp  # tokens of one micro-batch on every rank
    if global_tokens % per_round:
        raise ValueError(
            f"global_tokens={global_tokens} is not a multiple of seq_len x micro_batch"
            f" x dp = {per_round}"
        )
    return global_tokens // per_round


def split_micro_batches(
    inputs: torch.Tensor, targets: torch.Tensor, grad_acc: int
) -> list[MicroBatch]:
    """Cut a global batch (gbs, s) into ``grad_acc`` micro-batches of gbs / grad_acc sequences,
    in order. The micro-batches are views of the global batch (no copy)."""
    check_int("grad_acc", grad_acc)
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError(
            f"inputs and targets must both be (batch, seq), got "
            f"{tuple(inputs.shape)} and {tuple(targets.shape)}"
        )
    if inputs.shape[0] % grad_acc:
        raise ValueError(
            f"the global batch of {inputs.shape[0]} sequences is not divisible by "
            f"grad_acc={grad_acc}"
        )
    return list(zip(inputs.chunk(grad_acc), targets.chunk(grad_acc)))


def pad_ragged(
    inputs: torch.Tensor,
    targets: torch.Tensor,
    lengths: Sequence[int],
    *,
    pad_id: int = 0,
    ignore_index: int = IGNORE_INDEX,
) -> MicroBatch:
    """Right-pad each row to ragged lengths: row i keeps its first ``lengths[i]`` tokens; after
    them its inputs become ``pad_id`` and its targets ``ignore_index`` (returned as copies)."""
    batch, seq = inputs.shape
    if len(lengths) != batch:
        raise ValueError(f"need one length per row: {batch} rows, {len(lengths)} lengths")
    if any(isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= seq for n in lengths):
        raise ValueError(f"every length must be an integer in [0, seq_len={seq}], got {lengths}")
    pad = torch.arange(seq) >= torch.tensor(lengths)[:, None]  # (batch, seq): True on padding
    return inputs.masked_fill(pad, pad_id), targets.masked_fill(pad, ignore_index)


def token_loss_sum(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Sum (not mean) of the next-token losses over the real targets, in fp32.

    ``logits`` (b, s, V), ``targets`` (b, s). Divided by the real-token count of the *global*
    batch it gives each micro-batch's share of the global mean loss.
    """
    flat = logits.reshape(-1, logits.shape[-1]).float()  # (b*s, V)
    return F.cross_entropy(flat, targets.reshape(-1), ignore_index=ignore_index, reduction="sum")


def _check_micro_batches(micro_batches: Sequence[MicroBatch], ignore_index: int) -> None:
    if not isinstance(micro_batches, Sequence) or len(micro_batches) == 0:
        raise ValueError(
            "micro_batches must be a non-empty sequence of (inputs, targets): the "
            "step needs them all up front to count the global batch's tokens"
        )
    if all(count_tokens(t, ignore_index) == 0 for _, t in micro_batches):
        raise ValueError("the global batch holds no real target token: the mean loss is undefined")


def naive_accumulation_step(
    model: nn.Module,
    micro_batches: Sequence[MicroBatch],
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = cross_entropy,
) -> dict[str, Any]:
    """The common mistake, for comparison: backward of each micro-batch's *mean* loss divided by
    the number of micro-batches. Equal to the large batch only when every micro-batch holds as
    many real tokens as every other. Returns ``{"loss", "micro_batches"}``."""
    _check_micro_batches(micro_batches, IGNORE_INDEX)
    losses = []
    for inputs, targets in micro_batches:
        loss = loss_fn(model(inputs), targets) / len(micro_batches)  # mean of the means
        loss.backward()
        losses.append(loss.detach())
    return {"loss": torch.stack(losses).sum(), "micro_batches": len(micro_batches)}


def accumulation_step(
    model: nn.Module,
    micro_batches: Sequence[MicroBatch],
    *,
    ignore_index: int = IGNORE_INDEX,
    no_sync: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> dict[str, Any]:
    """Forward and backward of every micro-batch, accumulating into ``.grad`` the gradient of the
    global batch's token-mean loss, exactly as one pass over the whole batch would.

    Does not zero the gradients and does not step: the caller calls ``optimizer.zero_grad()``
    before and ``optimizer.step()`` after, as for one large batch. ``no_sync``, when given, is a
    function returning a context manager in which the backward runs for every micro-batch but the
    last, such as a data-parallel wrapper's ``no_sync`` (chapter 5): gradients are then
    communicated once per step, not once per micro-batch.

    Returns ``{"loss": the global token-mean loss (a detached 0-dim tensor), "tokens": real
    tokens in the global batch, "micro_batches": how many}``.
    """
    _check_micro_batches(micro_batches, ignore_index)
    if no_sync is not None and not callable(no_sync):
        raise ValueError(
            f"no_sync must be a function returning a context manager, got {type(no_sync).__name__}"
        )
    # BEGIN SOLUTION lab04.1: token-weighted loss over all micro-batches, one backward each
    tokens = sum(count_tokens(t, ignore_index) for _, t in micro_batches)  # N: the global count
    losses = []
    last = len(micro_batches) - 1
    for i, (inputs, targets) in enumerate(micro_batches):
        sync = no_sync() if no_sync is not None and i < last else contextlib.nullcontext()
        with sync:
            loss = token_loss_sum(model(inputs), targets, ignore_index) / tokens  # share of L
            loss.backward()  # adds d(share)/dw to .grad
        losses.append(loss.detach())
    return {
        "loss": torch.stack(losses).sum(),
        "tokens": tokens,
        "micro_batches": len(micro_batches),
    }
    # END SOLUTION
