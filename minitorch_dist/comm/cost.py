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

from minitorch_dist.checks import check_choice, check_int, check_positive

__all__ = [
    "ALGORITHMS",
    "BUS_FACTORS",
    "RING_OPS",
    "algorithm_bandwidth",
    "bus_bandwidth",
    "collective_bytes",
    "collective_time",
    "multi_node_ring_bandwidth",
]

# op -> number of (n - 1)/n * S passes around the ring
RING_OPS = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1, "all_to_all": 1}


def collective_bytes(op: str, nbytes: int, world_size: int) -> int | float:
    """Bytes each rank sends for ``op`` on a tensor of ``nbytes`` (full size) over ``world_size``.

    Exact (an ``int``) when ``nbytes`` divides into ``world_size`` chunks; otherwise the average
    over ranks (a ``float``), since uneven chunks make ranks send slightly different amounts.
    ``all_to_all`` sends every chunk but one's own: also ``(n - 1) / n * S``.
    """
    check_choice("op", op, RING_OPS)
    check_int("world_size", world_size)
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    sent = Fraction(RING_OPS[op] * (world_size - 1) * nbytes, world_size)
    return int(sent) if sent.denominator == 1 else float(sent)


# -- time: the alpha-beta model, and the bandwidths nccl-tests reports --------------------------
# op -> factor turning algorithm bandwidth S / t into bus bandwidth, as a function of n
# (nccl-tests, doc/PERFORMANCE.md): the fraction of S that crosses each rank's busiest link.
BUS_FACTORS = {
    "all_reduce": lambda n: Fraction(2 * (n - 1), n),
    "reduce_scatter": lambda n: Fraction(n - 1, n),
    "all_gather": lambda n: Fraction(n - 1, n),
    "all_to_all": lambda n: Fraction(n - 1, n),
    "broadcast": lambda n: Fraction(1),
    "reduce": lambda n: Fraction(1),
}
ALGORITHMS = ("ring", "recursive_doubling")


def _check_time_args(nbytes: float, world_size: int, seconds: float | None = None) -> None:
    check_int("world_size", world_size)
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    if seconds is not None and not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")


def collective_time(
    op: str,
    nbytes: float,
    world_size: int,
    *,
    alpha: float,
    bandwidth: float,
    algorithm: str = "ring",
) -> float:
    """Seconds for ``op`` on ``nbytes`` (full size) over ``world_size`` ranks, alpha-beta model.

    Each message costs ``alpha + m / bandwidth`` seconds for ``m`` bytes (``alpha`` the latency,
    ``beta = 1 / bandwidth`` the time per byte; Thakur et al. 2005, "Cost model"). The ring sends
    ``k (n - 1)`` messages of ``S / n`` bytes one after another (``k = 2`` for all-reduce, 1 for
    its halves): ``k (n - 1) alpha + k (n - 1) / n * S * beta`` (Patarasuk and Yuan 2009, §3).
    Recursive doubling (all-reduce only) exchanges the whole vector with partners at distance
    1, 2, 4, ...: ``ceil(log2 n) (alpha + S beta)`` (Thakur et al. 2005, "Allreduce"). The time of
    the reduction arithmetic (their gamma term) is left out.
    """
    check_choice("op", op, RING_OPS)
    check_choice("algorithm", algorithm, ALGORITHMS)
    _check_time_args(nbytes, world_size)
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    n = world_size
    if algorithm == "recursive_doubling":
        if op != "all_reduce":
            raise ValueError(f"recursive_doubling is modelled for all_reduce only, got {op!r}")
        rounds = (n - 1).bit_length()  # ceil(log2 n)
        return rounds * (alpha + nbytes / bandwidth)
    messages = RING_OPS[op] * (n - 1)
    return messages * alpha + messages / n * nbytes / bandwidth  # k (n-1) messages of S/n


def algorithm_bandwidth(nbytes: float, seconds: float) -> float:
    """``algbw = S / t`` in bytes/s: how fast the collective looks to its caller (nccl-tests)."""
    _check_time_args(nbytes, 1, seconds)
    return nbytes / seconds


def bus_bandwidth(op: str, nbytes: float, seconds: float, world_size: int) -> float:
    """``busbw = algbw * factor(n)`` in bytes/s, nccl-tests' definition (doc/PERFORMANCE.md).

    The factor is what each rank's link must carry per byte of ``S``: ``2 (n - 1) / n`` for
    all-reduce, ``(n - 1) / n`` for reduce-scatter, all-gather and all-to-all, 1 for broadcast
    and reduce. Bus bandwidth does not depend on ``n`` for an ideal ring, so it can be compared
    with the link's peak bandwidth directly.
    """
    check_choice("op", op, BUS_FACTORS)
    _check_time_args(nbytes, world_size, seconds)
    return algorithm_bandwidth(nbytes, seconds) * float(BUS_FACTORS[op](world_size))


def multi_node_ring_bandwidth(
    *, intra_bandwidth: float, nic_bandwidth: float, nics_per_node: int, nodes: int
) -> float:
    """Bus bandwidth, bytes/s each way, of ring collectives over ``nodes`` nodes whose GPUs are
    joined by ``intra_bandwidth`` links (NVLink, per GPU) and whose node has ``nics_per_node``
    network ports of ``nic_bandwidth`` each.

    NCCL runs several rings at once (channels), one per network rail: each ring carries a share
    of the data and leaves the node through its own port, so a step of all the rings moves the
    node's whole ring traffic through all its ports together. The slowest of the two is the
    bound: ``min(intra, nics_per_node * nic)`` (one node: ``intra``). With one port per node
    the network is the bound, the model of a ring that crosses nodes through a single link.
    """
    check_positive("intra_bandwidth", intra_bandwidth)
    check_positive("nic_bandwidth", nic_bandwidth)
    check_int("nics_per_node", nics_per_node)
    check_int("nodes", nodes)
    if nodes == 1:
        return intra_bandwidth
    return min(intra_bandwidth, nics_per_node * nic_bandwidth)
