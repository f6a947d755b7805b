"""Which modules each recompute policy checkpoints (``minitorch_dist.models.checkpointing``).

One table says it for the whole package; these tests hold torch's checkpoint applied from it to
the uncheckpointed model (same loss, same gradients, each block's forward run twice) and hold
lab 3's policies to the same choice. Not graded.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.memory import RECOMPUTE
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.models.checkpointing import (
    RECOMPUTE_TARGETS,
    apply_torch_checkpointing,
    checkpoint_targets,
    wrap_forward,
)
from minitorch_dist.recompute import POLICIES, apply_activation_checkpointing, use_attention

TINY = LlamaConfig.from_preset("tiny")


def _step(model: torch.nn.Module) -> tuple[float, dict[str, torch.Tensor]]:
    inputs, targets = synthetic_batch(TINY.vocab_size, 2, 16)
    loss = cross_entropy(model(inputs), targets)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_the_policies_are_the_estimates_policies() -> None:
    """Catches a policy name the closed-form estimate knows but the models cannot apply (or the
    other way round): both must name the same policies."""
    assert set(RECOMPUTE_TARGETS) == set(RECOMPUTE) == set(POLICIES)


@pytest.mark.parametrize("attention", ["fused", "math"])
def test_targets_are_every_block_or_every_attention_core(attention: str) -> None:
    """Catches full picking less than every block, or selective missing the unfused core (a
    subclass of AttentionCore) or picking attention with its projections."""
    model = use_attention(Llama(TINY), attention)
    layers = range(TINY.layers)
    assert checkpoint_targets(model, "none") == []
    assert [n for n, _ in checkpoint_targets(model, "full")] == [f"layers.{i}" for i in layers]
    cores = checkpoint_targets(model, "selective")
    assert [n for n, _ in cores] == [f"layers.{i}.attn.core" for i in layers]
    assert all(m is model.layers[i].attn.core for i, (_, m) in zip(layers, cores))


@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_lab3_policies_pick_the_same_modules(recompute: str) -> None:
    """Catches lab 3's policies and the package's reference drifting apart: what our checkpoint
    wraps is what torch's is applied to."""
    model = Llama(TINY)
    wrapped = apply_activation_checkpointing(model, recompute)
    assert wrapped == [name for name, _ in checkpoint_targets(Llama(TINY), recompute)]


@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_torch_checkpointing_keeps_loss_and_gradients(recompute: str, use_reentrant: bool) -> None:
    """Catches a wrapper that drops an argument or changes a result: loss and every gradient
    equal the uncheckpointed model's, in both of torch's forms."""
    torch.manual_seed(0)
    plain = Llama(TINY)
    torch.manual_seed(0)
    model = apply_torch_checkpointing(Llama(TINY), recompute, use_reentrant=use_reentrant)
    loss, grads = _step(model)
    ref_loss, ref_grads = _step(plain)
    assert loss == ref_loss
    for name, grad in ref_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=0, atol=0, msg=name)


def test_full_runs_each_block_forward_twice() -> None:
    """Catches checkpointing applied but not used: in backward each block's forward runs again,
    last block first."""
    torch.manual_seed(0)
    model = apply_torch_checkpointing(Llama(TINY), "full")
    calls: list[int] = []
    for i, block in enumerate(model.layers):
        block.attn.register_forward_hook(lambda *_, i=i: calls.append(i))
    _step(model)
    assert calls == [0, 1, 1, 0]


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor, *, factor: float = 1.0) -> torch.Tensor:
        return x * factor


def test_wrap_forward_binds_keywords_and_can_be_removed() -> None:
    """Catches keyword arguments lost on the way through the wrapper (the wrapper must see the
    positional tensors only), or a wrapper that cannot be taken off again."""
    seen: list[tuple] = []

    def wrapper(forward, *args):  # noqa: ANN001, ANN202
        seen.append(args)
        return forward(*args)

    module, x = _Scale(), torch.ones(2)
    wrap_forward(module, wrapper)
    torch.testing.assert_close(module(x, factor=3.0), 3 * x)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] is x
    del module.forward  # the class's forward again
    torch.testing.assert_close(module(x, factor=2.0), 2 * x)
    assert len(seen) == 1


def test_unknown_policy_is_an_error() -> None:
    """Catches a typo silently checkpointing nothing."""
    with pytest.raises(ValueError, match="recompute must be one of none, selective, full"):
        checkpoint_targets(Llama(TINY), "some")
    with pytest.raises(ValueError, match="use_reentrant must be True or False"):
        apply_torch_checkpointing(Llama(TINY), "full", use_reentrant=None)  # type: ignore[arg-type]
