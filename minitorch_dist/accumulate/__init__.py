"""Gradient accumulation (chapter 4, lab 4): a large batch in micro-batches.

``accumulate`` runs one step over micro-batches with the loss normalised by the global batch's
real-token count (and, beside it, the per-micro-batch mean that gets padding wrong), plus the
micro-batching helpers and the ``no_sync`` hook that data parallelism (chapter 5) plugs into;
``measure`` measures the peak memory of an accumulated, checkpointed step.
"""

from minitorch_dist.accumulate.accumulate import (
    IGNORE_INDEX,
    MicroBatch,
    accumulation_step,
    count_tokens,
    grad_acc_steps,
    naive_accumulation_step,
    pad_ragged,
    split_micro_batches,
    token_loss_sum,
)
from minitorch_dist.accumulate.measure import measure_accumulation

__all__ = [
    "IGNORE_INDEX",
    "MicroBatch",
    "accumulation_step",
    "count_tokens",
    "grad_acc_steps",
    "measure_accumulation",
    "naive_accumulation_step",
    "pad_ragged",
    "split_micro_batches",
    "token_loss_sum",
]
