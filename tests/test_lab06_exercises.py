"""The answers to the exercises of chapter 6 and lab 6, recomputed through the package.

Each answer is computed twice: by the package (as the chapter and the lab do) and by hand from
ZeRO's formulas (Rajbhandari et al. 2020, sections 5 and 7), so a change in the package that
would silently change a published answer fails here. Not graded (no ``lab06`` marker): the graded
tests of the code these answers use live in test_zero.py.
"""

from __future__ import annotations

import math

from minitorch_dist.memory import model_state_bytes, predict
from minitorch_dist.models import LlamaConfig
from minitorch_dist.zero.measure import zero_comm_bytes

GiB = 2**30
DEVICE = 80 * GiB  # the device the chapter and the lab use


def psi(preset: str) -> int:
    return LlamaConfig.from_preset(preset).num_params()


# -- chapter 6 --------------------------------------------------------------------------------
def test_chapter_ex1_llama31_405b_ranks_for_half_a_device():
    """The fewest ZeRO-3 ranks whose 16-byte shards fit in half of 80 GiB."""
    n = psi("llama-3.1-405b")
    answer = math.ceil(n / (DEVICE // 2 // 16))
    assert answer == 152
    assert model_state_bytes(n, zero_stage=3, dp=answer)["total"] <= DEVICE // 2
    assert model_state_bytes(n, zero_stage=3, dp=answer - 1)["total"] > DEVICE // 2


def test_chapter_ex2_llama3_8b_bytes_sent_with_zero2_and_zero3():
    """2 (N-1)/N x 2 psi and 3 (N-1)/N x 2 psi bytes per rank and step."""
    n = psi("llama-3-8b")
    assert zero_comm_bytes(n, 2, 64) == 2 * 63 / 64 * 2 * n
    assert zero_comm_bytes(n, 3, 64) == 3 * 63 / 64 * 2 * n
    assert zero_comm_bytes(n, 3, 64) == 1.5 * zero_comm_bytes(n, 2, 64)


def test_chapter_ex3_zero_offload_on_one_device():
    """The paper's ZeRO-Offload: 16-bit params stay on the device (2 psi); 16-bit grads, master,
    m and v go to the CPU (14 psi). Catches the optimizer-only answer (4 psi / 12 psi)."""
    n = psi("llama-2-7b")
    shown = predict("llama-2-7b", 4096, 1, "full", 0, 1, offload="zero-offload")
    assert shown["params"] + shown["grads"] + shown["optimizer"] == 2 * n
    assert shown["optimizer"] == 0 and shown["grads"] == 0 and shown["cpu"] == 14 * n


# -- lab 6 ------------------------------------------------------------------------------------
def test_lab_ex1_llama3_70b_zero3_on_512_ranks():
    """Two all-gathers and one reduce-scatter of 2 psi bytes: 3 x 511/512 x 2 psi."""
    n = psi("llama-3-70b")
    assert math.isclose(zero_comm_bytes(n, 3, 512), 3 * 511 / 512 * 2 * n)


def test_lab_ex2_zero2_below_a_quarter_of_data_parallelism():
    """2 + 14 / N < 4 bytes per parameter from N = 8 on."""
    big = 10**12
    quarter = model_state_bytes(big)["total"] / 4
    assert model_state_bytes(big, zero_stage=2, dp=8)["total"] < quarter
    assert model_state_bytes(big, zero_stage=2, dp=7)["total"] >= quarter


def test_lab_ex3_llama2_7b_zero2_offload_on_8_ranks():
    """Device: 2 psi + 2 ceil(psi / 8); CPU: 12 ceil(psi / 8)."""
    n = psi("llama-2-7b")
    shard = -(-n // 8)
    shown = predict("llama-2-7b", 4096, 1, "none", 2, 8, offload=True)
    assert shown["params"] + shown["grads"] + shown["optimizer"] == 2 * n + 2 * shard
    assert shown["cpu"] == 12 * shard
