"""What context parallelism costs: bytes each rank sends, causal work per rank, and whether the
ring's messages hide behind the block compute. Pure formulas: no torch.distributed here.

Symbols: b = batch, H = heads, KV = kv_heads, s = seq (the whole sequence), d = head_dim,
cp = ranks in the context-parallel group, p = bytes per element. One K/V block is what one rank
holds: ``2 b KV (s / cp) d`` elements (keys and values).

Ring attention (Liu et al. 2023, section 3). Forward: every rank passes its K/V block on
``cp - 1`` times, so each sends ``(cp - 1)`` blocks. Backward: the K/V blocks travel the ring
again (``cp - 1`` sends) and so do their gradients, accumulated by each rank they visit and
delivered to their owner after ``cp - 1`` hops: twice the forward's bytes.

All-gather K/V (Megatron-LM's first context parallelism; Dubey et al. 2024, section 3.3.2, for
Llama 3): an all-gather of K and V forward, ``(cp - 1) / cp`` of the whole ``2 b KV s d`` --
the ring's forward bytes -- and a reduce-scatter of their gradients backward, the same again;
but every rank stores all ``s`` keys and values.

Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses", section 3): four all-to-alls per pass (q, k,
v in; the output back), each rank sending ``(cp - 1) / cp`` of its local tensor.

Causal work (in units of one half-chunk x half-chunk block of scores, ``(s / 2cp)^2`` entries;
a diagonal block, half masked, counts one half): the contiguous layout gives rank r the
half-chunks ``2r`` and ``2r + 1``, which see ``4r + 1`` full blocks and 2 diagonal ones,
``4r + 2`` units; max over mean is ``(4cp - 2) / 2cp = 2 - 1/cp`` (1.875 at cp = 8). The
zig-zag gives rank r half-chunks ``r`` and ``2cp - 1 - r``: ``(r + 1/2) + (2cp - 1 - r + 1/2)
= 2cp`` units on every rank.
"""

from __future__ import annotations

from fractions import Fraction

from minitorch_dist.checks import check_bool, check_divisible, check_int, check_positive
from minitorch_dist.context_parallel.chunks import check_layout, chunk_ids

__all__ = [  # the names from before the naming rule stay, as aliases (end of file)
    "allgather_attention_bytes",
    "allgather_bytes_per_rank",
    "causal_work",
    "hidden",
    "hybrid_attention_bytes",
    "hybrid_cp_bytes",
    "min_tokens_per_rank",
    "overlap_fraction",
    "ring_attention_bytes",
    "ring_bytes_per_rank",
    "ring_step_times",
    "ulysses_attention_bytes",
    "ulysses_bytes_per_rank",
    "work_imbalance",
]


def _kv_block(batch: int, kv_heads: int, seq: int, head_dim: int, cp: int, p: int) -> int:
    """Bytes of one rank's K and V: ``2 b KV (s / cp) d p``."""
    for name, value in (
        ("batch", batch),
        ("kv_heads", kv_heads),
        ("seq", seq),
        ("head_dim", head_dim),
        ("cp", cp),
        ("bytes_per_element", p),
    ):
        check_int(name, value)
    return 2 * batch * kv_heads * check_divisible("seq", seq, "cp", cp) * head_dim * p


def ring_attention_bytes(
    batch: int,
    kv_heads: int,
    seq: int,
    head_dim: int,
    cp: int,
    *,
    bytes_per_element: int = 2,
    backward: bool = False,
) -> int:
    """Bytes ONE rank sends in one ring attention call (one layer, one micro-batch): the forward
    pass ``(cp - 1) 2 b KV (s/cp) d p``; with ``backward=True`` the backward pass, twice that
    (K/V again and their gradients, ``cp - 1`` hops each)."""
    block = _kv_block(batch, kv_heads, seq, head_dim, cp, bytes_per_element)
    return (cp - 1) * block * (2 if check_bool("backward", backward) else 1)


def allgather_attention_bytes(
    batch: int,
    kv_heads: int,
    seq: int,
    head_dim: int,
    cp: int,
    *,
    bytes_per_element: int = 2,
    backward: bool = False,
) -> int:
    """Bytes ONE rank sends when K/V are all-gathered (forward) and their gradients
    reduce-scattered (``backward=True``): ``(cp - 1) / cp`` of ``2 b KV s d p`` each way, the
    ring forward's bytes."""
    check_bool("backward", backward)
    return (cp - 1) * _kv_block(batch, kv_heads, seq, head_dim, cp, bytes_per_element)


def ulysses_attention_bytes(
    batch: int,
    heads: int,
    kv_heads: int,
    seq: int,
    head_dim: int,
    cp: int,
    *,
    bytes_per_element: int = 2,
    backward: bool = False,
) -> int:
    """Bytes ONE rank sends in Ulysses attention, forward (or ``backward=True``: the backward,
    the same): all-to-alls of q, k, v and the output, ``(cp - 1) / cp`` of each local tensor:
    ``(cp - 1) / cp b (s/cp) d p (2H + 2KV)``. ValueError unless cp divides H and KV."""
    check_bool("backward", backward)
    check_int("heads", heads)
    check_divisible("heads", heads, "cp", cp)
    check_divisible("kv_heads", kv_heads, "cp", cp)
    q_block = _kv_block(batch, heads, seq, head_dim, cp, bytes_per_element)  # q and out
    kv_block = _kv_block(batch, kv_heads, seq, head_dim, cp, bytes_per_element)  # k and v
    return (cp - 1) * (q_block + kv_block) // cp


def hybrid_attention_bytes(
    batch: int,
    heads: int,
    kv_heads: int,
    seq: int,
    head_dim: int,
    u: int,
    r: int,
    *,
    bytes_per_element: int = 2,
    backward: bool = False,
) -> int:
    """Bytes ONE rank sends in hybrid (USP, Megatron-LM's ``a2a+p2p``) attention over
    ``c = u r`` ranks, forward (or ``backward=True``): Ulysses' four all-to-alls over ``u``
    ranks, ``(u - 1) / u b (s/c) d p (2H + 2KV)`` (:func:`ulysses_attention_bytes` at a
    sequence of ``s/r`` over ``u`` ranks), plus the ring over ``r`` ranks on ``KV/u`` heads and
    ``s/r`` tokens, ``(r - 1) 2 b (KV/u) (s/r) d p``, twice that backward
    (:func:`ring_attention_bytes`). ValueError unless u divides H and KV."""
    check_int("u", u)
    check_int("r", r)
    check_divisible("heads", heads, "u", u)
    kv_local = check_divisible("kv_heads", kv_heads, "u", u)
    ring_seq = check_divisible("seq", seq, "r", r)
    kw = dict(bytes_per_element=bytes_per_element, backward=backward)
    a2a = ulysses_attention_bytes(batch, heads, kv_heads, ring_seq, head_dim, u, **kw)
    return a2a + ring_attention_bytes(batch, kv_local, seq, head_dim, r, **kw)


def causal_work(rank: int, cp: int, *, layout: str = "zigzag") -> int:
    """Causal attention work of rank ``rank``: the (query half-chunk, key half-chunk) blocks
    it must compute, a full block 1 unit and a diagonal (half-masked) one 1/2. Contiguous:
    ``4r + 2``; zig-zag: ``2cp`` on every rank."""
    mine = chunk_ids(rank, cp, layout=layout)
    halves = sum(2 * qc + 1 for qc in mine)  # chunk qc sees qc full blocks + its diagonal
    return halves // 2


def work_imbalance(cp: int, *, layout: str = "zigzag") -> float:
    """Max over mean of :func:`causal_work` over the ``cp`` ranks: the slowest rank's time over
    the average, when time is work. Contiguous ``2 - 1/cp``; zig-zag 1."""
    check_layout(2 * cp, cp, layout)
    work = [causal_work(r, cp, layout=layout) for r in range(cp)]
    return float(Fraction(max(work) * cp, sum(work)))


# -- when does the ring hide behind compute? The alpha-beta model of chapter 5 -----------------
def ring_step_times(
    *,
    batch: int,
    heads: int,
    kv_heads: int,
    seq: int,
    head_dim: int,
    cp: int,
    alpha: float,
    bandwidth: float,
    flops: float,
    bytes_per_element: int = 2,
) -> dict[str, float]:
    """Seconds of one ring step (forward), alpha-beta model (Thakur et al. 2005) against a
    compute rate ``flops`` (FLOP/s): ``comm`` sends one K/V block (two messages, K and V),
    ``2 alpha + 2 b KV (s/cp) d p / bandwidth``; ``compute`` is one zig-zag step, half of a
    full (s/cp) x (s/cp) block, ``2 b H (s/cp)^2 d / flops`` (two matmuls of 2 FLOP per
    multiply-add: ``4 b H (s/cp)^2 d`` for a full block)."""
    check_positive("bandwidth", bandwidth)
    check_positive("flops", flops)
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")
    local = check_divisible("seq", seq, "cp", cp)
    nbytes = _kv_block(batch, kv_heads, seq, head_dim, cp, bytes_per_element)
    comm = 2 * alpha + nbytes / bandwidth
    compute = 2 * batch * heads * local * local * head_dim / flops
    return {"comm": comm, "compute": compute}


def overlap_fraction(**kwargs: float) -> float:
    """Fraction of a ring step's communication hidden behind its compute (1.0: all of it),
    arguments of :func:`ring_step_times`."""
    t = ring_step_times(**kwargs)
    return min(1.0, t["compute"] / t["comm"])


def hidden(**kwargs: float) -> bool:
    """True when a ring step's message takes no longer than its compute (arguments of
    :func:`ring_step_times`)."""
    t = ring_step_times(**kwargs)
    return t["comm"] <= t["compute"]


def min_tokens_per_rank(
    *, heads: int, kv_heads: int, bandwidth: float, flops: float, bytes_per_element: int = 2
) -> float:
    """Tokens per rank (s / cp) from which the ring hides behind compute, latency left out:
    ``2 b KV (s/cp) d p / B <= 2 b H (s/cp)^2 d / F``  gives  ``s/cp >= KV p F / (H B)``."""
    check_int("heads", heads)
    check_int("kv_heads", kv_heads)
    check_positive("bandwidth", bandwidth)
    check_positive("flops", flops)
    return kv_heads * bytes_per_element * flops / (heads * bandwidth)


# The names before the naming rule (closed forms ``<technique>_bytes``, counters
# ``count_<technique>_bytes``): plain aliases, kept for one release; labs and chapters call some.
ring_bytes_per_rank = ring_attention_bytes
allgather_bytes_per_rank = allgather_attention_bytes
ulysses_bytes_per_rank = ulysses_attention_bytes
hybrid_cp_bytes = hybrid_attention_bytes
