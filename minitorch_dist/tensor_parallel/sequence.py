"""Sequence parallelism's other half: the replicated RMSNorm weights (Korthikanti et al. 2022,
section 4.2.2).

Under sequence parallelism every norm runs on this rank's s/t tokens. Its weight is replicated,
but the gradient a rank computes covers only its tokens: a partial sum. The whole gradient is the
sum over the tp group. Without that all-reduce each replica takes a different step and the
"replicated" weights drift apart from the first step on (Megatron-LM all-reduces them in
``finalize_model_grads``; lab 7 breaks it on purpose).

:func:`sequence_parallel_norms` registers a hook that all-reduces each norm weight's gradient as
backward computes it (correct with gradient accumulation: each micro-batch's part is summed);
:func:`reduce_norm_grads` does the same once, on ``.grad``, for a loop that calls it after
backward and before the optimizer step.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from minitorch_dist.models.llama import RMSNorm
from minitorch_dist.tensor_parallel.functions import _all_reduce

__all__ = ["norm_weights", "reduce_norm_grads", "sequence_parallel_norms"]


def norm_weights(model: nn.Module) -> list[nn.Parameter]:
    """The weight of every RMSNorm in ``model`` (replicated over the tp group)."""
    return [m.weight for m in model.modules() if isinstance(m, RMSNorm)]


def sequence_parallel_norms(model: nn.Module, group: Any) -> list[Any]:
    """Register, on every RMSNorm weight of ``model``, a hook that all-reduces its gradient over
    ``group`` (sum) as backward computes it; returns the hook handles."""
    handles = []
    # BEGIN SOLUTION lab07.5: each rank's norm gradient covers its s/t tokens: sum them
    for weight in norm_weights(model):
        handles.append(weight.register_hook(lambda grad: _all_reduce(grad, group)))
    # END SOLUTION
    return handles


def reduce_norm_grads(model: nn.Module, group: Any) -> None:
    """All-reduce (sum) the ``.grad`` of every RMSNorm weight over ``group``, in place: the
    explicit, once-per-step form of :func:`sequence_parallel_norms` (don't use both)."""
    # BEGIN SOLUTION lab07.5: sum the partial norm gradients over the group
    for weight in norm_weights(model):
        if weight.grad is not None:
            weight.grad.copy_(_all_reduce(weight.grad, group))
    # END SOLUTION
