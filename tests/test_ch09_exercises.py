"""The answers to the exercises of chapter 9, recomputed through the package and by hand.

Each answer is computed twice: by ``minitorch_dist.pipeline`` (its closed forms and its
simulator, as the chapter does) and by hand from the formulas the chapter cites (Narayanan et
al. 2021, sections 2.2.1 and 2.2.2; Korthikanti et al. 2022, section 4.2.3), so a change in the
package that would silently change a published answer fails here. Not graded (no ``lab09``
marker): the graded tests of the code these answers use live in test_pipeline.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

from minitorch_dist.models import LlamaConfig
from minitorch_dist.pipeline import (
    bubble_fraction,
    bubble_share,
    first_stage_activation_factor,
    make_schedule,
    simulate,
    split_layers,
)


def test_chapter_ex1_fewest_micro_batches_for_a_5_percent_bubble():
    """(p - 1) / (m + p - 1) <= 1/20  <=>  m >= 19 (p - 1): 133 for p = 8."""
    p = 8
    by_hand = next(m for m in range(1, 10_000) if Fraction(p - 1, m + p - 1) <= Fraction(1, 20))
    assert by_hand == 19 * (p - 1) == 133
    assert bubble_share(p, by_hand) <= 0.05 < bubble_share(p, by_hand - 1)
    # the simulator's step has exactly that bubble share
    sim = simulate(make_schedule("1f1b", p, by_hand))
    assert sim.makespan == (by_hand + p - 1) * 3
    assert math.isclose(sim.bubble, (p - 1) / (by_hand + p - 1))


def test_chapter_ex2_interleaving_equivalent_micro_batches_and_memory():
    """(p - 1) / (v m) = (p - 1) / m'  =>  m' = v m = 320; factor 1 + (p - 1) / (p v) = 1.175."""
    p, v, m = 8, 5, 64
    assert bubble_fraction(p, v * m) == bubble_fraction(p, m, v) == 7 / 320
    assert math.isclose(first_stage_activation_factor(p, v), 1 + 7 / 40)
    # Megatron's warm-up: (v + 1) p - 1 chunk-micro-batches alive on rank 0, each 1/v of it
    sim = simulate(make_schedule("interleaved", p, m, v))
    assert sim.peak_in_flight[0] == (v + 1) * p - 1
    assert math.isclose(sim.peak_in_flight[0] / v, p * 1.175)
    assert simulate(make_schedule("1f1b", p, m)).peak_in_flight[0] == p
    assert math.isclose(sim.idle_over_ideal, 7 / 320)


def test_chapter_ex3_moving_blocks_off_the_last_stage():
    """Llama-3-70B on 8 stages of 10 blocks; the head (V h parameters) costs V h / block blocks
    of work on the last stage. Moving one block from the last stage to the first balances best
    (k = 1: 92.3 % of a perfect balance, against 90.4 % for the even split)."""
    config = LlamaConfig.from_preset("llama-3-70b")
    counts = config.param_counts()
    block = (counts["attention"] + counts["mlp"]) // config.layers
    head = config.vocab_size * config.hidden
    assert split_layers(config.layers, 8) == [10] * 8
    # by hand: 80 layers, h = 8192, kv = 1024, f = 28672, V = 128256 (Llama 3 70B)
    h, kv, f = 8192, 1024, 28672
    # wq and wo, wk and wv, the three SwiGLU matrices (the norms do no matrix product)
    assert block == 2 * h * h + 2 * h * kv + 3 * h * f
    assert head == 128256 * 8192
    ratio = head / block

    def work(k: int) -> list[float]:
        extra = [1] * k + [0] * (7 - k)  # k <= 7 blocks to the first stages, one each
        return [10 + e for e in extra] + [10 - k + ratio]

    speed = {k: sum(work(k)) / (8 * max(work(k))) for k in range(8)}
    best = max(speed, key=speed.get)
    assert best == 1
    assert round(speed[1], 3) == 0.923 and round(speed[0], 3) == 0.904
