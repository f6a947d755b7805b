"""Lab 0's graded task: an all-reduce made of a reduce-scatter and an all-gather (lab00.1).

Checked on 2, 3 and 4 emulated ranks against the sum computed in one process (fp64, integer
values: exact), in place, on a 2-D tensor; and by the collectives it calls, counted by
CommCounter: one reduce-scatter and one all-gather, ``2 (n - 1) / n * S`` bytes in all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.comm.halves import all_reduce_by_halves
from minitorch_dist.launching.launcher import RankError, RankTimeoutError


def _rank_tensor(rank: int, world_size: int) -> torch.Tensor:
    # A different integer pattern on every rank, so a missing rank or a chunk summed twice shows.
    k = 3 * world_size
    return (torch.arange(k * 2, dtype=torch.float64).view(k, 2) + 1) * (rank + 1) ** 2


def _sum_and_calls(rank: int, world_size: int) -> tuple[torch.Tensor, bool, dict, dict]:
    t = _rank_tensor(rank, world_size)
    before = t.data_ptr()
    with CommCounter() as cc:
        out = all_reduce_by_halves(t)
    in_place = out is t and t.data_ptr() == before
    return t, in_place, dict(cc.calls), dict(cc.bytes_sent)


@pytest.mark.lab00
@pytest.mark.task("lab00.1")
@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_all_reduce_by_halves_sums_over_every_rank(world_size: int) -> None:
    expected = sum(_rank_tensor(r, world_size) for r in range(world_size))
    for rank, (got, in_place, _, _) in enumerate(launch(_sum_and_calls, world_size)):
        assert in_place, f"rank {rank}: the sum must be written into the tensor passed in"
        torch.testing.assert_close(
            got,
            expected,
            rtol=0,
            atol=0,
            msg=lambda m, rank=rank: f"rank {rank} does not hold the sum over all ranks: {m}",
        )


@pytest.mark.lab00
@pytest.mark.task("lab00.1")
def test_all_reduce_by_halves_sends_one_reduce_scatter_and_one_all_gather() -> None:
    world_size = 4
    S = _rank_tensor(0, world_size).numel() * 8
    for rank, (_, _, calls, sent) in enumerate(launch(_sum_and_calls, world_size)):
        assert calls.get("all_reduce", 0) == 0, "build it from its halves, not dist.all_reduce"
        assert calls.get("reduce_scatter") == 1 and calls.get("all_gather") == 1, (
            f"rank {rank}: expected one reduce-scatter and one all-gather, got {calls}"
        )
        assert sent["reduce_scatter"] + sent["all_gather"] == collective_bytes(
            "all_reduce", S, world_size
        ), f"rank {rank} sent {sent}: not the 2 (n - 1) / n * S bytes of an all-reduce"


def _indivisible(rank: int, world_size: int) -> str:
    try:
        all_reduce_by_halves(torch.ones(5))
    except ValueError as e:
        return str(e)
    return "no error"


def test_all_reduce_by_halves_rejects_uneven_chunks() -> None:
    """Not graded (the input check is given): 5 elements do not cut into 2 equal chunks."""
    assert "divisible by the world size 2" in launch(_indivisible, 2)[0]


def _raises_on_rank_1(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("on purpose")
    dist.all_reduce(torch.ones(1))


def _rank_1_skips(rank: int, world_size: int) -> None:
    if rank != 1:
        dist.all_reduce(torch.ones(1))


def test_launch_errors_print_no_machine_paths() -> None:
    """Not graded: lab 0 shows these errors on purpose, and the book must not print the build
    machine's paths (the repository's, site-packages', a kernel's temporary cell file)."""
    root = str(Path(__file__).resolve().parent.parent)
    for fn, error in ((_raises_on_rank_1, RankError), (_rank_1_skips, RankTimeoutError)):
        with pytest.raises(error) as caught:
            launch(fn, 2, timeout=3)
        text = str(caught.value)
        assert 'File "' in text, text  # the frames are still there
        assert root not in text and "/site-packages/" not in text, text
