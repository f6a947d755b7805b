"""Gradient accumulation (lab 4: lab04.1 token-weighted step, lab04.2 memory with recompute).

The reference is one backward pass over the whole global batch, whose loss is the mean over all
real target tokens. Accumulation must reproduce its gradients within fp32 rounding (the sums are
taken in another order), also when padding gives the micro-batches different token counts.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from torch import nn

from minitorch_dist.accumulate import (
    IGNORE_INDEX,
    accumulation_step,
    count_tokens,
    grad_acc_steps,
    measure_accumulation,
    naive_accumulation_step,
    pad_ragged,
    split_micro_batches,
)
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch

TINY = LlamaConfig.from_preset("tiny")
LENGTHS = [64, 60, 8, 5, 64, 64, 33, 2]  # real tokens per row: micro-batches of 2 rows differ


def ragged_batch(gbs: int = 8, seq: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    inputs, targets = synthetic_batch(TINY.vocab_size, gbs, seq, seed=3)
    return pad_ragged(inputs, targets, LENGTHS[:gbs])


def big_batch_grads(model: nn.Module, batch: tuple) -> tuple[torch.Tensor, dict]:
    reference = copy.deepcopy(model)
    loss = cross_entropy(reference(batch[0]), batch[1])
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in reference.named_parameters()}


def max_relative_error(model: nn.Module, grads: dict) -> float:
    return max(
        float((p.grad - grads[n]).abs().max() / grads[n].abs().max())
        for n, p in model.named_parameters()
    )


def assert_grads_close(model: nn.Module, grads: dict, why: str = "") -> None:
    """Every gradient equals the big batch's; a failure names the parameter and ``why``."""
    for name, p in model.named_parameters():
        torch.testing.assert_close(
            p.grad,
            grads[name],
            rtol=1e-5,
            atol=1e-7,
            msg=lambda m, name=name, grad=p.grad: (
                f"{name}'s gradient is not the big batch's{why}"
                + (": it holds NaN" if grad.isnan().any() else "")
                + f" ({m})"
            ),
        )


# -- lab04.1: the token-weighted step -------------------------------------------------------
@pytest.mark.lab04
@pytest.mark.task("lab04.1")
def test_ragged_padding_gives_the_big_batch_gradients() -> None:
    """Catches the mean-of-means normalisation: with micro-batches of 124, 13, 128 and 35 real
    tokens it weights tokens unequally. The token-weighted step equals one big batch."""
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = ragged_batch()
    micro = split_micro_batches(*batch, 4)
    assert [count_tokens(t) for _, t in micro] == [124, 13, 128, 35]
    loss_ref, grads = big_batch_grads(model, batch)
    naive = copy.deepcopy(model)
    naive_accumulation_step(naive, micro)  # the bug this lab is about, on the same data
    assert max_relative_error(naive, grads) > 0.1

    out = accumulation_step(model, micro)
    naive_grads = {n: p.grad for n, p in naive.named_parameters()}
    assert (
        max_relative_error(model, grads) < 1e-4 or max_relative_error(model, naive_grads) > 1e-4
    ), (
        "the gradients are those of the mean of the micro-batches' mean losses (each divided by "
        "the 4 micro-batches): weight each micro-batch by its real tokens, dividing its token sum "
        "by the global batch's N = 300"
    )
    assert_grads_close(model, grads)
    assert out["tokens"] == 300 and out["micro_batches"] == 4
    torch.testing.assert_close(out["loss"], loss_ref, rtol=1e-6, atol=0)


@pytest.mark.lab04
@pytest.mark.task("lab04.1")
def test_equal_token_counts_make_both_normalisations_agree() -> None:
    """Catches a step that is right only with padding (e.g. dividing by the wrong count): without
    padding every micro-batch holds mbs x s tokens and the mean of means is correct too."""
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = synthetic_batch(TINY.vocab_size, 6, 32)
    _, grads = big_batch_grads(model, batch)
    naive = copy.deepcopy(model)
    accumulation_step(model, split_micro_batches(*batch, 3))
    naive_accumulation_step(naive, split_micro_batches(*batch, 3))
    assert_grads_close(model, grads)
    assert_grads_close(naive, grads)


@pytest.mark.lab04
@pytest.mark.task("lab04.1")
def test_gradients_accumulate_into_existing_grads_and_nothing_steps() -> None:
    """Catches a step that zeroes .grad (it would lose earlier accumulation) or updates the
    weights itself: zeroing and stepping belong to the caller, once per global batch."""
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = ragged_batch()
    _, grads = big_batch_grads(model, batch)
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    accumulation_step(model, split_micro_batches(*batch, 2))
    accumulation_step(model, split_micro_batches(*batch, 4))  # twice: twice the gradient
    for name, p in model.named_parameters():
        torch.testing.assert_close(
            p.grad,
            2 * grads[name],
            rtol=1e-5,
            atol=1e-7,
            msg=lambda m, name=name: (
                f"after two accumulation steps {name}'s gradient is not twice the big batch's: "
                "the step must add into .grad (backward does), never zero it, and weigh each "
                f"micro-batch by its real tokens over the global count ({m})"
            ),
        )
        assert torch.equal(p.detach(), weights[name]), (
            f"{name} changed: the accumulation step must not update the weights (the caller "
            "steps the optimizer once per global batch)"
        )


@pytest.mark.lab04
@pytest.mark.task("lab04.1")
def test_a_micro_batch_of_padding_only_contributes_nothing() -> None:
    """Catches dividing each micro-batch by its own token count: a micro-batch with no real
    token would then divide 0 by 0 and poison every gradient with NaN."""
    torch.manual_seed(0)
    model = Llama(TINY)
    inputs, targets = synthetic_batch(TINY.vocab_size, 4, 16, seed=5)
    batch = pad_ragged(inputs, targets, [16, 0, 0, 9])
    _, grads = big_batch_grads(model, batch)
    accumulation_step(model, split_micro_batches(*batch, 4))
    assert_grads_close(
        model,
        grads,
        " with two micro-batches of padding only: divide every micro-batch's token sum by the "
        "global batch's real tokens, not by its own count (0 / 0 is NaN)",
    )


@pytest.mark.lab04
@pytest.mark.task("lab04.1")
def test_no_sync_wraps_every_micro_batch_but_the_last() -> None:
    """Catches synchronising gradients after every micro-batch (grad_acc times the
    communication) or never (the last backward must run outside no_sync)."""
    torch.manual_seed(0)
    model = Llama(TINY)
    inside = [False]
    seen: list[bool] = []
    model.head.weight.register_post_accumulate_grad_hook(lambda p: seen.append(inside[0]))

    @contextlib.contextmanager
    def no_sync():
        inside[0] = True
        yield
        inside[0] = False

    accumulation_step(model, split_micro_batches(*ragged_batch(), 4), no_sync=no_sync)
    assert seen == [True, True, True, False], (
        f"inside no_sync at each backward: {seen}, not [True, True, True, False]: every "
        "micro-batch's backward but the last runs inside no_sync(), the last outside it, so "
        "gradients are synchronised once per global batch"
    )


def test_accumulation_input_validation() -> None:
    """Catches silently accepting what cannot be normalised or split."""
    model = Llama(TINY)
    inputs, targets = synthetic_batch(TINY.vocab_size, 4, 8)
    with pytest.raises(ValueError, match="not divisible by grad_acc=3"):
        split_micro_batches(inputs, targets, 3)
    with pytest.raises(ValueError, match="grad_acc must be an integer >= 1"):
        split_micro_batches(inputs, targets, 0)
    with pytest.raises(ValueError, match="non-empty sequence"):
        accumulation_step(model, [])
    with pytest.raises(ValueError, match="no real target token"):
        accumulation_step(model, [pad_ragged(inputs, targets, [0, 0, 0, 0])])
    with pytest.raises(ValueError, match="no_sync must be a function"):
        accumulation_step(model, [(inputs, targets)], no_sync=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one length per row"):
        pad_ragged(inputs, targets, [1, 2])
    with pytest.raises(ValueError, match=r"in \[0, seq_len=8\]"):
        pad_ragged(inputs, targets, [1, 2, 3, 9])
    with pytest.raises(ValueError, match="policy must be one of none, full, selective"):
        measure_accumulation(TINY, micro_batch=1, grad_acc=1, seq_len=8, policy="all")
    padded_inputs, padded_targets = pad_ragged(inputs, targets, [8, 3, 0, 1])
    assert count_tokens(padded_targets) == 12
    assert (padded_targets[1, 3:] == IGNORE_INDEX).all() and (padded_inputs[1, 3:] == 0).all()
    assert torch.equal(padded_targets[0], targets[0])


# -- lab04.2: memory of accumulation with checkpointing ------------------------------------
@pytest.mark.lab04
@pytest.mark.task("lab04.2")
def test_peak_memory_follows_the_micro_batch_not_the_global_batch() -> None:
    """Catches accumulation that keeps every micro-batch's activations alive (e.g. summing the
    losses and calling backward once at the end): the peak would then grow with grad_acc."""
    seq = 64
    fixed_mbs = {
        ga: measure_accumulation(TINY, micro_batch=2, grad_acc=ga, seq_len=seq, policy="none")[
            "peak_total"
        ]
        for ga in (2, 4, 8)
    }
    # the global batch's token ids (8 bytes each, s + 1 per row) are the only part that grows
    for ga in (4, 8):
        grown = fixed_mbs[ga] - fixed_mbs[2]
        assert 0 <= grown <= 8 * (seq + 1) * 2 * (ga - 2) + 64 * ga, (
            f"micro-batch 2, grad_acc {ga}: the peak grew by {grown} bytes over grad_acc 2, "
            "more than the extra token ids: every micro-batch's activations are kept alive "
            "(one backward at the end, or losses kept with their graphs); run each "
            "micro-batch's backward before the next forward"
        )
    fixed_gbs = [
        measure_accumulation(TINY, micro_batch=mbs, grad_acc=8 // mbs, seq_len=seq, policy="none")[
            "peak_total"
        ]
        for mbs in (1, 2, 4, 8)
    ]
    assert fixed_gbs == sorted(fixed_gbs) and fixed_gbs[-1] > 2 * fixed_gbs[0], (
        f"peaks for micro-batch 1, 2, 4, 8 at the same global batch: {fixed_gbs}; they must grow "
        "with the micro-batch (the activations of one micro-batch set the peak)"
    )


@pytest.mark.lab04
@pytest.mark.task("lab04.2")
def test_accumulated_checkpointed_step_equals_the_big_batch() -> None:
    """Catches a combination of accumulation and recomputation that changes the gradients, or
    that does not lower the peak."""
    full = measure_accumulation(TINY, micro_batch=1, grad_acc=4, seq_len=32, policy="full")
    big = measure_accumulation(TINY, micro_batch=4, grad_acc=1, seq_len=32, policy="none")
    assert full["tokens"] == big["tokens"] == 4 * 32, (
        f"tokens counted: {full['tokens']} accumulated, {big['tokens']} in one pass, not 128"
    )
    assert full["loss"] == pytest.approx(big["loss"], rel=1e-6), (
        f"4 checkpointed micro-batches give loss {full['loss']}, one pass {big['loss']}: the "
        "accumulated loss is the global batch's token mean"
    )
    for name, grad in big["grads"].items():
        torch.testing.assert_close(
            full["grads"][name],
            grad,
            rtol=1e-5,
            atol=1e-7,
            msg=lambda m, name=name: (
                f"{name}: accumulated checkpointed gradient is not the big batch's: accumulate "
                f"with lab 4.1's step on the model checkpointed by `policy` ({m})"
            ),
        )
    same_split = measure_accumulation(TINY, micro_batch=1, grad_acc=4, seq_len=32, policy="none")
    assert full["peak_total"] < same_split["peak_total"], (
        f"policy='full' peaks at {full['peak_total']} bytes, not below the same split without "
        f"recomputation ({same_split['peak_total']}): the model is not checkpointed by `policy`"
    )
    assert same_split["peak_total"] < big["peak_total"]


# -- not graded: the exercises' answers ----------------------------------------------------
def test_chapter4_exercise_answers() -> None:
    """The answers chapter 4 asserts, recomputed by hand."""
    # 1. grad_acc = tokens / (s x mbs x dp)
    assert grad_acc_steps(2**24, seq_len=8192, micro_batch=2, dp=128) == 8
    with pytest.raises(ValueError, match="not a multiple"):
        grad_acc_steps(1000, seq_len=64, micro_batch=1)
    # 2. the smallest micro-batch of the ragged batch is over-weighted N / (G n) = 300 / 52 times
    tokens = [count_tokens(t) for _, t in split_micro_batches(*ragged_batch(), 4)]
    assert tokens == [124, 13, 128, 35]
    assert max(sum(tokens) / (4 * n) for n in tokens) == pytest.approx(300 / 52)
    # 3. 16-bit gradients of Llama-3-8B on 8 ranks: one ring all-reduce per step with no_sync
    grad_bytes = 2 * LlamaConfig.from_preset("llama-3-8b").num_params()
    one = 2 * 7 * grad_bytes // 8
    assert one == 28_105_914_368 and 16 * one == 449_694_629_888


def test_figure_renders_headless() -> None:
    """Catches a figure function that fails on the data the chapter and the lab give it."""
    from minitorch_dist.accumulate.plots import plot_accumulation_memory

    points = {"none": {1: 3, 2: 4}, "full": {1: 2, 2: 3}}
    fig = plot_accumulation_memory(points, points, micro_batch=2, global_batch=8)
    assert fig._repr_png_().startswith(b"\x89PNG")
