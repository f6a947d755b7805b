"""Which tokens a context-parallel rank holds, as numbers (chapter 8): the layouts' half-chunks.

The torch-free part of :mod:`minitorch_dist.context_parallel.layout` (which cuts tensors and
re-exports these names), so that the closed forms of :mod:`.cost` and the planner import no
torch (:mod:`minitorch_dist.arithmetic`).
"""

from __future__ import annotations

from minitorch_dist.checks import check_choice, check_divisible, check_int

__all__ = ["LAYOUTS", "check_layout", "chunk_ids"]

LAYOUTS = ("contiguous", "zigzag")


def check_layout(seq_len: int, cp: int, layout: str) -> int:
    """Tokens per rank, ``seq_len / cp``; ValueError for an unknown layout, a sequence the
    zig-zag cannot cut into ``2 cp`` half-chunks or the contiguous layout into ``cp`` chunks."""
    check_choice("layout", layout, LAYOUTS)
    check_int("cp", cp)
    if layout == "zigzag":
        check_divisible("seq", seq_len, "2*cp", 2 * cp)
    return check_divisible("seq", seq_len, "cp", cp)


def chunk_ids(rank: int, world_size: int, *, layout: str = "zigzag") -> list[int]:
    """Which of the ``2 cp`` half-chunks rank ``rank`` holds, in the order it holds them:
    contiguous ``[2r, 2r + 1]``, zigzag ``[r, 2cp - 1 - r]``."""
    check_choice("layout", layout, LAYOUTS)
    check_int("world_size", world_size)
    check_int("rank", rank, minimum=0, maximum=world_size - 1)
    if layout == "contiguous":
        return [2 * rank, 2 * rank + 1]
    return [rank, 2 * world_size - 1 - rank]
