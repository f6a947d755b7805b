"""Context parallelism (chapter 8, lab 8): the sequence split over ranks, attention by a ring.

    q, k, v = (shard_sequence(t, rank, cp) for t in (q_full, k_full, v_full))   # zig-zag shards
    out = ring_attention(q, k, v, group=group)        # this rank's shard of causal attention

Modules: ``layout`` (contiguous and zig-zag shards, positions), ``blocks`` (one block of
attention and the online-softmax merge), ``ring`` (ring attention as an autograd Function),
``alternatives`` (all-gather K/V and Ulysses), ``hybrid`` (Ulysses inside a node, the ring
across: USP), ``cost`` (bytes, causal work, overlap; pure
formulas), ``model`` (the tiny Llama with context parallelism, against the reference),
``measure`` (per-rank memory, time, bytes and work). The figures live in
``minitorch_dist.context_parallel.plots`` (not imported here).
"""

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    ".alternatives": ("allgather_attention", "ulysses_attention"),
    ".blocks": ("block_attention", "block_attention_backward", "merge_partials"),
    ".cost": (
        "allgather_bytes_per_rank",
        "causal_work",
        "hidden",
        "hybrid_cp_bytes",
        "min_tokens_per_rank",
        "overlap_fraction",
        "ring_bytes_per_rank",
        "ring_step_times",
        "ulysses_bytes_per_rank",
        "work_imbalance",
    ),
    ".hybrid": ("HybridGroups", "hybrid_attention", "hybrid_groups", "hybrid_order"),
    ".chunks": ("LAYOUTS", "chunk_ids"),
    ".layout": ("shard_positions", "shard_sequence", "unshard_sequence"),
    ".model": (
        "ContextParallelCore",
        "ContextParallelLlama",
        "LayoutShard",
        "apply_context_parallel",
        "average_grads",
        "cp_split",
    ),
    ".ring": (
        "RingAttention",
        "RingComm",
        "WorkCounter",
        "block_plan",
        "pieces_of",
        "ring_attention",
        "ring_attention_backward",
        "ring_attention_forward",
    ),
}

__all__ = [
    "LAYOUTS",
    "ContextParallelCore",
    "ContextParallelLlama",
    "LayoutShard",
    "allgather_attention",
    "apply_context_parallel",
    "average_grads",
    "cp_split",
    "ulysses_attention",
    "RingAttention",
    "RingComm",
    "WorkCounter",
    "allgather_bytes_per_rank",
    "block_attention",
    "block_attention_backward",
    "block_plan",
    "causal_work",
    "chunk_ids",
    "hidden",
    "HybridGroups",
    "hybrid_attention",
    "hybrid_cp_bytes",
    "hybrid_groups",
    "hybrid_order",
    "merge_partials",
    "min_tokens_per_rank",
    "overlap_fraction",
    "pieces_of",
    "ring_attention",
    "ring_attention_backward",
    "ring_attention_forward",
    "ring_bytes_per_rank",
    "ring_step_times",
    "shard_positions",
    "shard_sequence",
    "ulysses_bytes_per_rank",
    "unshard_sequence",
    "work_imbalance",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
