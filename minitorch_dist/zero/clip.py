"""Gradient clipping by the norm of the whole model, when no rank holds the whole gradient.

``torch.nn.utils.clip_grad_norm_`` scales every gradient by min(1, c / (||g|| + 1e-6)), with
||g|| the norm of all the model's gradients as one vector (Pascanu et al. 2013, section 3.2). On
N ZeRO ranks rank r holds a shard g_r of the averaged gradient, and the shards are disjoint, so

    ||g||_p^p = sum over r of ||g_r||_p^p          (||g||_inf = max over r of ||g_r||_inf)

one all-reduce of one number per rank. Clipping each shard by its own norm instead gives every
rank a different factor: the update is no longer the gradient's direction, and elements of the
same parameter are scaled differently. Parameters every rank holds whole (stage 0's gradients,
``apply_zero3``'s ``ignored_params``) are added once, after the all-reduce, not N times.
Megatron-LM computes the same sum of squares over its model-parallel and data-parallel shards
(``get_grad_norm_fp32``); torch's FSDP2 gets it from DTensor's ``full_tensor()`` of the norms.

    loss.backward()
    norm = clip_grad_norm_(opt, 1.0)       # a ZeRO optimizer, stage 0-3 (a collective)
    opt.step()
    norm = clip_grad_norm_(model, 1.0)     # a model from apply_zero3, then its optimizer's step

The sums are accumulated in fp64; the norm is returned in the gradients' dtype, and the factor
computed from it, as torch does. At stages 0 and 1 the gradients are averaged inside ``step()``:
``clip_grad_norm_`` averages them first (:meth:`ZeroOptimizer.reduce_gradients`), and the step
then does not again. torch's function raises on ZeRO's parameters
(:mod:`~minitorch_dist.zero.guard`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.zero.base import ZeroOptimizer

__all__ = [
    "clip_coefficient",
    "clip_grad_norm_",
    "clip_grads_with_norm_",
    "grad_norm",
    "scale_grads_",
]


def clip_coefficient(norm: torch.Tensor, max_norm: float) -> torch.Tensor:
    """torch's (and Megatron-LM's) factor: max_norm / (||g|| + 1e-6), at most 1."""
    return (max_norm / (norm + 1e-6)).clamp(max=1.0)


def _grads(obj: Any) -> tuple[list[torch.Tensor], list[torch.Tensor], Any]:
    """(gradient pieces disjoint over the ranks, pieces every rank holds alike, the group)."""
    if isinstance(obj, ZeroOptimizer):
        obj.reduce_gradients()
        disjoint, replicated = obj._grad_shards()
        return disjoint, replicated, obj.group
    engine = getattr(obj, "zero3", None)
    if engine is not None:
        disjoint, replicated = [], []
        for p in obj.parameters():
            if p.grad is not None:
                (disjoint if getattr(p, "_zero3_piece", False) else replicated).append(p.grad)
        return disjoint, replicated, engine.group
    raise ValueError(
        "clip_grad_norm_ takes a ZeRO optimizer (ZeroStage0-3) or a model made by "
        f"apply_zero3, got {type(obj).__name__}: for anything else use "
        "torch.nn.utils.clip_grad_norm_"
    )


def _power_sum(tensors: list[torch.Tensor], p: float, device: Any) -> torch.Tensor:
    out = torch.zeros((), dtype=torch.float64, device=device)
    for g in tensors:
        if g.numel() == 0:
            continue
        a = g.detach().double().abs()
        out = torch.maximum(out, a.max()) if math.isinf(p) else out + (a**p).sum()
    return out


def grad_norm(obj: Any, norm_type: float = 2.0) -> torch.Tensor:
    """The p-norm of the whole model's averaged gradient (a collective), from this rank's
    shards; the same value on every rank, in the gradients' dtype."""
    p = float(norm_type)
    if not (p > 0):
        raise ValueError(f"norm_type must be > 0 or inf, got {norm_type!r}")
    disjoint, replicated, group = _grads(obj)
    first = (disjoint + replicated + [torch.zeros(())])[0]
    local = _power_sum(disjoint, p, first.device)
    dist.all_reduce(
        local, op=dist.ReduceOp.MAX if math.isinf(p) else dist.ReduceOp.SUM, group=group
    )
    once = _power_sum(replicated, p, first.device)
    total = torch.maximum(local, once) if math.isinf(p) else (local + once) ** (1.0 / p)
    return total.to(first.dtype)


@torch.no_grad()
def clip_grads_with_norm_(obj: Any, max_norm: float, total_norm: torch.Tensor) -> None:
    """Scale the gradients ``obj`` holds by min(1, max_norm / (total_norm + 1e-6))."""
    disjoint, replicated, _ = _grads(obj)
    scale_grads_(disjoint + replicated, max_norm, total_norm)


@torch.no_grad()
def scale_grads_(grads: list[torch.Tensor], max_norm: float, total_norm: torch.Tensor) -> None:
    """Multiply ``grads`` in place by :func:`clip_coefficient` (computed in the norm's dtype)."""
    coef = clip_coefficient(total_norm, float(max_norm))
    for g in grads:
        g.mul_(coef.to(g.device, g.dtype))


def clip_grad_norm_(
    obj: Any, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for ZeRO: clip the gradients of a ZeRO optimizer
    (stage 0-3) or of a model made by ``apply_zero3`` by the norm of the whole model (every rank
    calls it, after the last backward and before the step); returns that norm, as torch does."""
    total = grad_norm(obj, norm_type)
    if error_if_nonfinite and not torch.isfinite(total):
        raise RuntimeError(
            f"the total norm of order {norm_type} of the gradients is "
            "non-finite, so it cannot be clipped"
        )
    clip_grads_with_norm_(obj, max_norm, total)
    return total
