"""The attention blocks ring attention computes, counted from outside the ring (lab 8).

    work = WorkCounter()
    with work.attached():              # a hook on block_plan (ring.register_plan_hook)
        ring_attention(q, k, v, layout=layout)
    work.units                         # half-chunk x half-chunk blocks, a diagonal one 1/2

Under a causal mask the contiguous layout gives rank r ``4r + 2`` units and the zig-zag ``2cp``
on every rank (Brandon et al. 2023); :func:`~minitorch_dist.context_parallel.cost.causal_work` is
the closed form this count is checked against. The counter books every plan the ring asks
:func:`~minitorch_dist.context_parallel.ring.block_plan` for while attached: attach it around a
forward (the backward recomputes the same blocks and would count them again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from minitorch_dist.context_parallel.ring import register_plan_hook

__all__ = ["WorkCounter"]


@dataclass
class WorkCounter:
    """The attention blocks a rank computed: ``full`` (every query sees every key) and
    ``diagonal`` (causal, half masked), each of ``block_tokens`` x ``block_tokens``;
    :attr:`units` counts them in half-chunk x half-chunk blocks, a diagonal one as 1/2."""

    full: int = 0
    diagonal: int = 0
    skipped: int = 0
    units_twice: int = 0  # twice the units: stays an integer
    per_step: list[int] = field(default_factory=list)  # units_twice added at each ring step

    @property
    def units(self) -> float:
        return self.units_twice / 2

    def book(self, plan: list[tuple[int, int, str]], pieces: int) -> None:
        """Add one step's plan (``block_plan``'s answer; ``pieces`` per shard, 1 or 2)."""
        per_block = (2 // pieces) ** 2 * 2  # twice the half-chunk units of a full piece x piece
        added = 0
        for *_, kind in plan:
            added += per_block if kind == "full" else per_block // 2
            setattr(self, kind, getattr(self, kind) + 1)
        self.skipped += pieces * pieces - len(plan)
        self.units_twice += added
        self.per_step.append(added)

    @contextlib.contextmanager
    def attached(self) -> Iterator[WorkCounter]:
        """Book every plan the ring makes inside the ``with`` block; detached on exit."""
        handle = register_plan_hook(self.book)
        try:
            yield self
        finally:
            handle.remove()
