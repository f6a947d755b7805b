"""Point-to-point traffic in CommCounter: send/recv, isend/irecv and batch_isend_irecv, counted
against the bytes the test itself passed, matched between neighbours, and measured on gloo's
sockets. Each docstring names the bug the test catches."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter

MODES = ["send_recv", "isend_irecv", "batch_isend_irecv"]
# different dtypes and sizes, so a counter that books numel (or 4 bytes per element) is caught
SPECS = [(torch.float64, 7), (torch.int32, 13), (torch.bfloat16, 5), (torch.uint8, 3)]
BIG = [(torch.float32, 1 << 16)]  # large enough for the wire measurement to dwarf headers


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _ring_exchange(rank: int, world_size: int, mode: str, specs: list) -> dict:
    """Send tensors to the next rank and receive the previous rank's; in the batched mode, also
    send to the previous rank and receive from the next (a pipeline's activations and grads)."""
    nxt, prv = (rank + 1) % world_size, (rank - 1) % world_size
    out = [torch.full((n,), rank + 1, dtype=dt) for dt, n in specs]
    inn = [torch.zeros(n, dtype=dt) for dt, n in specs]
    back = [torch.full((n + 1,), -rank - 1, dtype=dt) for dt, n in specs]  # batched mode only
    back_in = [torch.zeros(n + 1, dtype=dt) for dt, n in specs]
    dist.barrier()
    with CommCounter() as cc:
        if mode == "send_recv":  # even ranks send first: blocking calls must not all wait
            for t, r in zip(out, inn):
                if rank % 2 == 0:
                    dist.send(t, nxt)
                    dist.recv(r, prv)
                else:
                    dist.recv(r, prv)
                    dist.send(t, nxt)
        elif mode == "isend_irecv":
            works = [dist.isend(t, nxt) for t in out] + [dist.irecv(r, prv) for r in inn]
            for w in works:
                w.wait()
        else:
            ops = [dist.P2POp(dist.isend, t, nxt) for t in out]
            ops += [dist.P2POp(dist.irecv, r, prv) for r in inn]
            ops += [dist.P2POp(dist.isend, t, prv) for t in back]
            ops += [dist.P2POp(dist.irecv, r, nxt) for r in back_in]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
    batched = mode == "batch_isend_irecv"
    arrived = all(bool((r == prv + 1).all()) for r in inn)
    if batched:
        arrived &= all(bool((r == -nxt - 1).all()) for r in back_in)
    return {
        "calls": dict(cc.calls),
        "sent": dict(cc.bytes_sent),
        "received": dict(cc.bytes_received),
        "sent_to": dict(cc.bytes_sent_to),
        "received_from": dict(cc.bytes_received_from),
        "want_sent": _nbytes(out) + (_nbytes(back) if batched else 0),
        "want_received": _nbytes(inn) + (_nbytes(back_in) if batched else 0),
        "want_to_next": _nbytes(out),
        "want_to_prev": _nbytes(back) if batched else 0,
        "messages": len(out) + (len(back) if batched else 0),
        "arrived": arrived,
        "wire": cc.wire_bytes,
        "total_sent": cc.total_bytes_sent,
        "table": cc.table(),
    }


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("mode", MODES)
def test_counted_p2p_bytes_equal_the_bytes_passed(mode: str, world_size: int) -> None:
    """Catches a point-to-point call the counter misses (isend, a batched op), a receive booked as
    sent (or not at all), bytes as numel or at the wrong element size, or the peer taken from the
    wrong argument: every count equals what the test itself passed, per op, per peer and per
    neighbour pair."""
    results = launch(_ring_exchange, world_size, mode, SPECS, timeout=60)
    for rank, r in enumerate(results):
        nxt, prv = (rank + 1) % world_size, (rank - 1) % world_size
        assert r["arrived"], rank
        assert r["calls"] == {"send": r["messages"], "recv": r["messages"]}
        assert r["sent"] == {"send": r["want_sent"], "recv": 0}
        assert r["received"] == {"send": 0, "recv": r["want_received"]}
        want_to = Counter({nxt: r["want_to_next"]})  # with two ranks, next == previous
        want_to[prv] += r["want_to_prev"]
        assert r["sent_to"] == {k: v for k, v in want_to.items() if v}
        assert "send to" in r["table"] and "recv from" in r["table"] and "recv B" in r["table"]
    for rank, r in enumerate(results):  # what rank r sent to r+1 is what r+1 got from r
        nxt = (rank + 1) % world_size
        assert r["sent_to"][nxt] == results[nxt]["received_from"][rank] > 0
        if mode != "batch_isend_irecv":  # one direction only: the totals match too
            assert r["sent"]["send"] == results[nxt]["received"]["recv"]


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("mode", MODES)
def test_p2p_bytes_counted_are_on_the_wire(mode: str, world_size: int) -> None:
    """Catches booking more than really leaves the process (a payload counted twice, receives
    booked as sends): gloo's TCP writes, measured, are at least the bytes counted, and at most a
    few headers more."""
    for r in launch(_ring_exchange, world_size, mode, BIG, timeout=60):
        assert r["wire"] is not None
        assert r["total_sent"] == r["want_sent"]
        assert r["total_sent"] <= r["wire"] <= 1.01 * r["total_sent"], r


def _from_any(rank: int, world_size: int) -> dict:
    t = torch.arange(6, dtype=torch.int16) if rank == 1 else torch.zeros(6, dtype=torch.int16)
    with CommCounter() as cc:
        if rank == 1:
            dist.send(t, 0)
        else:
            dist.recv(t)  # any source
    return {"received_from": dict(cc.bytes_received_from), "table": cc.table()}


def test_recv_from_any_source_is_counted() -> None:
    """Catches c10d's recv_any_source_ operator going uncounted, or its missing peer crashing the
    table."""
    got = launch(_from_any, 2, timeout=60)
    assert got[0]["received_from"] == {None: 12}
    assert "recv from any" in got[0]["table"]


def _collectives_only(rank: int, world_size: int) -> str:
    with CommCounter() as cc:
        dist.all_reduce(torch.ones(1024))
    return cc.table()


def test_table_of_collectives_keeps_its_four_columns() -> None:
    """Catches a table change that would break lab 0's stored outputs (nbval compares them)."""
    table = launch(_collectives_only, 4, timeout=60)[0]
    assert table == (
        "op                calls     payload B        sent B\n"
        "all_reduce            1         4,096         6,144"
    )
