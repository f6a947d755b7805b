"""What tensor (and sequence) parallelism costs per transformer layer: bytes sent, bytes stored.

Communication (Shoeybi et al. 2019, "Megatron-LM", section 3; Korthikanti et al. 2022, section
4.2.2). A layer has two tensor-parallel regions, attention and MLP. Each is entered through ``f``
(identity forward, all-reduce backward) and left through ``g`` (all-reduce forward, identity
backward), so one micro-batch's forward and backward run four all-reduces of the (b, s, h)
activation. Under the ring algorithm one rank sends ``2 (t - 1) / t`` times the payload per
all-reduce (:func:`minitorch_dist.comm.collective_bytes`):

    4 x 2 (t - 1) / t x b s h  =  8 b s h (t - 1) / t  elements per rank

Full recomputation runs each forward again inside backward, repeating its two all-reduces:
``12 b s h (t - 1) / t``. Sequence parallelism replaces each all-reduce by an all-gather and a
reduce-scatter, ``(t - 1) / t`` each: the same bytes.

Memory: :func:`tp_activation_bytes` is the Llama-aware count of what one block saves for
backward on one rank (see the table at the top of :mod:`minitorch_dist.models.llama`), measured
against :class:`~minitorch_dist.memory.MemoryTracker` in :func:`measure_tp_activations`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from minitorch_dist.checks import check_bool, check_choice, check_divisible, check_int

__all__ = [
    "kv_heads_per_rank",
    "tp_activation_breakdown",
    "tp_activation_bytes",
    "tp_bytes",
    "tp_comm_bytes",
]

RECOMPUTE = ("none", "selective", "full")


def tp_bytes(
    *,
    micro_batch: int,
    seq_len: int,
    hidden: int,
    tp: int,
    bytes_per_element: int = 2,
    recompute: str = "none",
    sp: bool = False,
    regather: bool = False,
) -> int:
    """Bytes ONE rank sends per transformer layer per micro-batch, forward + backward.

    ``8 b s h (t - 1) / t`` elements (four ring all-reduces of ``b s h``), ``12 b s h (t - 1) / t``
    with ``recompute="full"`` (the forward's two all-reduces again); ``"selective"`` recomputes
    attention inside a region and sends nothing more. ``sp=True`` swaps every all-reduce for an
    all-gather plus a reduce-scatter: the same bytes. ``regather=True`` (with sp, as Megatron-LM
    does: the regions' inputs saved as shards) adds one all-gather per region in backward,
    ``2 b s h (t - 1) / t`` more. Exact integer: ``hidden`` must divide by tp (it always does
    when the heads do), and under sp the sequence too.
    """
    for name, value in (
        ("micro_batch", micro_batch),
        ("seq_len", seq_len),
        ("hidden", hidden),
        ("tp", tp),
        ("bytes_per_element", bytes_per_element),
    ):
        check_int(name, value)
    check_choice("recompute", recompute, RECOMPUTE)
    check_bool("sp", sp)
    check_bool("regather", regather)
    check_divisible("hidden", hidden, "tp", tp)
    if sp:
        check_divisible("seq_len", seq_len, "tp", tp)
    if regather and (not sp or recompute == "full"):
        raise ValueError("regather=True needs sp=True and recompute other than 'full'")
    all_reduces = 6 if recompute == "full" else 4  # 2 forward (+2 recomputed), 2 backward
    halves = 2 * all_reduces + (2 if regather else 0)  # an all-reduce is 2 (t-1)/t passes
    elements = Fraction(halves * (tp - 1), tp) * micro_batch * seq_len * hidden
    return int(elements * bytes_per_element)


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """Key/value heads one rank holds: ``kv_heads / tp``, or 1 (a copy) when tp is a multiple of
    kv_heads. ValueError when neither divides the other."""
    check_int("kv_heads", kv_heads)
    check_int("tp", tp)
    if kv_heads % tp == 0:
        return kv_heads // tp
    if tp % kv_heads == 0:
        return 1
    raise ValueError(f"kv_heads={kv_heads} is not divisible by tp={tp}, nor tp by kv_heads")


def tp_activation_breakdown(
    config: Any,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int,
    sp: bool = False,
    bytes_per_element: int = 4,
    regather: bool = False,
) -> dict[str, int]:
    """Bytes one rank's Block saves for backward, by term (one layer; fused CPU attention).

    p = bytes_per_element, b, s, h, f = ffn_hidden, H = heads, d = head_dim, kv_t = kv heads per
    rank x d (:func:`kv_heads_per_rank`). Split over tp in any case (column-parallel outputs):
    ``core`` q, out (2 b s h / t), k, v (2 b s kv_t), logsumexp (4 b H s / t bytes) and ``mlp``
    SwiGLU's four (b, s, f/t) tensors. Replicated under tp, split along s under sp: ``norms``,
    each RMSNorm's input, x * rstd and rstd, 2 x (2 b s h + b s). ``linear_inputs``: the shared
    input of wq/wk/wv and of w1/w3, 2 b s h -- the full gathered tensor also under sp, since our
    linears save what they multiply -- unless ``regather=True`` (with sp), which saves the
    shard, 2 b s h / t, and all-gathers it again in backward, as Megatron-LM does (Korthikanti
    et al. 2022, section 4.2.2): then every term is split by t.
    """
    for name, value in (
        ("micro_batch", micro_batch),
        ("seq_len", seq_len),
        ("tp", tp),
        ("bytes_per_element", bytes_per_element),
    ):
        check_int(name, value)
    check_bool("sp", sp)
    check_divisible("heads", config.heads, "tp", tp)
    check_divisible("ffn_hidden", config.ffn_hidden, "tp", tp)
    if sp:
        check_divisible("seq_len", seq_len, "tp", tp)
    p, b, s, t = bytes_per_element, micro_batch, seq_len, tp
    h, f, heads = config.hidden, config.ffn_hidden, config.heads
    kv_t = kv_heads_per_rank(config.kv_heads, t) * config.head_dim
    split = t if sp else 1  # sequence parallelism splits the norms' tokens
    return {
        "norms": p * 2 * (2 * b * s * h + b * s) // split,
        "linear_inputs": p * 2 * b * s * h // (t if sp and regather else 1),
        "core": p * (2 * b * s * h // t + 2 * b * s * kv_t) + 4 * b * heads * s // t,
        "mlp": p * 4 * b * s * f // t,
    }


def tp_activation_bytes(
    config: Any,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int,
    sp: bool = False,
    bytes_per_element: int = 4,
    regather: bool = False,
) -> int:
    """Total of :func:`tp_activation_breakdown`: stored activation bytes per layer per rank."""
    return sum(
        tp_activation_breakdown(
            config,
            micro_batch=micro_batch,
            seq_len=seq_len,
            tp=tp,
            sp=sp,
            bytes_per_element=bytes_per_element,
            regather=regather,
        ).values()
    )


# The name before the naming rule (closed forms ``<technique>_bytes``, counters
# ``count_<technique>_bytes``): a plain alias, kept for one release; labs and chapters call it.
tp_comm_bytes = tp_bytes
