"""Peak memory of one accumulated step, with activation checkpointing (lab04.2).

Accumulation and recomputation attack the same term from two sides. The activations alive at the
peak are those of one micro-batch, so their bytes follow ``mbs`` (chapter 1's per-layer count is
linear in b); accumulation lets the global batch grow without touching them; recomputation
shrinks what each micro-batch stores (Korthikanti et al. 2022, section 5). The model states do
not depend on either: the gradient buffers exist once and are added into.

:func:`measure_accumulation` measures it: one step of the tiny Llama (or any config) with global
batch ``micro_batch x grad_acc``, checkpointed by ``policy``, under a
:class:`~minitorch_dist.memory.MemoryTracker`.
"""

from __future__ import annotations

from typing import Any

import torch

from minitorch_dist.accumulate.accumulate import accumulation_step, split_micro_batches
from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.memory.track import MemoryTracker
from minitorch_dist.models import LlamaConfig, synthetic_batch
from minitorch_dist.recompute.measure import build_model
from minitorch_dist.recompute.policies import POLICIES

__all__ = ["measure_accumulation"]


def measure_accumulation(
    config: LlamaConfig,
    *,
    micro_batch: int,
    grad_acc: int,
    seq_len: int,
    policy: str = "full",
    seed: int = 0,
) -> dict[str, Any]:
    """One optimizer step (SGD) over ``micro_batch x grad_acc`` sequences of ``seq_len`` tokens,
    accumulated over ``grad_acc`` micro-batches, with our checkpointing ``policy``; on the CPU.

    The model is ``build_model(config, policy=policy, seed=seed)`` (a seeded Llama with lab 3's
    checkpointing), the optimizer SGD (no state), and the global batch
    ``synthetic_batch(config.vocab_size, micro_batch * grad_acc, seq_len, seed=seed)``: the same
    for every split of the same size, so the gradients agree across splits. The tracker watches
    ``accumulation_step`` and ``optimizer.step()``. Returns ``peak_total`` (bytes), ``peak`` (the
    breakdown at that moment), ``loss`` (float), ``tokens``, and ``grads`` (a dict of detached
    gradient copies by parameter name, made after the tracker so that they are not counted).
    """
    check_int("micro_batch", micro_batch)
    check_int("grad_acc", grad_acc)
    check_int("seq_len", seq_len)
    check_choice("policy", policy, POLICIES)
    # BEGIN SOLUTION lab04.2: one accumulated step of the checkpointed model under the tracker
    model = build_model(config, policy=policy, seed=seed)  # seeded Llama, checkpointed by policy
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs, targets = synthetic_batch(config.vocab_size, micro_batch * grad_acc, seq_len, seed=seed)
    micro_batches = split_micro_batches(inputs, targets, grad_acc)
    with MemoryTracker(model, optimizer) as tracker:
        out = accumulation_step(model, micro_batches)
        optimizer.step()  # SGD changes the parameters, not their .grad
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}  # untracked
    return {
        "peak_total": tracker.peak_total,
        "peak": tracker.peak(),
        "loss": float(out["loss"]),
        "tokens": out["tokens"],
        "grads": grads,
    }
    # END SOLUTION
