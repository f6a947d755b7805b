"""The shared "N ranks == one process" harness must pass a right technique and fail wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.reference import (
    EXACT,
    Shard,
    assert_runs_match,
    batch_slice,
    compare,
    make_batches,
    rank_batch,
    reference_run,
    run_training,
)

TINY = LlamaConfig.from_preset("tiny")
BATCHES = make_batches(TINY.vocab_size, 4, 8, 2)


def _model() -> Llama:
    return Llama(TINY).double()


def _sgd(params) -> torch.optim.Optimizer:  # noqa: ANN001
    return torch.optim.SGD(params, lr=0.1)


def _hand_dp(rank: int, world_size: int, divide: bool) -> object:
    """Data parallelism written by hand: all-reduce every gradient, divided by N or not."""
    torch.manual_seed(0)
    model = _model()

    class Averaged(torch.optim.SGD):
        def step(self) -> None:  # noqa: D102
            for p in model.parameters():
                dist.all_reduce(p.grad)
                if divide:
                    p.grad /= world_size
            super().step()

    # the reduction happens inside step(), after the harness reads .grad: compare no gradients
    return run_training(
        model,
        Averaged(model.parameters(), lr=0.1),
        BATCHES,
        rank=rank,
        world_size=world_size,
        grads=lambda m, o: {},
    )


def test_fp64_reference_repeats_exactly() -> None:
    """Catches a reference that depends on anything but the seed (same run, same bits)."""
    a, b = (reference_run(_model, _sgd, BATCHES) for _ in range(2))
    assert a.losses == b.losses
    assert all(torch.equal(a.weights[n], b.weights[n]) for n in a.weights)
    assert set(a.grads) == {n for n, _ in _model().named_parameters()}


@pytest.mark.parametrize(("divide", "passes"), [(True, True), (False, False)])
def test_harness_passes_averaging_and_fails_summing(divide: bool, passes: bool) -> None:
    """The harness can fail: a data-parallel step that sums gradients without dividing by N
    is caught by the second step's loss and the weights (fp64, EXACT tolerance); the right one
    passes."""
    ref = reference_run(_model, _sgd, BATCHES)
    runs = launch(_hand_dp, 2, divide, timeout=60)
    check = ("losses", "outputs", "weights")
    if passes:
        assert_runs_match(runs, ref, check=check, outputs=lambda r: Shard(0, r, 2))
    else:
        with pytest.raises(AssertionError, match="losses|weight"):
            assert_runs_match(runs, ref, check=check, outputs=lambda r: Shard(0, r, 2))


def test_compare_names_the_tensor_and_checks_shards() -> None:
    """Catches a comparison that ignores missing names, shapes, or which shard a rank holds."""
    full = torch.arange(12.0, dtype=torch.float64).view(4, 3)
    assert (
        compare(
            {"w": full[2:]}, {"w": full}, shards={"w": Shard(0, 1, 2)}, tolerance=EXACT
        ).max_abs_error
        == 0.0
    )
    with pytest.raises(AssertionError, match="w"):
        compare({"w": full[:2]}, {"w": full}, shards={"w": Shard(0, 1, 2)}, tolerance=EXACT)
    with pytest.raises(AssertionError, match="missing"):
        compare({}, {"w": full})
    with pytest.raises(AssertionError, match="shape"):
        compare({"w": full[:, :1]}, {"w": full}, shards={"w": Shard(1, 0, 2)})
    result = compare({"a": full + 1, "b": full}, {"a": full, "b": full})
    assert result.worst == "a" and result.max_abs_error == 1.0


def test_slices_are_consecutive_rows_and_refuse_bad_input() -> None:
    x = torch.arange(8).view(4, 2)
    assert torch.equal(batch_slice(x, 1, 2), x[2:])
    assert torch.equal(rank_batch((x, x + 1), 3, 4)[1], x[3:] + 1)
    with pytest.raises(ValueError, match="must divide"):
        batch_slice(x, 0, 3)
    with pytest.raises(ValueError, match="grad_acc must be an integer >= 1, got True"):
        run_training(_model(), _sgd(_model().parameters()), BATCHES, grad_acc=True)
