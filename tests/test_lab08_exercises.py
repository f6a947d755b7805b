"""The answers to the exercises of lab 8, recomputed through the package.

Each answer is computed twice: by the package (as the lab does) and by hand from the formulas
(ring attention: cp - 1 K/V blocks of 2 b KV (s/cp) d p bytes per rank, Liu et al. 2023,
section 3; the contiguous layout's 4r + 2 units of causal work; the zig-zag's half-chunks r and
2cp - 1 - r), so a change in the package that would silently change a published answer fails
here. Not graded (no ``lab08`` marker): the graded tests of the code these answers use live in
test_context_parallel.py.
"""

from __future__ import annotations

import math

from minitorch_dist.context_parallel import (
    causal_work,
    min_tokens_per_rank,
    ring_bytes_per_rank,
    shard_positions,
    work_imbalance,
)
from minitorch_dist.memory import llama_activation_bytes
from minitorch_dist.models import LlamaConfig


def test_lab_ex1_ring_bytes_llama3_8b_128k_cp8():
    """7 blocks of 2 x 1 x 8 x 16384 x 128 x 2 bytes = 448 MiB per layer, forward."""
    answer = (8 - 1) * 2 * 1 * 8 * (131072 // 8) * 128 * 2
    assert answer == 469_762_048 == 448 * 2**20
    assert ring_bytes_per_rank(1, 8, 131072, 128, 8) == answer
    assert ring_bytes_per_rank(1, 8, 131072, 128, 8, backward=True) == 2 * answer


def test_lab_ex2_contiguous_imbalance_cp16():
    """The last rank of 16 does 4 x 15 + 2 = 62 units; max/mean (4cp - 2)/(2cp) = 1.9375."""
    assert causal_work(15, 16, layout="contiguous") == 62
    assert work_imbalance(16, layout="contiguous") == 2 - 1 / 16 == 1.9375


def test_lab_ex3_zigzag_positions_of_rank_1():
    """2048 tokens in 8 half-chunks of 256: rank 1 holds half-chunks 1 and 6."""
    positions = shard_positions(2048, 1, 4, layout="zigzag")
    assert positions.tolist() == list(range(256, 512)) + list(range(1536, 1792))


def test_lab_section7_llama3_8b_scale():
    """What section 7 prints: activations per rank at 128k tokens divide by cp exactly, and the
    ring hides behind an H100's bf16 compute from KV p F / (H B) tokens per rank."""
    llama = LlamaConfig.from_preset("llama-3-8b")
    whole = llama_activation_bytes(llama, seq_len=131072, micro_batch=1, recompute="full")
    for cp in (4, 16):
        per_rank = llama_activation_bytes(
            llama, seq_len=131072, micro_batch=1, recompute="full", cp=cp
        )
        assert per_rank == llama_activation_bytes(
            llama, seq_len=131072 // cp, micro_batch=1, recompute="full"
        )
        assert abs(per_rank * cp - whole) <= 8 * cp  # the loss's two fp32 scalars, per rank
    tokens = min_tokens_per_rank(heads=32, kv_heads=8, bandwidth=450e9, flops=989e12)
    assert math.ceil(tokens) == math.ceil(8 * 2 * 989e12 / (32 * 450e9)) == 1099
