"""The answers to the exercises of chapter 1 and lab 1, recomputed through the package.

Each answer is computed twice: by the package (as the chapter and the lab do) and by hand from
the papers' formulas, so a change in the package that would silently change a published answer
fails here. Not graded (no ``lab01`` marker): the graded tests of the functions these answers use
live in test_memory_estimate.py and test_memory_track.py.
"""

from __future__ import annotations

import math

import torch
from own_process import own_process

from minitorch_dist.memory import activation_bytes, measure_step_fake, model_state_bytes, predict
from minitorch_dist.models import LlamaConfig

GiB = 2**30
DEVICE = 80 * GiB  # the device the chapter and the lab use
GPT3 = dict(seq_len=2048, hidden=12288, heads=96, layers=96)  # Korthikanti et al., Table 3


def psi(preset: str) -> int:
    return LlamaConfig.from_preset(preset).num_params()


# -- chapter 1 --------------------------------------------------------------------------------
def test_chapter_ex1_llama3_70b_zero3_on_64_ranks():
    """16 bytes x ceil(psi / 64) per rank: ZeRO-3 shards all three model states."""
    n = psi("llama-3-70b")
    got = model_state_bytes(n, zero_stage=3, dp=64)["total"]
    assert got == 16 * math.ceil(n / 64) == 17_638_426_624


def test_chapter_ex2_llama3_70b_zero1_does_not_fit():
    """ZeRO-1 leaves 2 psi + 2 psi on every rank: far more than one device."""
    n = psi("llama-3-70b")
    got = model_state_bytes(n, zero_stage=1, dp=64)["total"]
    assert got == 4 * n + 12 * math.ceil(n / 64)
    assert got > DEVICE


def test_chapter_ex3_gpt3_activations_overtake_model_states():
    """Activations are linear in b; the first b with b * A(1) > 16 psi is 11."""
    states = 16 * 175 * 10**9
    per_sample = 96 * (34 * 2048 * 12288 + 5 * 96 * 2048**2)  # Korthikanti section 4.1, b = 1
    assert activation_bytes(micro_batch=1, **GPT3) == per_sample
    answer = states // per_sample + 1
    assert answer == 11
    assert activation_bytes(micro_batch=answer, **GPT3) > states
    assert activation_bytes(micro_batch=answer - 1, **GPT3) <= states


def test_chapter_ex4_llama31_405b_ranks_for_20_psi():
    """The fewest ZeRO-3 ranks whose 20-byte shards fit one device."""
    n = psi("llama-3.1-405b")
    answer = math.ceil(n / (DEVICE // 20))

    def per_rank(dp: int) -> int:
        return model_state_bytes(n, zero_stage=3, dp=dp, recipe="mixed_fp32_grads")["total"]

    assert per_rank(answer) <= DEVICE < per_rank(answer - 1)
    assert answer == 95


# -- lab 1 ------------------------------------------------------------------------------------
def test_lab_ex1_llama3_8b_zero2_on_8_ranks():
    """ZeRO-2: 16-bit params replicated (2 psi), grads and optimizer states sharded (14 psi/N)."""
    n = psi("llama-3-8b")
    assert model_state_bytes(n, zero_stage=2, dp=8)["total"] == 2 * n + 14 * math.ceil(n / 8)


def test_lab_ex2_largest_micro_batch_of_llama2_7b():
    """The largest b whose predicted per-rank memory fits 80 GiB (s = 4096, ZeRO-3 on 8 ranks,
    full recompute); predict is monotone in b, so the boundary is unique."""
    totals = [predict("llama-2-7b", 4096, b, "full", 3, 8)["total"] for b in range(1, 65)]
    assert totals == sorted(totals)
    answer = max(b for b, total in enumerate(totals, start=1) if total <= DEVICE)
    assert answer == 42


@own_process
def test_lab_ex3_pure_bf16_adam_is_8_bytes_per_param():
    """bf16 params, grads, m and v: 2 + 2 + 4 bytes, measured on fake tensors (plus Adam's
    4-byte step counter per tensor)."""
    tiny = LlamaConfig.from_preset("tiny")
    got = measure_step_fake(tiny, seq_len=64, micro_batch=4, dtype=torch.bfloat16)
    tensors = 9 * tiny.layers + 3  # 2 norms + 7 matrices per block; embedding, final norm, head
    n = tiny.num_params()
    assert got["params"] + got["grads"] + got["optimizer"] == 8 * n + 4 * tensors
    assert abs(got["bytes_per_param"] - 8) < 0.01  # the lab's tolerance
