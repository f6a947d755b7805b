"""The answers to the exercises of chapter 7, recomputed through the package.

Each answer is computed twice: by the package (as the chapter does) and by hand from the papers'
formulas (Narayanan et al. 2021, section 3.2; Korthikanti et al. 2022, section 4.2, equations 2
and 4; ZeRO, Rajbhandari et al. 2020, section 5), so a change in the package that would silently
change a published answer fails here. Not graded (no ``lab07`` marker): the graded tests of the
code these answers use live in test_tensor_parallel.py; lab 7's answers in
test_lab07_exercises.py.
"""

from __future__ import annotations

import math

from minitorch_dist.memory import activation_bytes, model_state_bytes
from minitorch_dist.models import LlamaConfig
from minitorch_dist.tensor_parallel import padded_vocab_size, tp_comm_bytes

GiB = 2**30
DEVICE = 80 * GiB  # the device the chapter uses


def test_chapter_ex1_llama3_70b_full_recompute_bytes_for_80_layers():
    """12 b s h (t-1)/t elements per layer (six ring all-reduces), 2 bytes each, 80 layers."""
    config = LlamaConfig.from_preset("llama-3-70b")
    assert (config.hidden, config.layers) == (8192, 80)
    by_hand = 80 * 6 * 2 * (8 - 1) * 1 * 8192 * 8192 // 8 * 2
    per_layer = tp_comm_bytes(micro_batch=1, seq_len=8192, hidden=8192, tp=8, recompute="full")
    assert 80 * per_layer == by_hand == 112_742_891_520
    # full recomputation is 1.5 times the plain count, not 2 times
    plain = tp_comm_bytes(micro_batch=1, seq_len=8192, hidden=8192, tp=8)
    assert 2 * per_layer == 3 * plain


def test_chapter_ex2_llama31_405b_at_t8_then_zero3():
    """Blocks split by 8 (norms whole, 8 kv heads split), vocabulary padded to 128 * 8 and split;
    16 bytes per parameter; then the fewest ZeRO-3 copies whose shards fit half a device."""
    c = LlamaConfig.from_preset("llama-3.1-405b")
    h, f, kv = c.hidden, c.ffn_hidden, c.kv_hidden
    block = (2 * h * h + 3 * h * f + 2 * h * kv) // 8 + 2 * h
    vocab = padded_vocab_size(c.vocab_size, 8)
    assert vocab == 129_024
    by_hand = c.layers * block + 2 * vocab * h // 8 + h
    n_8 = c.num_params_per_rank(tp=8)
    assert n_8 == by_hand
    assert model_state_bytes(n_8)["total"] == 16 * by_hand
    n_dp = math.ceil(n_8 / (DEVICE // 2 // 16))
    assert model_state_bytes(n_8, zero_stage=3, dp=n_dp)["total"] <= DEVICE // 2
    assert model_state_bytes(n_8, zero_stage=3, dp=n_dp - 1)["total"] > DEVICE // 2
    assert (n_dp, 8 * n_dp) == (19, 152)


def test_chapter_ex3_gpt3_layer_activations_tp_and_sp():
    """Korthikanti et al. equations 2 and 4 at h=12288, a=96, s=2048, b=1, t=8."""
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    tp_only = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    with_sp = s * b * h / t * (34 + 5 * a * s / h)
    assert activation_bytes(seq_len=s, micro_batch=b, hidden=h, heads=a, tp=t) == tp_only
    assert activation_bytes(seq_len=s, micro_batch=b, hidden=h, heads=a, tp=t, sp=True) == with_sp
    assert (tp_only, with_sp) == (552 * 2**20, 342 * 2**20)
