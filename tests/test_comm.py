"""Bytes per collective: the ring formula, the counter, a send/recv ring, and gloo's sockets."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.comm import (
    CommCounter,
    all_gather_into_tensor,
    collective_bytes,
    reduce_scatter_tensor,
)
from minitorch_dist.comm.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter

WORLD_SIZES = [2, 4, 8]


def test_ring_formula_by_hand() -> None:
    """Catches a wrong factor: 2(n-1)/n for all-reduce, (n-1)/n for the halves."""
    assert collective_bytes("all_reduce", 1024, 4) == 1536
    assert collective_bytes("reduce_scatter", 1024, 4) == 768
    assert collective_bytes("all_gather", 1024, 4) == 768
    assert collective_bytes("all_reduce", 1000, 1) == 0  # one rank talks to nobody
    assert collective_bytes("all_reduce", 10, 3) == pytest.approx(40 / 3)  # average, uneven


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("all_to_some", 8, 2), "op must be one of"),
        (("all_reduce", 8, 0), "world_size must be an integer >= 1"),
        (("all_reduce", -8, 2), "nbytes must be >= 0"),
    ],
)
def test_collective_bytes_rejects_bad_input(args: tuple, message: str) -> None:
    """Catches nonsense input returning a number."""
    with pytest.raises(ValueError, match=message):
        collective_bytes(*args)


def _count_builtin(rank: int, world_size: int, numel: int) -> dict:
    full = torch.arange(numel, dtype=torch.float32) + rank
    shard = torch.empty(numel // world_size)
    gathered = torch.empty(numel)
    with CommCounter() as cc:
        dist.all_reduce(full.clone())
        reduce_scatter_tensor(shard, full)
        all_gather_into_tensor(gathered, shard)
    return {"sent": dict(cc.bytes_sent), "calls": dict(cc.calls), "payload": dict(cc.payload_bytes)}


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_counter_books_the_ring_bytes_of_builtin_collectives(world_size: int) -> None:
    """Catches the counter taking the shard for the payload or the wrong group size."""
    numel = 1024 * world_size
    nbytes = numel * 4
    for r in launch(_count_builtin, world_size, numel):
        assert r["calls"] == {"all_reduce": 1, "reduce_scatter": 1, "all_gather": 1}
        assert r["payload"] == {
            "all_reduce": nbytes,
            "reduce_scatter": nbytes,
            "all_gather": nbytes,
        }
        assert r["sent"] == {
            op: collective_bytes(op, nbytes, world_size)
            for op in ("all_reduce", "reduce_scatter", "all_gather")
        }


def _ring(rank: int, world_size: int, numel: int) -> dict:
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(numel, generator=gen)
    want = x.clone()
    dist.all_reduce(want)
    out = {}
    for name, fn in [
        ("all_reduce", ring_all_reduce),
        ("reduce_scatter", ring_reduce_scatter),
        ("all_gather", ring_all_gather),
    ]:
        y = x.clone()
        with CommCounter() as cc:
            fn(y)
        out[name] = (y, cc.bytes_sent["send"])
    chunk = slice(rank * numel // world_size, (rank + 1) * numel // world_size)
    return {
        "all_reduce_err": (out["all_reduce"][0] - want).abs().max().item(),
        "reduce_scatter_err": (out["reduce_scatter"][0][chunk] - want[chunk]).abs().max().item(),
        "sent": {k: v[1] for k, v in out.items()},
    }


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_send_recv_ring_sends_exactly_the_formula(world_size: int) -> None:
    """Measured, not booked: the bytes a ring built from sends really sends equal the formula."""
    numel = 96 * world_size
    for r in launch(_ring, world_size, numel):
        assert r["all_reduce_err"] < 1e-5 and r["reduce_scatter_err"] < 1e-5
        for op, sent in r["sent"].items():
            assert sent == collective_bytes(op, numel * 4, world_size), op


def _ring_all_gather_values(rank: int, world_size: int) -> list:
    t = torch.zeros(10)
    t.tensor_split(world_size)[rank].fill_(rank + 1)
    ring_all_gather(t)
    return t.tolist()


def test_ring_all_gather_with_uneven_chunks() -> None:
    """Catches chunk indexing that assumes the size divides by the rank count."""
    want = torch.cat(
        [torch.full((len(c),), i + 1.0) for i, c in enumerate(torch.zeros(10).tensor_split(3))]
    )
    assert launch(_ring_all_gather_values, 3) == [want.tolist()] * 3


def _wire(rank: int, world_size: int, numel: int) -> list:
    x = torch.ones(numel)
    dist.barrier()
    wire = []
    for _ in range(3):
        with CommCounter() as cc:
            dist.all_reduce(x)
        wire.append(cc.wire_bytes)
    return wire


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
@pytest.mark.parametrize("world_size", [2, 4])
def test_gloo_all_reduce_puts_the_ring_formula_on_the_wire(world_size: int) -> None:
    """Gloo's own all-reduce, measured at the socket: within 1 % of 2(n-1)/n*S (headers)."""
    numel = 2**16 * world_size
    formula = collective_bytes("all_reduce", numel * 4, world_size)
    for wire in launch(_wire, world_size, numel):
        assert min(wire) == pytest.approx(formula, rel=0.01)


def _shim_warnings(rank: int, world_size: int) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.empty(4 * world_size)
        all_gather_into_tensor(out, torch.ones(4))
        reduce_scatter_tensor(torch.empty(4), torch.ones(4 * world_size))
    return len(caught)


def test_shim_prints_no_deprecation_warnings() -> None:
    """Catches the renamed-collective FutureWarning that would break nbval."""
    assert launch(_shim_warnings, 2) == [0, 0]
