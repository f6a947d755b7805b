"""The four ZeRO stages by number: :data:`STAGES` and :func:`zero_optimizer`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from minitorch_dist.checks import check_choice
from minitorch_dist.zero.base import ZeroOptimizer
from minitorch_dist.zero.stage0 import ZeroStage0
from minitorch_dist.zero.stage1 import ZeroStage1
from minitorch_dist.zero.stage2 import ZeroStage2
from minitorch_dist.zero.stage3 import ZeroStage3

__all__ = ["STAGES", "zero_optimizer"]

STAGES = {0: ZeroStage0, 1: ZeroStage1, 2: ZeroStage2, 3: ZeroStage3}


def zero_optimizer(
    model: nn.Module | Iterable[torch.Tensor] | Iterable[dict[str, Any]],
    stage: int,
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
    **kwargs: Any,
) -> ZeroOptimizer:
    """The ZeRO optimizer of ``stage`` (0-3) for ``model`` (a module; at stages 0-2 also its
    parameters or param groups); ``kwargs`` go to its constructor (``group``, ``units``,
    ``offload``, ``prefetch`` for stage 3, and the optimizer's own: ``lr``, ``weight_decay``...)."""
    check_choice("stage", stage, STAGES)
    return STAGES[stage](model, optimizer_class, **kwargs)
