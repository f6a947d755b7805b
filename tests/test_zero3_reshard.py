"""ZeRO-3's resharding policy: ``reshard_after_forward`` (FSDP2's keyword).

True (the default) frees each unit's gathered parameters after its forward and gathers them
again for its backward: two all-gathers and one reduce-scatter per unit and micro-batch, 3 passes.
False keeps them from the forward until the unit's gradients are reduced: one all-gather, 2
passes, with every unit whole at the end of the forward pass. Both train exactly as the
single-process reference does.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.models import Llama, cross_entropy
from minitorch_dist.reference import make_batches
from minitorch_dist.zero import ZeroStage3, apply_zero3, storage_bytes
from minitorch_dist.zero.measure import expected_comm_bytes
from minitorch_dist.zero.train import UNEVEN, assert_zero_matches, compare_with_reference, rank_rows

ATOL, RTOL = 1e-5, 1e-4  # as tests/test_zero.py
F32 = 4


@pytest.mark.parametrize(("world_size", "grad_acc"), [(2, 1), (4, 1), (4, 2)])
def test_keeping_the_gathered_units_trains_as_the_reference(world_size, grad_acc):
    """Catches a kept unit whose gradient is reduced twice or never, or a stale gather: the
    losses and weights after 3 steps equal single-process Adam's, as with the default."""
    for keep in (True, False):
        result = compare_with_reference(
            3, world_size, grad_acc=grad_acc, reshard_after_forward=keep
        )
        assert_zero_matches(result, atol=ATOL, rtol=RTOL)


def _step(rank: int, world_size: int, reshard: bool, grad_acc: int) -> dict:
    torch.manual_seed(0)
    model = Llama(UNEVEN)
    opt = ZeroStage3(model, lr=1e-3, reshard_after_forward=reshard)
    batch = rank_rows(make_batches(256, 2 * world_size * grad_acc, 16, 1)[0], rank, world_size)
    whole_after_forward = []
    with CommCounter() as cc:
        for k in range(grad_acc):
            rows = slice(2 * k, 2 * k + 2)
            loss = cross_entropy(model(batch[0][rows]), batch[1][rows]) / grad_acc
            whole_after_forward.append(storage_bytes(u.full for u in opt.units))
            loss.backward()
        opt.step()
    return {
        "sent": dict(cc.bytes_sent),
        "calls": dict(cc.calls),
        "expected": expected_comm_bytes(opt),
        "padded": sum(u.padded_numel for u in opt.units),
        "units": len(opt.units),
        "whole_after_forward": max(whole_after_forward),
        "whole_after_step": storage_bytes(u.full for u in opt.units),
    }


@pytest.mark.parametrize("grad_acc", [1, 3])
def test_one_gather_per_unit_and_micro_batch_instead_of_two(grad_acc):
    """Catches backward gathering a kept unit again: per step with m micro-batches, 2m passes
    over Psi instead of 3m (all-gathers m instead of 2m), counted by CommCounter."""
    n = 4
    on, off = (launch(_step, n, keep, grad_acc)[0] for keep in (True, False))
    k, m = on["units"], grad_acc
    assert on["calls"] == {"all_gather": 2 * m * k, "reduce_scatter": m * k}
    assert off["calls"] == {"all_gather": m * k, "reduce_scatter": m * k}, (
        f"reshard_after_forward=False called {off['calls']}: backward must find each unit still "
        "gathered from its forward (no second all-gather)"
    )
    one_pass = collective_bytes("all_gather", F32 * on["padded"], n)
    assert on["sent"] == {"all_gather": 2 * m * one_pass, "reduce_scatter": m * one_pass}
    assert off["sent"] == {"all_gather": m * one_pass, "reduce_scatter": m * one_pass}
    assert 3 * sum(off["sent"].values()) == 2 * sum(on["sent"].values())  # 2m / 3m
    assert 2 * off["sent"]["all_gather"] == on["sent"]["all_gather"]
    if m == 1:  # the tracker's own count follows the policy
        assert off["expected"] == sum(off["sent"].values())
        assert on["expected"] == sum(on["sent"].values())


def test_kept_units_are_all_whole_at_the_end_of_forward():
    """Catches a policy that frees anyway (then it saves no traffic) or never frees: at the end
    of the forward pass every unit is whole with False and none with True; after the step,
    neither holds a whole unit."""
    n = 2
    on, off = (launch(_step, n, keep, 1)[0] for keep in (True, False))
    assert on["whole_after_forward"] == 0
    assert off["whole_after_forward"] == F32 * off["padded"] > on["whole_after_forward"]
    assert on["whole_after_step"] == off["whole_after_step"] == 0


def _no_grad_forward(rank: int, world_size: int) -> int:
    torch.manual_seed(0)
    model = Llama(UNEVEN)
    opt = ZeroStage3(model, reshard_after_forward=False)
    with torch.no_grad():
        model(torch.zeros(1, 4, dtype=torch.long))
    return storage_bytes(u.full for u in opt.units)


def test_a_forward_without_backward_still_frees():
    """Catches units kept gathered for a backward that never comes (evaluation)."""
    assert launch(_no_grad_forward, 2)[0] == 0


def _zero3_calls(rank: int, world_size: int, reshard: bool) -> dict:
    torch.manual_seed(0)
    model = apply_zero3(Llama(UNEVEN), reshard_after_forward=reshard)
    with CommCounter() as cc:
        model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    return {**cc.calls, "units": len(model.zero3.units)}


def test_apply_zero3_takes_the_same_keyword():
    """Catches the keyword not reaching apply_zero3's engine."""
    on, off = (launch(_zero3_calls, 2, keep)[0] for keep in (True, False))
    assert on["all_gather"] == 2 * on["units"] and off["all_gather"] == off["units"]


def test_the_keyword_is_checked():
    """Catches a truthy string taken for True."""
    assert "reshard_after_forward must be True or False" in launch(_bad, 1)[0]


def _bad(rank: int, world_size: int) -> str:
    try:
        ZeroStage3(Llama(UNEVEN), reshard_after_forward="no")
    except ValueError as e:
        return str(e)
    return "accepted"
