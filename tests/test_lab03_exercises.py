"""Lab 3's exercises: their worked answers (instructor-only, like every tests/test_*exercises.py:
the student edition leaves this file out, so it ships neither the answers nor code computing
them)."""

from __future__ import annotations

import dataclasses

from minitorch_dist.models import LlamaConfig
from minitorch_dist.recompute import measure_recompute

TINY = LlamaConfig.from_preset("tiny")


def test_lab3_exercise_answers() -> None:
    """Lab 3's exercises: the full-recompute bytes of the tiny Llama, and the sequence length
    from which the unfused attention's probabilities outweigh everything else."""
    s, b, p = 256, 8, 4
    h, layers, vocab, d = TINY.hidden, TINY.layers, TINY.vocab_size, TINY.head_dim
    by_hand = (
        layers * p * b * s * h
        + p * 2 * s * d
        + p * (3 * b * s * h + b * s)
        + 4 * b * s * vocab
        + 8 * b * s
        + 8
    )
    assert (
        by_hand == measure_recompute(TINY, seq_len=s, micro_batch=b, policy="full")["activations"]
    )
    long = dataclasses.replace(TINY, max_seq_len=1024)
    for s, outweighs in ((394, False), (395, True)):
        probabilities = layers * 4 * 2 * TINY.heads * s * s
        total = measure_recompute(long, seq_len=s, micro_batch=2, attention="math")["activations"]
        assert (probabilities > total - probabilities) == outweighs
