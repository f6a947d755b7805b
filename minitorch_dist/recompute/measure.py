"""Measuring what recomputation buys (bytes) and costs (time), for lab 3, chapter 3 and the
benchmark.

**Which bytes count as activations.** :class:`~minitorch_dist.memory.MemoryTracker` files a new
storage under ``activations`` when autograd is recording at the moment it is made. The forward
of a ``torch.autograd.Function`` always runs with recording off, so the outputs of our
:class:`~minitorch_dist.recompute.checkpoint.CheckpointFunction` -- a block's output, which the
next block keeps as its input -- are filed under ``other``, although they are exactly what a
checkpointed model stores. (``torch.utils.checkpoint`` in its default, non-reentrant form runs the
forward with recording on and saved-tensor hooks that keep nothing, so its outputs are labelled
``activations``.) The label is a heuristic; the bytes are not. So we measure the *stored
activations* as what the forward pass leaves alive: the tracker's total at the end of the forward
(loss computed) minus its total when the forward starts (batch already made). For the
uncheckpointed model and for torch's checkpoint this equals the ``activations`` category to the
byte; for ours it adds the outputs that the label missed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.memory.measure import measure_step
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.recompute.attention import use_attention
from minitorch_dist.recompute.op_level import apply_op_level_checkpointing
from minitorch_dist.recompute.policies import POLICIES, apply_activation_checkpointing

__all__ = [
    "IMPLEMENTATIONS",
    "RecomputeRun",
    "build_model",
    "measure_recompute",
    "stored_activations",
    "time_steps",
]

IMPLEMENTATIONS = ("ours", "torch")  # our CheckpointFunction, or torch.utils.checkpoint


def stored_activations(step: dict[str, Any]) -> int:
    """Bytes the forward pass left alive, from a :func:`~minitorch_dist.memory.measure_step`
    result: total at the end of the forward minus total at its start (see the module doc)."""
    start = next(sample for sample in step["timeline"] if sample[1] == "forward")[2]
    return sum(step["forward"].values()) - sum(start.values())


def build_model(
    config: LlamaConfig,
    *,
    policy: str = "none",
    impl: str = "ours",
    attention: str = "fused",
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """A seeded ``Llama(config)`` with the given attention core, checkpointed by ``policy``
    (``"none"``, ``"selective"``, ``"full"``) through our checkpoint or torch's, or by
    ``"ops"``: op-level selective checkpointing with torch's checkpoint (:mod:`.op_level`)."""
    check_choice("policy", policy, (*POLICIES, "ops"))
    check_choice("impl", impl, IMPLEMENTATIONS)
    torch.manual_seed(seed)
    with torch.device(device):
        model = use_attention(Llama(config), attention)
    if policy == "none":
        return model
    if policy == "ops":
        apply_op_level_checkpointing(model)
    elif impl == "ours":
        apply_activation_checkpointing(model, policy)
    else:
        apply_torch_checkpointing(model, policy)
    return model


@dataclass(frozen=True)
class RecomputeRun:
    """How :func:`measure_recompute` builds and runs its step (its keyword arguments)."""

    policy: str = "none"  # "none", "selective", "full" or "ops" (see build_model)
    impl: str = "ours"  # our checkpoint or torch's ("torch")
    attention: str = "fused"  # the attention core: "fused" (SDPA) or "math"
    dtype: torch.dtype = torch.float32
    fake: bool = False  # fake tensors: any size measures in seconds
    seed: int = 0  # of the model's weights and of the batch


def measure_recompute(
    config: LlamaConfig,
    *,
    seq_len: int,
    micro_batch: int,
    run: RecomputeRun | None = None,
    **options: Any,
) -> dict[str, Any]:
    """One training step (SGD, so no optimizer state) under a MemoryTracker, on the CPU;
    ``options`` replace fields of ``run`` (a :class:`RecomputeRun`: policy, implementation,
    attention core, dtype, fake, seed).

    With ``fake=True`` the model and the batch are fake tensors (any size measures in seconds).
    Returns bytes: ``activations`` (stored by the forward, see :func:`stored_activations`),
    ``labelled`` (the tracker's ``activations`` category at the end of the forward),
    ``peak_total`` (the whole step's peak) and ``peak`` (its breakdown), and ``seconds``.
    """
    run = replace(run or RecomputeRun(), **options)
    fake, seed = run.fake, run.seed
    check_int("seq_len", seq_len)
    check_int("micro_batch", micro_batch)
    if seq_len > config.max_seq_len:
        raise ValueError(f"seq_len={seq_len} exceeds max_seq_len={config.max_seq_len}")
    start = time.perf_counter()
    previous = torch.get_default_dtype()
    with FakeTensorMode() if fake else contextlib.nullcontext():
        torch.set_default_dtype(run.dtype)  # .to(dtype) fails on fake modules: build in the dtype
        try:
            model = build_model(
                config, policy=run.policy, impl=run.impl, attention=run.attention, seed=seed
            )
        finally:
            torch.set_default_dtype(previous)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

        def batch() -> tuple[torch.Tensor, torch.Tensor]:
            if fake:  # token values do not matter to the bytes
                seq = torch.zeros(micro_batch, seq_len + 1, dtype=torch.long)
                return seq[:, :-1], seq[:, 1:]
            return synthetic_batch(config.vocab_size, micro_batch, seq_len, seed=seed)

        step = measure_step(model, optimizer, batch, cross_entropy)
    return {
        "activations": stored_activations(step),
        "labelled": step["forward"]["activations"],
        "peak_total": step["peak_total"],
        "peak": step["peak"],
        "seconds": time.perf_counter() - start,
    }


def time_steps(
    models: dict[str, nn.Module],
    batch: tuple[torch.Tensor, torch.Tensor],
    *,
    repeats: int = 5,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = cross_entropy,
) -> dict[str, float]:
    """Fastest wall seconds of forward + backward (no optimizer step) of each model on ``batch``.

    The models take turns, one step each per round, after a warm-up round, so that a machine
    busy with something else slows them all alike; the minimum over ``repeats`` rounds is the
    least disturbed run. On a GPU the clock is read after ``torch.cuda.synchronize()``.
    """
    check_int("repeats", repeats)
    inputs, targets = batch
    cuda = inputs.device.type == "cuda"
    best = dict.fromkeys(models, float("inf"))
    for round_ in range(repeats + 1):
        for name, model in models.items():
            model.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            loss_fn(model(inputs), targets).backward()
            if cuda:
                torch.cuda.synchronize()
            if round_:  # round 0 warms up (allocator, kernels, caches)
                best[name] = min(best[name], time.perf_counter() - start)
    return best
