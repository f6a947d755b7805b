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

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from minitorch_dist.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.zero import zero_optimizer

__all__ = ["UNEVEN", "compare_with_reference", "make_batches", "rank_rows", "train_reference"]

# hidden 30 = 3 heads x 10: Psi = 30 x 1157, which is 2 mod 4 (the norm's 30 weights pad at N = 4)
UNEVEN = LlamaConfig(name="tiny-uneven", vocab_size=256, hidden=30, layers=2, heads=3,
                     kv_heads=1, ffn_hidden=80, max_seq_len=64, norm_eps=1e-5,
                     rope_theta=10000.0)  # fmt: skip

Batch = tuple[torch.Tensor, torch.Tensor]


def make_batches(vocab: int, global_batch: int, seq_len: int, steps: int, seed: int = 0) -> list:
    """``steps`` global batches ``(inputs, targets)`` of synthetic tokens, each (gbs, seq_len)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return [synthetic_batch(vocab, global_batch, seq_len, seed=seed, generator=gen)
            for _ in range(steps)]  # fmt: skip


def rank_rows(batch: Batch, rank: int, world_size: int) -> Batch:
    """Rank ``rank``'s consecutive rows of a global batch (gbs must divide by world_size)."""
    rows = batch[0].shape[0]
    if rows % world_size:
        raise ValueError(f"the global batch ({rows} rows) must divide by the {world_size} ranks")
    k = rows // world_size
    return batch[0][rank * k : (rank + 1) * k], batch[1][rank * k : (rank + 1) * k]


def _llama() -> nn.Module:
    return Llama(UNEVEN)


def train_reference(
    model_fn: Callable[[], nn.Module], batches: list, *, lr: float, seed: int = 0,
    loss_fn: Callable = cross_entropy,
) -> tuple[dict[str, torch.Tensor], list[float]]:  # fmt: skip
    """One process, ``torch.optim.Adam``, the whole batch: trainable parameters and losses."""
    torch.manual_seed(seed)
    model = model_fn()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    for inputs, targets in batches:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    params = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    return params, losses


def _train_rank(
    rank: int, world_size: int, stage: int, model_fn: Callable, batches: list, lr: float,
    seed: int, loss_fn: Callable, options: dict,
) -> tuple[dict[str, torch.Tensor] | None, list[float]]:  # fmt: skip
    torch.manual_seed(seed)  # the same initial model on every rank
    model = model_fn()
    opt = zero_optimizer(model, stage, lr=lr, **options)
    losses = []
    for batch in batches:
        inputs, targets = rank_rows(batch, rank, world_size)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    params = opt.full_parameters()  # a collective at stage 3: every rank calls it
    return (params if rank == 0 else None), losses


def compare_with_reference(
    stage: int,
    world_size: int,
    *,
    model_fn: Callable[[], nn.Module] = _llama,
    steps: int = 3,
    global_batch: int = 8,
    seq_len: int = 16,
    lr: float = 1e-3,
    vocab: int = 256,
    seed: int = 0,
    loss_fn: Callable = cross_entropy,
    timeout: float = 120.0,
    **options: Any,
) -> dict[str, Any]:
    """Train ``steps`` steps with ZeRO ``stage`` on ``world_size`` emulated ranks and with the
    single-process reference; compare the trainable parameters.

    ``options`` go to the ZeRO optimizer (``offload=True``, ``prefetch=False``, ``units=...``).
    Returns ``max_abs_error`` (over every element), ``worst`` (the parameter where it occurs),
    ``errors`` (per parameter), ``zero`` and ``reference`` (the trained parameters) and the
    losses: ``zero_losses`` (rank 0's local losses), ``reference_losses``.
    """
    batches = make_batches(vocab, global_batch, seq_len, steps, seed)
    reference, ref_losses = train_reference(model_fn, batches, lr=lr, seed=seed, loss_fn=loss_fn)
    results = launch(_train_rank, world_size, stage, model_fn, batches, lr, seed, loss_fn,
                     options, timeout=timeout)  # fmt: skip
    zero, zero_losses = results[0]
    if set(zero) != set(reference):
        raise AssertionError(f"parameter names differ: {sorted(set(zero) ^ set(reference))}")
    errors = {n: (zero[n] - reference[n]).abs().max().item() for n in reference}
    worst = max(errors, key=errors.get)
    return {
        "max_abs_error": errors[worst], "worst": worst, "errors": errors, "zero": zero,
        "reference": reference, "zero_losses": zero_losses, "reference_losses": ref_losses,
    }  # fmt: skip
