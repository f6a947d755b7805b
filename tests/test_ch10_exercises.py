"""The answers to the exercises of chapter 10, recomputed through the package and by hand.

Each answer is computed twice: by the package (``minitorch_dist.models.moe`` and
``minitorch_dist.expert_parallel``, as the chapter does) and by hand from the formulas the chapter
cites (capacity: Lepikhin et al. 2021 and Fedus et al. 2022, section 2.2; the all-to-all's bytes;
the load-balancing losses of Fedus et al. 2022, DeepSpeed's top-k gating and Hugging Face's
Mixtral loss), so a change in the package that would silently change a published answer fails
here. Not graded (no ``lab10`` marker): the graded tests of the code these answers use live with
the package's own tests.
"""

from __future__ import annotations

import math

import pytest
import torch

from minitorch_dist.expert_parallel import (
    all_to_all_bytes,
    capacity_buffer_bytes,
    expert_capacity,
    load_balancing_loss,
)
from minitorch_dist.memory import model_state_bytes
from minitorch_dist.models.moe import (
    moe_num_params,
    moe_param_counts,
    moe_params_per_rank,
    moe_preset,
)


def test_chapter_ex1_mixtral_per_rank_at_ep8():
    """One expert per layer on each of 8 ranks; attention, norms, routers, embedding and head
    replicated; 16 bytes per parameter (mixed-precision Adam)."""
    config, moe = moe_preset("mixtral-8x7b")
    assert (config.vocab_size, config.hidden, config.layers) == (32000, 4096, 32)
    assert (config.heads, config.kv_heads, moe.experts, moe.top_k) == (32, 8, 8, 2)
    h, kv, f_e, L, V = 4096, 1024, 14336, 32, 32000
    attention = 2 * h * h + 2 * h * kv  # wq, wo; wk, wv (GQA 32:8)
    replicated = L * (attention + 2 * h + 8 * h) + 2 * V * h + h  # + norms, router; emb, head
    expert = 3 * h * f_e  # w1, w3, w2
    by_hand = replicated + L * expert  # E / ep = 1 expert per layer per rank
    n = moe_params_per_rank(config, moe, ep=8)
    assert n == by_hand == 7_242_780_672
    assert moe_num_params(config, moe) == replicated + L * 8 * expert == 46_702_792_704
    assert model_state_bytes(n)["total"] == 16 * by_hand
    experts = moe_param_counts(config, moe)["experts"]
    share = (n - experts // 8) / n
    assert share == replicated / by_hand
    assert round(share, 3) == 0.222


def test_chapter_ex2_deepseek_v3_dispatch_bytes_and_capacity_buffer():
    """T k h (ep - 1) / ep elements in bf16 per dispatch; four all-to-alls per layer and step;
    the capacity buffer: E/ep experts times C = ceil(T k cf / E) rows to each other rank."""
    config, moe = moe_preset("deepseek-v3")
    assert (config.hidden, moe.experts, moe.top_k) == (7168, 256, 8)
    T, k, h, ep, E = 4096, 8, 7168, 64, 256
    by_hand = T * k // ep * (ep - 1) * h * 2
    one = all_to_all_bytes(tokens=T, top_k=k, hidden=h, ep=ep)
    assert one == by_hand == 462_422_016
    assert 4 * one == 1_849_688_064
    C = math.ceil(T * k * 1.25 / E)
    assert C == 160
    buffer = capacity_buffer_bytes(
        tokens=T, top_k=k, hidden=h, ep=ep, experts=E, capacity_factor=1.25
    )
    assert buffer == E // ep * C * (ep - 1) * h * 2 == 578_027_520
    assert buffer / one == 1.25  # exactly cf here: T k cf / E is a whole number


def test_chapter_ex3_capacity_and_the_minimum_that_hides_drops():
    """C = ceil(T / E * cf * k), floored by min_capacity (DeepSpeed's default 4)."""
    assert expert_capacity(4096, 8, 1.25, top_k=2) == math.ceil(4096 / 8 * 1.25 * 2) == 1280
    assert expert_capacity(8, 8, 1.0) == 1
    assert expert_capacity(8, 8, 1.0, min_capacity=4) == 4


@pytest.mark.parametrize(
    ("style", "by_hand"),
    [
        ("switch", 4 * (1.0 * 0.4)),  # E sum f_i P_i, f = top-1 fractions = (1, 0, 0, 0)
        ("topk", 4 / 2 * (1.0 * 0.4 + 1.0 * 0.3)),  # E / k sum c_i P_i, c = (1, 1, 0, 0)
        ("mixtral", 4 * (1.0 * 0.4 + 1.0 * 0.3)),  # E sum c_i P_i: k times "topk"
    ],
)
def test_chapter_ex4_three_normalisations_of_one_routing(style, by_hand):
    """Every token has p = (0.4, 0.3, 0.2, 0.1), E = 4, k = 2: 1.6, 1.4 and 2.8."""
    p = torch.tensor([[0.4, 0.3, 0.2, 0.1]], dtype=torch.float64).expand(16, 4)
    assert math.isclose(load_balancing_loss(p, top_k=2, style=style).item(), by_hand)
