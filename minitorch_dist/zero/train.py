"""Training on emulated ranks with a ZeRO stage, against the single-process Adam reference.

The reference is one process running ``torch.optim.Adam`` on the whole global batch of ``gbs``
sequences. ZeRO runs N ranks; rank r takes rows ``r * gbs / N`` to ``(r + 1) * gbs / N``, so the
mean of the ranks' mean losses is the mean loss of the global batch, and the averaged gradient
is the reference's gradient up to the order of floating-point additions. After a few steps the
weights must agree to a tight tolerance (they differ by the rounding of that sum, amplified a
little by Adam's division by sqrt(v)).

``UNEVEN`` is a tiny Llama whose parameter count, 34,710, does not divide by 4 or 8, so shards
need padding; the ``tiny`` preset (125,248 = 2^6 x 1,957 parameters) divides by 2, 4 and 8.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.reference import (
    Run,
    assert_runs_match,
    compare,
    make_batches,
    rank_batch,
    reference_run,
    run_training,
)
from minitorch_dist.zero import zero_optimizer

__all__ = ["UNEVEN", "ZeroRun", "compare_with_reference", "make_batches", "rank_rows"]

# hidden 30 = 3 heads x 10: Psi = 30 x 1157, which is 2 mod 4 (the norm's 30 weights pad at N = 4)
UNEVEN = LlamaConfig(
    name="tiny-uneven",
    vocab_size=256,
    hidden=30,
    layers=2,
    heads=3,
    kv_heads=1,
    ffn_hidden=80,
    max_seq_len=64,
    norm_eps=1e-5,
    rope_theta=10000.0,
)

rank_rows = rank_batch  # the name chapter 6 and lab 6 use: a rank's rows of (inputs, targets)


def _llama() -> nn.Module:
    return Llama(UNEVEN)


def _optimizer(optimizer_class: type, lr: float) -> Callable:
    return lambda params: optimizer_class(params, lr=lr)


def _full_parameters(model: nn.Module, opt: Any) -> dict[str, torch.Tensor]:
    return opt.full_parameters()  # a collective at stage 3: every rank calls it


@dataclass(frozen=True)
class ZeroRun:
    """What :func:`compare_with_reference` trains, on both sides (its keyword arguments)."""

    model_fn: Callable[[], nn.Module] = _llama  # builds the model (default: the UNEVEN Llama)
    steps: int = 3
    global_batch: int = 8  # sequences per step; rank r trains on rows r*gbs/N ...
    seq_len: int = 16
    lr: float = 1e-3
    vocab: int = 256
    seed: int = 0  # of the model's weights and of the batches
    loss_fn: Callable = cross_entropy
    timeout: float = 120.0  # seconds for the launch
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam  # on both sides
    grad_acc: int = 1  # micro-batches per step
    batches: list | None = None  # the global batches (None: synthetic ones)


def _train_rank(
    rank: int, world_size: int, stage: int, run: ZeroRun, batches: list, options: dict
) -> Run:
    torch.manual_seed(run.seed)  # the same initial model on every rank
    model = run.model_fn()
    opt = zero_optimizer(model, stage, run.optimizer_class, lr=run.lr, **options)
    return run_training(
        model,
        opt,
        batches,
        loss_fn=run.loss_fn,
        rank=rank,
        world_size=world_size,
        grad_acc=run.grad_acc,
        grads=lambda m, o: {},
        weights=_full_parameters,
    )


def compare_with_reference(
    stage: int, world_size: int, run: ZeroRun | None = None, **options: Any
) -> dict[str, Any]:
    """Train ``run.steps`` steps with ZeRO ``stage`` on ``world_size`` emulated ranks and with
    the single-process reference (``torch.optim.Adam``, the whole batch), through the shared
    harness of :mod:`minitorch_dist.reference`; compare the trainable parameters.

    ``options`` that name a field of ``run`` (a :class:`ZeroRun`) replace it
    (``optimizer_class`` replaces Adam on both sides, SGD being a scale-sensitive check;
    ``grad_acc`` micro-batches per step; ``batches`` the synthetic global batches); the others
    go to the ZeRO optimizer (``offload=True``, ``prefetch=False``, ``units=...``).
    Returns ``max_abs_error`` (over every element), ``worst`` (the parameter where it occurs),
    ``errors`` (per parameter), ``zero`` and ``reference`` (the trained parameters) and the
    losses: ``zero_losses`` (rank 0's local losses), ``reference_losses``; ``runs`` (every
    rank's :class:`~minitorch_dist.reference.Run`) and ``reference_run`` for
    :func:`~minitorch_dist.reference.assert_runs_match`.
    """
    fields = {f.name for f in dataclasses.fields(ZeroRun)}
    run = replace(run or ZeroRun(), **{k: v for k, v in options.items() if k in fields})
    options = {k: v for k, v in options.items() if k not in fields}
    batches = run.batches
    if batches is None:
        batches = make_batches(run.vocab, run.global_batch, run.seq_len, run.steps, run.seed)
    ref = reference_run(
        run.model_fn,
        _optimizer(run.optimizer_class, run.lr),
        batches,
        seed=run.seed,
        loss_fn=run.loss_fn,
        grad_acc=run.grad_acc,
    )
    runs = launch(_train_rank, world_size, stage, run, batches, options, timeout=run.timeout)
    result = compare(runs[0].weights, ref.weights)
    return {
        "max_abs_error": result.max_abs_error,
        "worst": result.worst,
        "errors": result.errors,
        "zero": runs[0].weights,
        "reference": ref.weights,
        "zero_losses": runs[0].losses,
        "reference_losses": ref.losses,
        "runs": runs,
        "reference_run": ref,
    }


def assert_zero_matches(result: dict[str, Any], *, atol: float, rtol: float) -> None:
    """Every rank's weights and the mean of the ranks' losses against the reference."""
    assert_runs_match(
        result["runs"],
        result["reference_run"],
        check=("losses", "weights"),
        tolerance={"atol": atol, "rtol": rtol},
    )
