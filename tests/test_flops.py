"""FLOPs per token, MFU and training time (minitorch_dist.flops), checked against torch's own
FLOP counter on the tiny Llama and against the published example of Narayanan et al. 2021."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from minitorch_dist.memory.flops import flops_per_token, matmul_params, mfu, training_seconds
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.recompute import use_attention

TINY = LlamaConfig.from_preset("tiny")


@pytest.mark.parametrize("seq_len", [32, 64])
def test_flops_per_token_equals_torchs_flop_counter(seq_len: int) -> None:
    """Catches 2N or 4N per token, a missing head or attention term, or counting the embedding:
    with attention as explicit products, FlopCounterMode counts exactly our formula."""
    torch.manual_seed(0)
    model = use_attention(Llama(TINY), "math")
    inputs, targets = synthetic_batch(TINY.vocab_size, 2, seq_len)
    with FlopCounterMode(display=False) as counter:
        cross_entropy(model(inputs), targets).backward()
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    tokens = inputs.numel()
    assert counter.get_total_flops() == flops_per_token(TINY, seq_len=seq_len) * tokens
    assert counts["aten.mm"] == 6 * matmul_params(TINY) * tokens


def test_recompute_adds_one_forward() -> None:
    plain = flops_per_token(TINY, seq_len=64)
    assert flops_per_token(TINY, seq_len=64, recompute="full") * 3 == plain * 4


def test_narayanans_gpt3_example_takes_34_days() -> None:
    """Narayanan et al. 2021, section 5.1: 8TP/(nX) for GPT-3 175B, 300B tokens, 1024 A100s at
    140 TFLOP/s is about 34 days."""
    days = training_seconds(300e9, 8 * 175e9, devices=1024, flops_per_device=140e12) / 86_400
    assert round(days) == 34


def test_mfu_and_bad_input() -> None:
    assert mfu(1000.0, 6e9, 12e12) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="peak_flops must be a number > 0"):
        mfu(1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="devices"):
        training_seconds(1.0, 1.0, devices=0, flops_per_device=1.0)
    with pytest.raises(ValueError, match="recompute"):
        flops_per_token(TINY, seq_len=8, recompute="selective")
