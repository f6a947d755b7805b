"""How many bytes each rank sends in a collective, under the ring algorithm.

Take ``n`` ranks in a ring and a tensor of ``S`` bytes cut into ``n`` chunks. In a
reduce-scatter each rank passes a partial sum to its right neighbour ``n - 1`` times, one chunk
(``S / n`` bytes) at a time, and ends owning one fully reduced chunk: ``(n - 1) / n * S`` bytes
sent. An all-gather circulates the finished chunks the same way: ``(n - 1) / n * S`` again. An
all-reduce is a reduce-scatter followed by an all-gather: ``2 (n - 1) / n * S``
(Patarasuk and Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", §3; the same counts define NCCL's "bus bandwidth", nccl-tests PERFORMANCE.md).

``S`` is always the size of the full, unsharded tensor: the input of all-reduce and
reduce-scatter, the output of all-gather.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["RING_OPS", "collective_bytes"]

# op -> number of (n - 1)/n * S passes around the ring
RING_OPS = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1, "all_to_all": 1}


def collective_bytes(op: str, nbytes: int, world_size: int) -> int | float:
    """Bytes each rank sends for ``op`` on a tensor of ``nbytes`` (full size) over ``world_size``.

    Exact (an ``int``) when ``nbytes`` divides into ``world_size`` chunks; otherwise the average
    over ranks (a ``float``), since uneven chunks make ranks send slightly different amounts.
    ``all_to_all`` sends every chunk but one's own: also ``(n - 1) / n * S``.
    """
    if op not in RING_OPS:
        raise ValueError(f"op must be one of {sorted(RING_OPS)}, got {op!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    sent = Fraction(RING_OPS[op] * (world_size - 1) * nbytes, world_size)
    return int(sent) if sent.denominator == 1 else float(sent)
