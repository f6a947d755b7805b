"""Op-level selective checkpointing (given code beside lab 3's layer-level policies): what it
stores, measured, equals the closed form; the step is the same as without checkpointing."""

from __future__ import annotations

import copy

import pytest
import torch

from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.recompute import (
    apply_op_level_checkpointing,
    measure_recompute,
    op_level_block_bytes,
)

TINY = LlamaConfig.from_preset("tiny")


def test_op_level_step_equals_the_uncheckpointed_step() -> None:
    """Catches a policy that replays the wrong saved output or drops one (fp64: bit for bit)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        model = Llama(TINY)
    finally:
        torch.set_default_dtype(previous)
    reference = copy.deepcopy(model)
    assert apply_op_level_checkpointing(model) == ["layers.0", "layers.1"]
    inputs, targets = synthetic_batch(TINY.vocab_size, 2, 32, seed=1)
    losses = []
    for m in (reference, model):
        loss = cross_entropy(m(inputs), targets)
        loss.backward()
        losses.append(loss.detach())
    assert torch.equal(*losses)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name


@pytest.mark.parametrize("seq_len,micro_batch", [(64, 2), (32, 3)])
def test_op_level_stores_exactly_the_saved_operators(seq_len: int, micro_batch: int) -> None:
    """Catches a closed form that forgets the log-sum-exp, the projections' outputs or the block
    input: measured bytes minus full recomputation's (which keeps only each block's input) equal
    L x (op_level_block_bytes - b s h p), and op-level lies between full and none."""
    kw = dict(seq_len=seq_len, micro_batch=micro_batch)
    stored = {
        p: measure_recompute(TINY, policy=p, **kw)["activations"] for p in ("none", "ops", "full")
    }
    block = op_level_block_bytes(TINY, dtype_bytes=4, **kw)
    block_input = 4 * micro_batch * seq_len * TINY.hidden
    assert stored["ops"] - stored["full"] == TINY.layers * (block - block_input)
    assert stored["full"] < stored["ops"] < stored["none"]


def test_op_level_needs_a_block() -> None:
    with pytest.raises(ValueError, match="no transformer Block"):
        apply_op_level_checkpointing(torch.nn.Linear(2, 2))
