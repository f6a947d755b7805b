"""The answers to the exercises of chapter 2 and lab 2, recomputed through the package.

Each answer is computed twice: by the package (as the chapter and the lab do) and by hand from
the format's definition, so a change in the package that would silently change a published
answer fails here. Not graded (no ``lab02`` marker): the graded tests of the functions these
answers use live in the other test_precision_*.py files.
"""

from __future__ import annotations

import math

import torch

from minitorch_dist.memory import model_state_bytes
from minitorch_dist.models import LlamaConfig
from minitorch_dist.precision import FORMATS, decode, encode, quantize_blockwise


# -- chapter 2 --------------------------------------------------------------------------------
def test_chapter_ex1_largest_exact_integers() -> None:
    """Every integer up to 2^(M+1) is exact: 256 in bf16, 2048 in fp16; the next one is not."""
    for name, answer in (("bf16", 256), ("fp16", 2048)):
        m = FORMATS[name].mantissa_bits
        assert answer == 2 ** (m + 1)
        assert all(decode(encode(float(i), name), name) == i for i in range(answer + 1))
        assert decode(encode(float(answer + 1), name), name) != answer + 1


def test_chapter_ex2_distinct_finite_fp8_values() -> None:
    """256 patterns minus the NaNs (and infinities), minus -0 counted with +0: 253 and 247."""
    for name, answer in (("fp8_e4m3", 253), ("fp8_e5m2", 247)):
        f = FORMATS[name]
        patterns = [
            (s, e, m)
            for s in (0, 1)
            for e in range(2**f.exponent_bits)
            for m in range(2**f.mantissa_bits)
        ]
        values = {decode(p, name) for p in patterns}
        assert len({v for v in values if math.isfinite(v)}) == answer


def test_chapter_ex3_loss_scale_for_a_normal_gradient() -> None:
    """1e-9 * 2^k >= 2^-14 first at k = 16 (log2(1e-9) = -29.9)."""
    answer = next(k for k in range(64) if encode(1e-9 * 2.0**k, "fp16").exponent > 0)
    assert answer == 16 == math.ceil(-14 - math.log2(1e-9))
    assert 1e-9 * 2.0**15 < 2.0**-14 <= 1e-9 * 2.0**16


def test_chapter_ex4_llama3_8b_with_fp32_grads() -> None:
    """20 bytes per parameter; 4 more than the 16 of plain mixed precision."""
    psi = LlamaConfig.from_preset("llama-3-8b").num_params()
    got = model_state_bytes(psi, recipe="mixed_fp32_grads")["total"]
    assert got == 20 * psi == 160_605_224_960
    assert got - model_state_bytes(psi, recipe="mixed")["total"] == 4 * psi


def test_chapter_ex5_deepseek_tile_scales() -> None:
    """One byte per E4M3 value, one 4-byte scale per 128 values: 28 MiB and 896 KiB."""
    q, s = quantize_blockwise(torch.zeros(4096, 7168), (1, 128))
    assert q.numel() * q.element_size() == 4096 * 7168 == 28 * 2**20
    assert s.numel() * s.element_size() == 4096 * 7168 // 128 * 4 == 896 * 2**10


# -- lab 2 ------------------------------------------------------------------------------------
def test_lab_ex1_sgd_bytes_per_param() -> None:
    """With plain SGD, mixed precision (2 + 2 + 4) costs what fp32 (4 + 4) does: 8 bytes."""
    assert model_state_bytes(1, recipe="mixed", optimizer="sgd")["total"] == 8
    assert model_state_bytes(1, recipe="fp32", optimizer="sgd")["total"] == 8


def test_lab_ex2_largest_power_of_two_lost_at_one() -> None:
    """fp16(1 + 2^-11) == 1 (a tie, to even), fp16(1 + 2^-10) != 1."""
    one = torch.tensor(1.0, dtype=torch.float16)
    assert one + 2.0**-11 == one and one + 2.0**-10 != one
    assert decode(encode(1 + 2.0**-11, "fp16"), "fp16") == 1.0
