"""The answers to the exercises of lab 9, recomputed through the package.

Each answer is computed twice: by the package (as the lab does) and by hand from the formulas
(Narayanan et al. 2021, sections 2.2.1-2.2.2), so a change in the package that would silently
change a published answer fails here. Not graded (no ``lab09`` marker): the graded tests of the
code these answers use live in test_pipeline.py.
"""

from __future__ import annotations

import math

from minitorch_dist.pipeline import (
    bubble_share,
    first_stage_activation_factor,
    make_schedule,
    p2p_bytes,
    simulate,
)


def test_lab_ex1_smallest_m_for_a_five_percent_bubble_at_p8():
    """7 / (m + 7) <= 1/20 from m = 133 on; the simulator agrees."""
    m = math.ceil(7 / 0.05 - 7)
    assert m == 133
    assert bubble_share(8, m) <= 0.05 < bubble_share(8, m - 1)
    assert math.isclose(simulate(make_schedule("1f1b", 8, m)).bubble, 7 / 140)


def test_lab_ex2_llama3_70b_interleaved_v5():
    """Bubble share 7 / 87; first stage 8 (1 + 7/40) = 9.4 micro-batches' worth."""
    assert math.isclose(bubble_share(8, 16, 5), 7 / 87)
    assert math.isclose(8 * first_stage_activation_factor(8, 5), 9.4)
    peak = simulate(make_schedule("interleaved", 8, 16, 5)).peak_in_flight[0]
    assert peak == 2 * 7 + 4 * 8 + 1 == 47 and math.isclose(peak / 5, 9.4)


def test_lab_ex3_llama2_7b_rank1_bytes_interleaved():
    """Rank 1 of 4 with 2 chunks (stages 1 and 5 of 8): 2 forward and 2 backward boundaries,
    16 micro-batches of 4096 x 4096 bf16 elements each: 2 GiB."""
    one = p2p_bytes(micro_batch=1, seq_len=4096, hidden=4096)
    assert one == 4096 * 4096 * 2
    assert 4 * 16 * one == 2 * 2**30
