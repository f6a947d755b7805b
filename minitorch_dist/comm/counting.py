"""Count the calls and bytes of every collective and point-to-point message a block of code runs.

    with CommCounter() as cc:
        dist.all_reduce(grad)
        dist.send(activation, dst=1)
    cc.calls["all_reduce"], cc.bytes_sent["all_reduce"], cc.bytes_sent["send"]
    print(cc.table())

Every torch.distributed call, whether from our code, DDP or FSDP, reaches the backend through a
dispatcher operator in the ``c10d`` namespace (``c10d::allreduce_``, ``c10d::send``, ...), so a
``TorchDispatchMode`` sees them all, on gloo and on NCCL alike. For each call we record the
payload ``S`` (the full, unsharded tensor) and the group size ``n``, and book the bytes this rank
sends and receives: exactly, for point-to-point messages; under the ring algorithm
(``cost.collective_bytes``, the same amount in as out) for the collectives, since how a backend
really moves the bytes is not visible from Python.

Point-to-point traffic, which pipeline parallelism lives on, is booked beside the collectives:
``send`` (its payload sent, to ``peer``) and ``recv`` (its payload received, from ``peer``; any
source: ``peer`` None). ``dist.send``/``recv``, ``isend``/``irecv`` and ``batch_isend_irecv``
all reach the same two operators (``c10d::send`` and ``c10d::recv_``, or
``c10d::recv_any_source_``; checked on gloo, torch 2.13), one call per tensor, so a batch of
four P2POps counts as two sends and two receives. ``peer`` is the rank in the call's group.

On Linux, ``wire_bytes`` also reports what this process actually wrote to its sockets and files
(``wchar`` in ``/proc/self/io``) during the block: on gloo, whose transport is TCP, that is a
genuine measurement of the traffic (plus a few headers and anything printed). Wait for an
``isend``'s work inside the block, or its bytes may leave after the block ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

# Entering any TorchDispatchMode imports torch._dynamo (~2 s). Import it here, once, so that
# emulated ranks forked after this module loads inherit it instead of each paying again.
import torch._dynamo  # noqa: F401 (see the comment above)
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from .cost import collective_bytes

__all__ = ["Call", "CommCounter"]

# c10d operator -> (our op name, position of the argument holding the full-size payload S:
# the input of all-reduce and reduce-scatter, the output of all-gather; None: no payload)
_OPS = {
    "allreduce_": ("all_reduce", 0),
    "allreduce_coalesced_": ("all_reduce", 0),
    "_allgather_base_": ("all_gather", 0),
    "allgather_": ("all_gather", 0),
    "allgather_into_tensor_coalesced_": ("all_gather", 0),
    "_reduce_scatter_base_": ("reduce_scatter", 1),
    "reduce_scatter_": ("reduce_scatter", 1),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "alltoall_base_": ("all_to_all", 1),
    "alltoall_": ("all_to_all", 1),
    "broadcast_": ("broadcast", 0),
    "reduce_": ("reduce", 0),
    "scatter_": ("scatter", 0),
    "gather_": ("gather", 1),
    "send": ("send", 0),  # point-to-point: isend and batch_isend_irecv's sends reach it too
    "recv_": ("recv", 0),
    "recv_any_source_": ("recv", 0),
    "barrier": ("barrier", None),
}
_P2P = ("send", "recv")  # our names of the point-to-point ops


@dataclass(frozen=True)
class Call:
    op: str  # our name: "all_reduce", "send", ...
    payload_bytes: int  # S: the full tensor (all-gather: the output; others: the input)
    bytes_sent: int | float  # by this rank: exact for send, the ring formula for collectives
    world_size: int  # size of the group the call ran on
    bytes_received: int | float = 0  # by this rank: exact for recv; ring collectives: = sent
    peer: int | None = None  # send/recv: the other rank, in the group (None: any source)


def _nbytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(y) for y in x)
    return 0


def _group_size(args: tuple) -> int:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a).size()
            except Exception:  # not a process group (a ReduceOp, a Work)
                continue
    return dist.get_world_size()


def _wchar() -> int | None:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class CommCounter(TorchDispatchMode):
    """Context manager counting collective calls and bytes sent by this rank, per op."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Call] = []
        self.wire_bytes: int | None = None
        self._wchar0: int | None = None

    def __enter__(self) -> CommCounter:
        self._wchar0 = _wchar()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        end = _wchar()
        if self._wchar0 is not None and end is not None:
            self.wire_bytes = end - self._wchar0
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        if func.namespace == "c10d" and func._opname in _OPS:
            self.log.append(self._book(func._opname, args))
        return out

    def _book(self, name: str, args: tuple) -> Call:
        op, where = _OPS[name]
        n = _group_size(args)
        if where is None:
            return Call(op, 0, 0, n)
        payload = _nbytes(args[where])
        if op in _P2P:  # (tensors, group, peer, tag); recv_any_source_ has no peer
            peer = args[2] if name != "recv_any_source_" else None
            sent, received = (payload, 0) if op == "send" else (0, payload)
            return Call(op, payload, sent, n, received, peer)
        if op in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
            ring = collective_bytes(op, payload, n)  # a ring rank receives what it sends
            return Call(op, payload, ring, n, ring)
        # a rooted collective, whose traffic depends on the rank's place: not booked
        return Call(op, payload, 0, n)

    @property
    def calls(self) -> Counter:
        """Number of calls per op."""
        return Counter(c.op for c in self.log)

    def _per(self, field: str, key: str = "op", ops: tuple[str, ...] | None = None) -> Counter:
        total: Counter = Counter()
        for c in self.log:
            if ops is None or c.op in ops:
                total[getattr(c, key)] += getattr(c, field)
        return total

    @property
    def bytes_sent(self) -> Counter:
        """Bytes this rank sent per op (exact for send; ring formula for collectives)."""
        return self._per("bytes_sent")

    @property
    def bytes_received(self) -> Counter:
        """Bytes this rank received per op (exact for recv; ring formula for collectives)."""
        return self._per("bytes_received")

    @property
    def payload_bytes(self) -> Counter:
        """Sum of full tensor sizes per op."""
        return self._per("payload_bytes")

    @property
    def bytes_sent_to(self) -> Counter:
        """Point-to-point bytes this rank sent, per destination rank (in the call's group)."""
        return self._per("bytes_sent", key="peer", ops=("send",))

    @property
    def bytes_received_from(self) -> Counter:
        """Point-to-point bytes this rank received, per source rank (None: any source)."""
        return self._per("bytes_received", key="peer", ops=("recv",))

    @property
    def total_bytes_sent(self) -> int | float:
        return sum(c.bytes_sent for c in self.log)

    @property
    def total_bytes_received(self) -> int | float:
        return sum(c.bytes_received for c in self.log)

    def table(self) -> str:
        """A printable summary: one row per collective, one per (send or recv, peer) pair.

        The ``recv B`` column appears once the block sent or received point-to-point: a table of
        collectives alone keeps its four columns (lab 0's stored outputs print it).
        """
        p2p = any(c.op in _P2P for c in self.log)
        head = f"{'op':<16}{'calls':>7}{'payload B':>14}{'sent B':>14}"
        rows = [head + (f"{'recv B':>14}" if p2p else "")]
        groups: dict[tuple[str, int], list[Call]] = {}  # (op, peer; -1: any or none)
        for c in self.log:
            groups.setdefault((c.op, -1 if c.peer is None else c.peer), []).append(c)
        for (op, peer), calls in sorted(groups.items()):
            label = op
            if op in _P2P:
                label += f" {'to' if op == 'send' else 'from'} {'any' if peer < 0 else peer}"
            payload = sum(c.payload_bytes for c in calls)
            row = f"{label:<16}{len(calls):>7}{payload:>14,}"
            row += f"{sum(c.bytes_sent for c in calls):>14,.0f}"
            if p2p:
                row += f"{sum(c.bytes_received for c in calls):>14,.0f}"
            rows.append(row)
        return "\n".join(rows)
