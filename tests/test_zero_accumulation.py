"""ZeRO's traffic under gradient accumulation: stages 0 and 1 communicate once per step, stage 2
reduce-scatters every micro-batch, stage 3 gathers and reduce-scatters every micro-batch;
counted on emulated ranks and equal to zero_comm_bytes(..., grad_acc=g)."""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.zero import zero_optimizer
from minitorch_dist.zero.measure import zero_comm_bytes

TINY = LlamaConfig.from_preset("tiny")


def _accumulated_step(rank: int, world_size: int, stage: int, grad_acc: int) -> int:
    torch.manual_seed(0)
    model = Llama(TINY)
    opt = zero_optimizer(model, stage, lr=1e-3)
    inputs, targets = synthetic_batch(TINY.vocab_size, 2 * grad_acc, 32, seed=rank)
    with CommCounter() as counter:
        for k in range(grad_acc):
            rows = slice(2 * k, 2 * k + 2)
            (cross_entropy(model(inputs[rows]), targets[rows]) / grad_acc).backward()
        opt.step()
    return counter.total_bytes_sent


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_bytes_per_step_with_four_micro_batches(stage: int) -> None:
    """Catches the claim that stages 1 and 2 always send what data parallelism sends: at
    grad_acc = 4 stage 2 sends 5/2 of it and stage 3 four times its own single-batch bytes."""
    sent = launch(_accumulated_step, 4, stage, 4)
    psi = sum(p.numel() for p in Llama(TINY).parameters())
    want = zero_comm_bytes(psi, stage, 4, bytes_per_param=4, grad_acc=4)
    assert sent == [want] * 4
    if stage in (0, 1):
        assert want == zero_comm_bytes(psi, stage, 4, bytes_per_param=4)


def test_formula_by_hand() -> None:
    s, n = 1000, 4  # (n - 1) / n S = 750 per pass
    assert zero_comm_bytes(500, 2, n, grad_acc=4) == 5 * 750
    assert zero_comm_bytes(500, 3, n, grad_acc=4) == 12 * 750
    assert (
        zero_comm_bytes(500, 1, n, grad_acc=4) == 2 * 750 == zero_comm_bytes(500, 0, n, grad_acc=4)
    )
    with pytest.raises(ValueError, match="grad_acc"):
        zero_comm_bytes(s, 2, n, grad_acc=0)
