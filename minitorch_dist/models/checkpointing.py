"""Which modules of the Llama each recompute policy checkpoints, and PyTorch's checkpoint on them.

Korthikanti et al. 2022 (section 5) name two policies. **Full** recomputation checkpoints every
transformer block: a block keeps only its input and runs its forward twice. **Selective**
recomputation checkpoints only the attention core, softmax(q k^T / sqrt(d)) v, whose (s x s)
matrices are the largest activations of an unfused attention and the cheapest to recompute.
**None** stores everything. In our Llama those are every :class:`~minitorch_dist.models.Block`
and every :class:`~minitorch_dist.models.AttentionCore` (its subclasses included, such as the
unfused core of chapter 3): :data:`RECOMPUTE_TARGETS` says so, once, for the whole package.

:func:`apply_torch_checkpointing` wraps those modules in ``torch.utils.checkpoint``: the reference
that memory measurements (chapter 1, fake tensors), lab 3's tests, the benchmarks and the ZeRO
tests use. Lab 3 has the reader write the same choice as policy functions and a wrapper of their
own (:mod:`minitorch_dist.recompute.policies`); its tests compare the two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint

from minitorch_dist.checks import check_bool, check_choice
from minitorch_dist.models.llama import AttentionCore, Block

__all__ = ["RECOMPUTE_TARGETS", "apply_torch_checkpointing", "checkpoint_targets", "wrap_forward"]

# policy name -> the module classes whose forward it recomputes (Korthikanti et al. 2022, §5)
RECOMPUTE_TARGETS: dict[str, tuple[type[nn.Module], ...]] = {
    "none": (),
    "selective": (AttentionCore,),
    "full": (Block,),
}


def checkpoint_targets(model: nn.Module, recompute: str) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` of every submodule of ``model`` that the policy ``recompute``
    (``"none"``, ``"selective"``, ``"full"``) checkpoints, in ``named_modules`` order."""
    kinds = RECOMPUTE_TARGETS[check_choice("recompute", recompute, RECOMPUTE_TARGETS)]
    if not kinds:
        return []
    return [(name, module) for name, module in model.named_modules() if isinstance(module, kinds)]


def wrap_forward(module: nn.Module, wrapper: Callable[..., Any]) -> None:
    """Make ``module(*args, **kwargs)`` return ``wrapper(forward, *args)``, in place, where
    ``forward`` is the module's forward as it was, with the keyword arguments bound (so that a
    checkpoint sees only the positional tensors). The wrapper is an instance attribute:
    ``del module.forward`` restores the class's forward."""
    forward = module.forward

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return wrapper(functools.partial(forward, **kwargs), *args)

    module.forward = wrapped


def apply_torch_checkpointing(
    model: nn.Module, recompute: str, *, use_reentrant: bool = False
) -> nn.Module:
    """Wrap, in place, every module that ``recompute`` picks (:func:`checkpoint_targets`) in
    ``torch.utils.checkpoint.checkpoint``; returns ``model``. ``use_reentrant=False`` (default)
    is torch's saved-tensor-hooks form, ``True`` its older autograd.Function form."""
    run = functools.partial(checkpoint, use_reentrant=check_bool("use_reentrant", use_reentrant))
    for _, module in checkpoint_targets(model, recompute):
        wrap_forward(module, run)
    return model
