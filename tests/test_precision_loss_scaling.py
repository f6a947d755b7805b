"""Dynamic loss scaling (lab 2, task lab02.2): torch.amp.GradScaler is the oracle.

Both scalers drive the same model through the same scripted gradients, with inf and NaN injected
at chosen steps; after every step the scales must be equal, the same steps must be skipped, and
the weights must be bitwise equal.
"""

from __future__ import annotations

import math

import pytest
import torch

from minitorch_dist.precision import DynamicLossScaler

INF, NAN = math.inf, math.nan
# one row per step: the gradient of the loss (before scaling) for the 3 weights
SCRIPT = [
    [1.0, 2.0, 3.0],
    [INF, 0.0, 0.0],
    [0.5, -1.0, 0.25],
    [1.0, 1.0, 1.0],
    [NAN, 1.0, 1.0],
    [1e-3, 1.0, 2.0],
    [2.0, 2.0, 2.0],
    [1.0, -INF, 1.0],
    [0.1, 0.2, 0.3],
    [1.0, 1.0, 1.0],
    [3.0, 1.0, 2.0],
    [1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [NAN, NAN, NAN],
    [1.0, 2.0, 1.0],
    [1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0],
]


def run(scaler: object) -> list[tuple[float, bool, list[float]]]:
    """Per step: the scale after update(), whether the weights moved, the weights."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    history = []
    for row in SCRIPT:
        opt.zero_grad()
        before = w.detach().clone()
        loss = (w * torch.tensor(row)).sum()  # dloss/dw = row
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        moved = not torch.equal(before, w.detach())
        history.append((scaler.get_scale(), moved, w.detach().tolist()))
    return history


@pytest.mark.lab02
@pytest.mark.task("lab02.2")
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(init_scale=16.0, growth_interval=2),
        dict(init_scale=2.0**16, growth_interval=3),
        dict(init_scale=1.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=1),
    ],
)
def test_matches_grad_scaler_step_for_step(kwargs: dict) -> None:
    """Catches growing after the wrong count of good steps, not resetting the count on an
    overflow, missing NaN (only checking inf), updating on a bad step, or unscaling wrongly."""
    ours = run(DynamicLossScaler(**kwargs))
    theirs = run(torch.amp.GradScaler("cpu", **kwargs))
    for step, (a, b) in enumerate(zip(ours, theirs), start=1):
        assert a[0] == b[0], f"step {step}: scale {a[0]} vs GradScaler's {b[0]}"
        assert a[1] == b[1], f"step {step}: {'stepped' if a[1] else 'skipped'}, GradScaler not"
        assert a[2] == b[2], f"step {step}: weights differ"
    assert [m for _, m, _ in ours].count(False) == 4  # the four injected overflows were skipped


@pytest.mark.lab02
@pytest.mark.task("lab02.2")
def test_unscale_reports_inf_and_nan_and_divides_by_the_scale() -> None:
    """Catches an unscale that divides by the wrong factor or only checks the first gradient."""
    scaler = DynamicLossScaler(init_scale=8.0)
    grads = [torch.tensor([8.0, 16.0]), torch.tensor([4.0])]
    assert scaler.unscale_(grads) is False
    assert grads[0].tolist() == [1.0, 2.0] and grads[1].tolist() == [0.5]
    assert scaler.unscale_([torch.ones(2), torch.tensor([1.0, NAN])]) is True
    assert scaler.unscale_([None, torch.tensor([-INF])]) is True


@pytest.mark.lab02
@pytest.mark.task("lab02.2")
def test_growth_stops_before_fp32_overflow() -> None:
    """Catches a scale that grows to inf: GradScaler keeps S finite in fp32."""
    scaler = DynamicLossScaler(init_scale=2.0**127, growth_interval=1)
    scaler.update(False)
    assert scaler.get_scale() == 2.0**127, (
        f"after a good step at S = 2^127 the scale is {scaler.get_scale()}: growing it by 2 "
        "overflows fp32 (inf); the scale grows only while S x growth_factor stays finite"
    )
    scaler.update(True)
    assert scaler.get_scale() == 2.0**126, (
        f"an overflow at S = 2^127 gives {scaler.get_scale()}, not 2^126 (backoff_factor 0.5)"
    )


@pytest.mark.lab02
@pytest.mark.task("lab02.2")
def test_an_overflow_restarts_the_count_of_good_steps() -> None:
    """Catches an overflow that backs off S but keeps the good steps counted before it: S may
    grow only after growth_interval good steps in a row (GradScaler's growth tracker)."""
    scaler = DynamicLossScaler(init_scale=16.0, growth_interval=2)
    for found_inf in (False, True, False):  # good, overflow (S = 8), good
        scaler.update(found_inf)
    assert scaler.get_scale() == 8.0, (
        f"S = {scaler.get_scale()} after a good step, an overflow and a good step with "
        "growth_interval=2, expected 8: an overflow must restart the count of good steps"
    )
    scaler.update(False)  # the second good step in a row
    assert scaler.get_scale() == 16.0


def test_validation() -> None:
    """Catches nonsense settings, and update() called with nothing to go by."""
    with pytest.raises(ValueError, match="growth_factor must be > 1"):
        DynamicLossScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor must be in"):
        DynamicLossScaler(backoff_factor=1.0)
    with pytest.raises(ValueError, match="growth_interval must be an integer >= 1"):
        DynamicLossScaler(growth_interval=0)
    with pytest.raises(ValueError, match="init_scale must be > 0"):
        DynamicLossScaler(init_scale=0.0)
    with pytest.raises(ValueError, match="needs found_inf"):
        DynamicLossScaler().update()


def test_state_dict_round_trip() -> None:
    """Catches a checkpoint that forgets the count of good steps."""
    a = DynamicLossScaler(init_scale=4.0)
    a.growth_tracker = 7
    b = DynamicLossScaler()
    b.load_state_dict(a.state_dict())
    assert (b.get_scale(), b.growth_tracker) == (4.0, 7)
