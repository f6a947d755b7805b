"""The answers to the exercises of chapter 8, recomputed through the package and by hand.

Each answer is computed twice: by ``minitorch_dist.context_parallel`` (as the chapter does) and
by hand from the formulas the chapter derives (ring attention's bytes, Liu et al. 2023, section
3; the causal work per rank of a contiguous and a zig-zag split, Brandon et al. 2023, section
3), so a change in the package that would silently change a published answer fails here. Not
graded (no ``lab08`` marker): the graded tests of the code these answers use live in
test_context_parallel.py; lab 8's answers in test_lab08_exercises.py.
"""

from __future__ import annotations

from fractions import Fraction

from minitorch_dist.context_parallel import (
    causal_work,
    ring_bytes_per_rank,
    shard_positions,
    work_imbalance,
)
from minitorch_dist.models import LlamaConfig


def test_chapter_ex1_llama3_70b_ring_bytes_at_128k_over_16_ranks():
    """(c - 1) K/V blocks of 2 b n_kv (s/c) d elements forward, twice that backward, 2 bytes
    each, 80 layers. Catches a backward counted once, or blocks counted c times instead of c-1."""
    config = LlamaConfig.from_preset("llama-3-70b")
    assert (config.kv_heads, config.head_dim, config.layers) == (8, 128, 80)
    s, c = 131072, 16
    block = 2 * 1 * 8 * (s // c) * 128 * 2  # bytes of one rank's keys and values
    assert block == 2**25
    by_hand = 80 * (c - 1) * block * 3  # forward once, backward twice
    per_layer = sum(
        ring_bytes_per_rank(1, config.kv_heads, s, config.head_dim, c, backward=bwd)
        for bwd in (False, True)
    )
    assert config.layers * per_layer == by_hand == 120_795_955_200


def test_chapter_ex2_contiguous_imbalance_tends_to_two():
    """Rank r of a contiguous split does 4r + 2 half-chunk units; the mean is 2c; max/mean is
    2 - 1/c: 1.75 at c = 4, 1.9375 at c = 16, idle 1 - 16/31 of the attention time there."""
    for c, expected in ((4, Fraction(7, 4)), (8, Fraction(15, 8)), (16, Fraction(31, 16))):
        work = [causal_work(r, c, layout="contiguous") for r in range(c)]
        assert work == [4 * r + 2 for r in range(c)]
        assert Fraction(max(work) * c, sum(work)) == expected == 2 - Fraction(1, c)
        assert work_imbalance(c, layout="contiguous") == float(expected)
        assert work_imbalance(c, layout="zigzag") == 1.0
    idle = 1 - 1 / work_imbalance(16, layout="contiguous")
    assert abs(idle - 15 / 31) < 1e-15
    assert f"{idle:.1%}" == "48.4%"


def test_chapter_ex3_positions_of_rank_1_on_4_ranks():
    """s = 32 over c = 4: half-chunks of 4 tokens; zig-zag rank 1 holds half-chunks 1 and 6,
    contiguous rank 1 the second quarter. Catches half-chunk 2c-r (off by one) or positions
    numbered from 0 on every rank."""
    zigzag = shard_positions(32, 1, 4, layout="zigzag").tolist()
    contiguous = shard_positions(32, 1, 4, layout="contiguous").tolist()
    assert zigzag == [4, 5, 6, 7, 24, 25, 26, 27]
    assert contiguous == list(range(8, 16))
