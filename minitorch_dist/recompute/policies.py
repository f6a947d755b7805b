"""Which modules to recompute: checkpointing policies applied to a model (lab03.2, lab03.3).

A *policy* is a function ``policy(name, module) -> bool`` that says whether a submodule's forward
should run under :func:`~minitorch_dist.recompute.checkpoint.checkpoint`.
:func:`apply_activation_checkpointing` walks the model and wraps every submodule the policy
picks, in place, the way torchtitan's ``apply_ac(model, config)`` transforms a model.

Two policies, in the vocabulary of Korthikanti et al. 2022:

- ``full_policy`` (section 5, "full activation recomputation"): every transformer ``Block``.
  Each block keeps only its input, p·bsh bytes, and the whole block's forward runs twice.
- ``selective_policy`` (section 5, "selective activation recomputation"): only ``attn.core``,
  softmax(qk^T/sqrt(d))v. In an unfused attention its (s x s) scores and probabilities are the
  5as^2b term of the per-layer count, the largest part for long sequences, while recomputing
  them costs only the two attention matrix products (2.7 % more FLOPs for GPT-3 in their
  Table 4). A fused kernel (FlashAttention, Dao et al. 2022, section 3.1) already recomputes the
  scores in its backward: there selective recomputation saves only what the kernel keeps besides
  its inputs and output (one fp32 logsumexp per row and head).

The wrapping is an instance attribute ``module.forward`` that calls the class's forward through
the checkpoint; :func:`remove_activation_checkpointing` deletes it again.

The rest of the package takes the same choice from one place,
:data:`~minitorch_dist.models.checkpointing.RECOMPUTE_TARGETS`, and checkpoints it with PyTorch's
own checkpoint (:func:`~minitorch_dist.models.checkpointing.apply_torch_checkpointing`): the
reference that lab 3's tests hold the policies and the wrapper written here against.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn

from minitorch_dist.checks import check_choice
from minitorch_dist.models.llama import AttentionCore, Block
from minitorch_dist.recompute.checkpoint import checkpoint

__all__ = [
    "POLICIES",
    "Policy",
    "apply_activation_checkpointing",
    "checkpointed_modules",
    "full_policy",
    "no_policy",
    "remove_activation_checkpointing",
    "resolve_policy",
    "selective_policy",
]

Policy = Callable[[str, nn.Module], bool]
_FLAG = "_minitorch_checkpointed"  # set on each wrapped module


def no_policy(name: str, module: nn.Module) -> bool:
    """Recompute nothing: every activation is stored (the baseline)."""
    return False


def full_policy(name: str, module: nn.Module) -> bool:
    """Full recomputation: every transformer ``Block`` (Korthikanti et al. 2022, section 5)."""
    # BEGIN SOLUTION lab03.2: pick every transformer Block
    return isinstance(module, Block)
    # END SOLUTION


def selective_policy(name: str, module: nn.Module) -> bool:
    """Selective recomputation: only the attention core, softmax(qk^T / sqrt(d)) v, of each
    block (Korthikanti et al. 2022, section 5). Its inputs q, k, v and its output stay stored:
    the projections around it need them anyway."""
    # BEGIN SOLUTION lab03.3: pick only the attention core of each block
    return isinstance(module, AttentionCore)
    # END SOLUTION


POLICIES: dict[str, Policy] = {
    "none": no_policy,
    "full": full_policy,
    "selective": selective_policy,
}


def resolve_policy(policy: str | Policy) -> Policy:
    """A policy function from a name in :data:`POLICIES` or a callable."""
    if isinstance(policy, str):
        return POLICIES[check_choice("policy", policy, POLICIES)]
    if not callable(policy):
        raise ValueError(
            f"policy must be one of {', '.join(POLICIES)} or a callable, "
            f"got {type(policy).__name__}"
        )
    return policy


def checkpointed_modules(model: nn.Module) -> list[str]:
    """Names of the submodules of ``model`` that run under a checkpoint now."""
    return [name for name, m in model.named_modules() if getattr(m, _FLAG, False)]


def apply_activation_checkpointing(
    model: nn.Module, policy: str | Policy = "full", *, preserve_rng_state: bool = True
) -> list[str]:
    """Wrap, in place, the forward of every submodule of ``model`` that ``policy`` picks in
    :func:`~minitorch_dist.recompute.checkpoint.checkpoint`; return the wrapped names in model
    order (``named_modules``). ``policy`` is ``"none"``, ``"full"``, ``"selective"`` or a function
    ``(name, module) -> bool``.

    A module inside one that is already wrapped is not wrapped again (its forward would be
    recomputed twice for nothing), and a model that already has checkpointed modules is refused:
    call :func:`remove_activation_checkpointing` first.
    """
    chosen = resolve_policy(policy)
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be an nn.Module, got {type(model).__name__}")
    if checkpointed_modules(model):
        raise ValueError(
            "model already has checkpointed modules: remove_activation_checkpointing first"
        )
    # BEGIN SOLUTION lab03.2: wrap each picked module's forward in checkpoint, outermost first
    wrapped: list[str] = []
    for name, module in model.named_modules():  # parents come before their children
        if not chosen(name, module) or any(name.startswith(w + ".") or w == "" for w in wrapped):
            continue
        forward = type(module).forward  # the class's forward, bound to this module below

        def checkpointed(
            *args: Any, _module: nn.Module = module, _forward: Any = forward, **kwargs: Any
        ) -> Any:
            run = functools.partial(_forward, _module, **kwargs)  # keyword args: not saved
            return checkpoint(run, *args, preserve_rng_state=preserve_rng_state)

        module.forward = checkpointed
        setattr(module, _FLAG, True)
        wrapped.append(name)
    return wrapped
    # END SOLUTION


def remove_activation_checkpointing(model: nn.Module) -> list[str]:
    """Undo :func:`apply_activation_checkpointing`; return the names that were unwrapped."""
    names = checkpointed_modules(model)
    for name in names:
        module = model.get_submodule(name)
        del module.forward  # the class's forward shows through again
        delattr(module, _FLAG)
    return names
