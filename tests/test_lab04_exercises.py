"""Lab 4's exercises: their worked answers (instructor-only, like every tests/test_*exercises.py:
the student edition leaves this file out, so it ships neither the answers nor code computing
them)."""

from __future__ import annotations

import copy

import pytest
import torch
from test_accumulate import TINY, ragged_batch

from minitorch_dist.accumulate import (
    count_tokens,
    measure_accumulation,
    naive_accumulation_step,
    split_micro_batches,
    token_loss_sum,
)
from minitorch_dist.models import Llama


def test_lab4_exercise_answers() -> None:
    """Lab 4's exercises: per-micro-batch weights of the mean of means (checked against the
    naive step's loss) and the largest micro-batch under 6 MiB with full recomputation."""
    torch.manual_seed(0)
    model = Llama(TINY)
    micro = split_micro_batches(*ragged_batch(), 4)
    tokens = [count_tokens(t) for _, t in micro]
    weights = [sum(tokens) / (len(tokens) * n) for n in tokens]
    with torch.no_grad():
        sums = [float(token_loss_sum(model(x), y)) for x, y in micro]
    naive = naive_accumulation_step(copy.deepcopy(model), micro)["loss"]
    assert sum(w * s for w, s in zip(weights, sums)) / sum(tokens) == pytest.approx(
        float(naive), rel=1e-6
    )
    peaks = {
        mbs: measure_accumulation(TINY, micro_batch=mbs, grad_acc=16 // mbs, seq_len=128)[
            "peak_total"
        ]
        for mbs in (4, 8)
    }
    assert peaks[4] <= 6 * 2**20 < peaks[8]
