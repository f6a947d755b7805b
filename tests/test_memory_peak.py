"""The peak predictor against the tracker's measured peaks (CPU) and the allocator's (GPU result)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from minitorch_dist.course.results import result_path
from minitorch_dist.memory import llama_activation_bytes, measure_step, predict, predict_peak
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.models.data import synthetic_batch

TINY = LlamaConfig.from_preset("tiny")
WIDE = dataclasses.replace(TINY, hidden=128, ffn_hidden=352, vocab_size=64, layers=3)
DEEP = dataclasses.replace(TINY, layers=6, vocab_size=512)


def measured_peak(config: LlamaConfig, recompute: str, b: int = 4, s: int = 64) -> int:
    """The tracker's peak of a steady-state fp32 Adam step (the second one)."""
    torch.manual_seed(0)
    model = apply_torch_checkpointing(Llama(config), recompute)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    measure_step(model, opt, lambda: synthetic_batch(config.vocab_size, b, s))
    opt.zero_grad(set_to_none=True)
    return measure_step(model, opt, lambda: synthetic_batch(config.vocab_size, b, s))["peak_total"]


@pytest.mark.parametrize(
    "config, recompute, moment",
    [
        (TINY, "none", "loss"),
        (TINY, "selective", "loss"),
        (TINY, "full", "block"),
        (WIDE, "none", "block"),
        (WIDE, "full", "block"),
        (DEEP, "full", "block"),
    ],
    ids=["tiny-none", "tiny-selective", "tiny-full", "wide-none", "wide-full", "deep-full"],
)
def test_peak_within_3_percent_of_the_tracker(config, recompute, moment):
    predicted = predict_peak(config, 64, 4, recompute, recipe="fp32")
    measured = measured_peak(config, recompute)
    assert predicted["at"] == moment
    assert abs(measured / predicted["peak"] - 1) < 0.03, (measured, predicted)


def test_loss_moment_is_two_fp32_vocab_gradients_above_the_stored_activations():
    config = LlamaConfig.from_preset("llama-3-8b")
    r = predict_peak(config, 4096, 1, "full")
    acts = llama_activation_bytes(config, seq_len=4096, micro_batch=1, recompute="full")
    assert r["loss"] - r["resident"] - acts == 2 * 4 * 4096 * config.vocab_size
    assert r["peak"] == max(r[m] for m in ("loss", "block", "optimizer"))


def test_optimizer_moment_holds_every_state():
    r = predict_peak("tiny", 64, 4, recipe="fp32", optimizer_temp=1000, bucket_bytes=24)
    total = predict("tiny", 64, 4, recipe="fp32")
    states = total["params"] + total["grads"] + total["optimizer"]
    assert r["optimizer"] == states + 2 * 8 * 64 * 4 + 1000 + 24


def test_zero3_adds_the_gathered_units():
    plain = predict_peak("llama-3-8b", 4096, 1, "full", zero_stage=3, dp=8, gathered_units=0)
    gathered = predict_peak("llama-3-8b", 4096, 1, "full", zero_stage=3, dp=8)
    counts = LlamaConfig.from_preset("llama-3-8b").param_counts()
    block = (counts["attention"] + counts["mlp"]) // 32 + 2 * 4096
    assert gathered["loss"] - plain["loss"] == 2 * block * 2  # two bf16 blocks, full size
    with pytest.raises(ValueError, match="zero_stage=3"):
        predict_peak("tiny", 64, 4, gathered_units=1)
    with pytest.raises(ValueError, match="optimizer_temp"):
        predict_peak("tiny", 64, 4, optimizer_temp=-1)


def test_gpu_result_peak_growth_is_the_loss_moment():
    """benchmarks/gpu_step_profile.py on a GPU: allocator peak growth = activations + 8bsV."""
    text = result_path("h200_gpu_step_profile").read_text()
    figures = {
        k.strip(): int(v.replace(",", "").strip("* "))
        for k, v in re.findall(r"^\| ([^|]+) \| ([*\d,]+) \|$", text, re.MULTILINE)
    }
    before = figures["allocated before the step (params + Adam states + batch)"]
    peak = figures["allocator peak of the step"]
    acts = figures["predicted activations at the end of the forward pass"]
    b, s, V = 4, 1024, 32000  # the command in benchmarks/gpu_session.sh
    assert f"s = {s}, b = {b}" in text
    assert abs((peak - before) / (acts + 8 * b * s * V) - 1) < 0.001
