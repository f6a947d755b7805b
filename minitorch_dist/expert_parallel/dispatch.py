"""Dispatch and combine: the two all-to-alls of expert parallelism, as autograd Functions
(lab 10, task lab10.3).

Rank r holds its tokens' choices sorted by destination rank; row counts differ per pair of ranks
and per step, so the counts go first (:func:`exchange_counts`, a small all-to-all of integers)
and only then the rows, with ``dist.all_to_all_single`` and per-rank split sizes (Lepikhin et
al. 2021, section 3.2; Megatron-LM's ``MoEAlltoAllTokenDispatcher``):

    dispatch(x_sorted, send_splits, recv_splits, group)   # forward: rows to their experts' ranks
    combine(y_received, send_splits, recv_splits, group)  # forward: the rows back home

``send_splits[j]`` rows go to rank j, ``recv_splits[j]`` come from rank j; combine takes the
splits of the dispatch it undoes. The gradient of an all-to-all is the all-to-all with the
splits swapped: dispatch's backward is a combine of the gradients, and the reverse.

Every rank must agree with its peers on every split, or ``all_to_all_single`` waits for bytes
that never come (or reads a wrong-sized buffer). ``check=True`` exchanges the expectations first
and raises a ValueError that names both ranks and both numbers, on every rank at once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.hooks import RemovableHandle

from minitorch_dist.comm.groups import Group, group_rank, group_size

__all__ = [
    "AllToAll",
    "check_splits",
    "combine",
    "dispatch",
    "exchange_counts",
    "register_dispatch_hook",
]

DispatchHook = Callable[[list[int], list[int], Any], None]
_dispatch_hooks: OrderedDict[int, DispatchHook] = OrderedDict()  # RemovableHandle: a weakref


def register_dispatch_hook(hook: DispatchHook) -> RemovableHandle:
    """Call ``hook(send_splits, recv_splits, group)`` at every :func:`dispatch` (not
    :func:`combine`); ``handle.remove()`` detaches it. How a measurement watches the split sizes
    from outside the layer (:func:`~minitorch_dist.expert_parallel.measure.observe_dispatch`)."""
    handle = RemovableHandle(_dispatch_hooks)
    _dispatch_hooks[handle.id] = hook
    return handle


def exchange_counts(send_counts: torch.Tensor, group: Group = None) -> torch.Tensor:
    """Counts (int64) of length n * m: chunk j (m numbers, e.g. one per expert of rank j) goes to
    rank j. Returns the n * m numbers received: chunk j came from rank j."""
    n = group_size(group)
    if send_counts.numel() % n:
        raise ValueError(f"{send_counts.numel()} counts do not split into {n} equal chunks")
    # BEGIN SOLUTION lab10.3: one equal-split all-to-all of the counts
    received = torch.empty_like(send_counts)
    dist.all_to_all_single(received, send_counts.contiguous(), group=group)
    return received
    # END SOLUTION


def check_splits(
    send_splits: Sequence[int], recv_splits: Sequence[int], group: Group = None
) -> None:
    """Raise a ValueError on every rank if any pair of ranks disagrees on a split: this rank's
    ``send_splits[j]`` must be rank j's ``recv_splits[me]``, and the reverse."""
    n, me = group_size(group), group_rank(group)
    if len(send_splits) != n or len(recv_splits) != n:
        raise ValueError(
            f"need {n} send and {n} receive splits, got {len(send_splits)} and {len(recv_splits)}"
        )
    mine = torch.tensor(list(zip(send_splits, recv_splits)), dtype=torch.int64)  # (n, 2)
    theirs = torch.empty_like(mine)
    dist.all_to_all_single(theirs, mine, group=group)  # row j: rank j's (send, recv)
    bad = []
    for j in range(n):
        if send_splits[j] != theirs[j, 1]:
            bad.append(
                f"rank {me} sends {send_splits[j]} rows to rank {j}, which expects "
                f"{int(theirs[j, 1])}"
            )
        if recv_splits[j] != theirs[j, 0]:
            bad.append(
                f"rank {me} expects {recv_splits[j]} rows from rank {j}, which sends "
                f"{int(theirs[j, 0])}"
            )
    flags = torch.tensor([len(bad)], dtype=torch.int64)
    dist.all_reduce(flags, group=group)
    if flags.item():
        raise ValueError(
            "ranks disagree on the all-to-all's split sizes: "
            + ("; ".join(bad) or "another rank found a mismatch")
        )


class AllToAll(torch.autograd.Function):
    """Rows ``x`` (sum(send_splits), ...) -> (sum(recv_splits), ...): ``send_splits[j]`` rows to
    rank j, in rank order; backward sends the gradients back with the splits swapped."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, send_splits: list[int], recv_splits: list[int], group: Group
    ) -> torch.Tensor:
        ctx.splits, ctx.group = (list(send_splits), list(recv_splits)), group
        # BEGIN SOLUTION lab10.3: receive sum(recv_splits) rows, recv_splits[j] from rank j
        out = x.new_empty((sum(recv_splits), *x.shape[1:]))
        dist.all_to_all_single(
            out, x.contiguous(), list(recv_splits), list(send_splits), group=group
        )
        return out
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        send_splits, recv_splits = ctx.splits
        # BEGIN SOLUTION lab10.3: the same all-to-all, splits swapped
        out = grad.new_empty((sum(send_splits), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), send_splits, recv_splits, group=ctx.group)
        return out, None, None, None
        # END SOLUTION


def dispatch(
    x_sorted: torch.Tensor,
    send_splits: Sequence[int],
    recv_splits: Sequence[int],
    group: Group = None,
    *,
    check: bool = False,
) -> torch.Tensor:
    """Send ``send_splits[j]`` rows of ``x_sorted`` (sorted by destination rank) to rank j;
    returns the rows received, ``recv_splits[j]`` from rank j, in rank order. ``check``: verify
    the splits with the peers first (:func:`check_splits`)."""
    if check:
        check_splits(send_splits, recv_splits, group)
    for hook in tuple(_dispatch_hooks.values()):
        hook(list(send_splits), list(recv_splits), group)
    return AllToAll.apply(x_sorted, list(send_splits), list(recv_splits), group)


def combine(
    y_received: torch.Tensor,
    send_splits: Sequence[int],
    recv_splits: Sequence[int],
    group: Group = None,
    *,
    check: bool = False,
) -> torch.Tensor:
    """Undo :func:`dispatch` (pass its splits): the rows of ``y_received`` go back to the ranks
    they came from, arriving in the order they were sent."""
    if check:
        check_splits(recv_splits, send_splits, group)
    return AllToAll.apply(y_received, list(recv_splits), list(send_splits), group)
