"""Ring attention: causal attention over a sequence split across the ranks of a group
(Liu et al. 2023, "Ring Attention with Blockwise Transformers", section 3; Brandon et al. 2023,
"Striped Attention", for the load-balanced layouts). Lab 8, tasks lab08.2 and lab08.3.

Each rank keeps its query block and the running ``(out, lse)`` of its rows. The key/value
blocks travel round the ring: at step i rank r holds the K/V of rank ``r - i (mod cp)``,
attends to them (:func:`block_attention`), folds the result in (:func:`merge_partials`) and
passes them on to rank ``r + 1`` while the next block arrives from ``r - 1``. After ``cp``
steps every query has seen every key, and no rank ever held more than two K/V blocks.

Causality is decided block by block. Each rank's shard is made of equal pieces whose place in
the sequence :func:`chunk_ids` gives (contiguous: one piece, chunk r of cp; zig-zag: half-chunks
r and 2cp - 1 - r of 2cp). A query piece after a key piece sees all of it; the same piece, the
lower triangle; a key piece after it, nothing -- that block is skipped, not computed and masked.

Backward (lab08.3) runs the ring again. Each rank recomputes its blocks from the FINAL
``lse`` (:func:`block_attention_backward`), adds its share of dq locally, and adds its share of
the visiting block's dk/dv to a buffer that travels one hop behind the K/V and reaches the
block's owner after ``cp - 1`` hops: twice the forward's bytes
(:func:`~minitorch_dist.context_parallel.cost.ring_attention_bytes`).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.hooks import RemovableHandle

from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.context_parallel.blocks import (
    block_attention,
    block_attention_backward,
    merge_partials,
)
from minitorch_dist.context_parallel.layout import check_layout, chunk_ids

__all__ = [
    "RingAttention",
    "RingComm",
    "block_plan",
    "pieces_of",
    "register_plan_hook",
    "ring_attention",
    "ring_attention_backward",
    "ring_attention_forward",
]

Merge = Callable[..., tuple[torch.Tensor, torch.Tensor]]
_size, _rank = group_size, group_rank  # the names earlier solutions (and the mutants) call


def _pieces(rank: int, cp: int, layout: str) -> list[int]:
    """The place of each equal piece of rank ``rank``'s shard, in a sequence cut into 2cp
    (zig-zag) or cp (contiguous) pieces."""
    return [rank] if layout == "contiguous" else chunk_ids(rank, cp, layout=layout)


PlanHook = Callable[[list[tuple[int, int, str]], int], None]
_plan_hooks: OrderedDict[int, PlanHook] = OrderedDict()  # RemovableHandle needs a weakref


def register_plan_hook(hook: PlanHook) -> RemovableHandle:
    """Call ``hook(plan, pieces)`` with every plan :func:`block_plan` returns (one per ring step;
    ``pieces``: the pieces of a rank's shard, 1 or 2). Returns a handle: ``handle.remove()``
    detaches the hook. How a measurement watches the ring from outside, e.g.
    :class:`~minitorch_dist.context_parallel.work.WorkCounter`."""
    handle = RemovableHandle(_plan_hooks)
    _plan_hooks[handle.id] = hook
    return handle


def block_plan(q_rank: int, kv_rank: int, cp: int, layout: str) -> list[tuple[int, int, str]]:
    """Which (query piece, key piece) blocks rank ``q_rank`` computes against the K/V of rank
    ``kv_rank``, and how: ``(i, j, "full" | "diagonal")``; a block whose keys all come after its
    queries is left out. The hooks of :func:`register_plan_hook` see each plan."""
    pieces = _pieces(q_rank, cp, layout)
    plan = []
    for i, qc in enumerate(pieces):
        for j, kc in enumerate(_pieces(kv_rank, cp, layout)):
            if qc > kc:
                plan.append((i, j, "full"))
            elif qc == kc:
                plan.append((i, j, "diagonal"))
    for hook in tuple(_plan_hooks.values()):
        hook(plan, len(pieces))
    return plan


class RingComm:
    """Send tensors to the next rank of the ring and receive the same shapes from the previous
    one, with batched point-to-point ops (``dist.batch_isend_irecv``); ``counter`` (a
    :class:`~minitorch_dist.comm.CommCounter`) is entered around each exchange."""

    def __init__(self, group: Group = None, counter: Any = None, tag: int = 0) -> None:
        self.group, self.counter, self.tag = group, counter, tag
        self.cp, self.rank = group_size(group), group_rank(group)
        self._global = lambda r: dist.get_global_rank(group, r) if group is not None else r
        self._pending: list[Any] = []

    def send_recv(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Post the exchange and return the buffers that will hold what arrives: read them only
        after :meth:`wait`."""
        nxt, prev = self._global((self.rank + 1) % self.cp), self._global((self.rank - 1) % self.cp)
        tensors = [t.contiguous() for t in tensors]  # p2p needs dense memory
        received = [torch.empty_like(t) for t in tensors]
        ops = [dist.P2POp(dist.isend, t, nxt, self.group, self.tag) for t in tensors]
        ops += [dist.P2POp(dist.irecv, r, prev, self.group, self.tag) for r in received]
        with self.counter if self.counter is not None else contextlib.nullcontext():
            self._pending = dist.batch_isend_irecv(ops)
        return received

    def wait(self) -> None:
        with self.counter if self.counter is not None else contextlib.nullcontext():
            for request in self._pending:
                request.wait()
        self._pending = []


def pieces_of(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, ...]:
    """The equal pieces of a shard (b, h, s/cp, ...) along dim 2, views: the whole shard
    (contiguous) or its two half-chunks (zig-zag)."""
    return (x,) if layout == "contiguous" else x.chunk(2, dim=2)


def ring_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    group: Group = None,
    layout: str = "zigzag",
    merge: Merge | None = None,
    counter: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's ``(out, lse)`` of causal attention: out (b, H, s/cp, d), lse (b, H, s/cp).
    ``merge`` folds two partial results together (default :func:`merge_partials`); ``counter``
    goes to :class:`RingComm`. Split q, k and v into their pieces with ``pieces_of(x, layout)``;
    ask :func:`block_plan` which blocks to compute at each step; :func:`block_attention`
    computes one."""
    merge = merge_partials if merge is None else merge
    cp = group_size(group)
    check_layout(q.shape[2] * cp, cp, layout)
    # BEGIN SOLUTION lab08.2: pass K/V round the ring, attend block by block, merge
    comm, rank = RingComm(group, counter), group_rank(group)
    qs = pieces_of(q, layout)  # my query pieces
    out = [None] * len(qs)  # running (out, lse) per query piece
    for step in range(cp):
        if step < cp - 1:  # post the next block's transfer before computing on this one
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = pieces_of(k, layout), pieces_of(v, layout)
        for i, j, kind in block_plan(rank, (rank - step) % cp, cp, layout):
            part = block_attention(qs[i], ks[j], vs[j], causal=kind == "diagonal")
            out[i] = part if out[i] is None else merge(*out[i], *part)
        if step < cp - 1:
            comm.wait()
            k, v = k_next, v_next
    # every piece saw at least its own diagonal block, so no entry is None
    return torch.cat([o for o, _ in out], dim=2), torch.cat([lse for _, lse in out], dim=2)
    # END SOLUTION


def ring_attention_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    *,
    group: Group = None,
    layout: str = "zigzag",
    counter: Any = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv)`` of this rank's shards, given the forward's inputs, its output and its
    final ``lse``: K/V travel the ring again, their gradients one hop behind them."""
    cp = group_size(group)
    check_layout(q.shape[2] * cp, cp, layout)
    # BEGIN SOLUTION lab08.3: K/V round the ring again; dK/dV follow and return to the owner
    comm, rank = RingComm(group, counter), group_rank(group)
    grads = RingComm(group, counter, tag=1)  # its own tag: never matched with a K/V message
    delta = (dout * out).sum(-1)  # (b, H, s/cp): rowsum(dO * O)
    qs, dos = pieces_of(q, layout), pieces_of(dout, layout)
    lses, deltas = pieces_of(lse, layout), pieces_of(delta, layout)  # (b, H, s/cp) split on dim 2
    dq = [torch.zeros_like(x) for x in qs]
    dk_own = dv_own = travelling = None
    for step in range(cp):
        if step < cp - 1:
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = pieces_of(k, layout), pieces_of(v, layout)
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dks, dvs = pieces_of(dk, layout), pieces_of(dv, layout)  # views: += writes into dk, dv
        for i, j, kind in block_plan(rank, (rank - step) % cp, cp, layout):
            g = block_attention_backward(
                dos[i], qs[i], ks[j], vs[j], lses[i], deltas[i], causal=kind == "diagonal"
            )
            dq[i] += g[0]
            dks[j].add_(g[1])
            dvs[j].add_(g[2])
        if step == 0:
            dk_own, dv_own = dk, dv  # my own block's share stays here
        else:
            if travelling is not None:  # the buffer for this block, from the previous rank
                grads.wait()
                dk, dv = dk + travelling[0], dv + travelling[1]
            travelling = grads.send_recv([dk, dv])  # on towards the block's owner
        if step < cp - 1:
            comm.wait()
            k, v = k_next, v_next
    if travelling is not None:
        grads.wait()  # the last buffer to arrive is my own block's, from every other rank
        dk_own, dv_own = dk_own + travelling[0], dv_own + travelling[1]
    return torch.cat(dq, dim=2), dk_own, dv_own
    # END SOLUTION


class RingAttention(torch.autograd.Function):
    """Causal ring attention as an autograd Function: forward :func:`ring_attention_forward`,
    backward :func:`ring_attention_backward`. Saves q, k, v, out and lse -- this rank's shards
    only, never the other ranks' K/V."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        group: Group,
        layout: str,
        counter: Any,
    ) -> torch.Tensor:
        out, lse = ring_attention_forward(q, k, v, group=group, layout=layout, counter=counter)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.group, ctx.layout, ctx.counter = group, layout, counter
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_attention_backward(
            dout.contiguous(),
            q,
            k,
            v,
            out,
            lse,
            group=ctx.group,
            layout=ctx.layout,
            counter=ctx.counter,
        )
        return dq, dk, dv, None, None, None


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    group: Group = None,
    layout: str = "zigzag",
    counter: Any = None,
) -> torch.Tensor:
    """Causal attention of this rank's shard: q (b, H, s/cp, d), k and v (b, KV, s/cp, d), laid
    out by :func:`~minitorch_dist.context_parallel.shard_sequence` with ``layout``. Returns
    (b, H, s/cp, d), equal to the same shard of full causal ``scaled_dot_product_attention``;
    differentiable. ``counter``: a CommCounter entered around the ring's messages. The blocks
    computed are counted from outside: :class:`~minitorch_dist.context_parallel.work.WorkCounter`."""
    return RingAttention.apply(q, k, v, group, layout, counter)
