"""Context parallelism (chapter 8, lab 8): the sequence split over ranks, attention by a ring.

    q, k, v = (shard_sequence(t, rank, cp) for t in (q_full, k_full, v_full))   # zig-zag shards
    out = ring_attention(q, k, v, group=group)        # this rank's shard of causal attention

Modules: ``layout`` (contiguous and zig-zag shards, positions), ``blocks`` (one block of
attention and the online-softmax merge), ``ring`` (ring attention as an autograd Function),
``work`` (the blocks the ring computes, counted by a hook on its plan),
``alternatives`` (all-gather K/V and Ulysses), ``hybrid`` (Ulysses inside a node, the ring
across: USP), ``cost`` (bytes, causal work, overlap; pure
formulas), ``model`` (the tiny Llama with context parallelism), ``compare`` (a batch and an
output cut by the layout, to hold a run against the reference), ``measure`` (per-rank memory,
time, bytes and work). The figures live in
``minitorch_dist.context_parallel.plots`` (not imported here).
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .alternatives import allgather_attention, ulysses_attention
    from .blocks import block_attention, block_attention_backward, merge_partials
    from .chunks import LAYOUTS, chunk_ids
    from .compare import LayoutShard, cp_split
    from .cost import (
        allgather_attention_bytes,
        allgather_bytes_per_rank,
        causal_work,
        hidden,
        hybrid_attention_bytes,
        hybrid_cp_bytes,
        min_tokens_per_rank,
        overlap_fraction,
        ring_attention_bytes,
        ring_bytes_per_rank,
        ring_step_times,
        ulysses_attention_bytes,
        ulysses_bytes_per_rank,
        work_imbalance,
    )
    from .hybrid import HybridGroups, hybrid_attention, hybrid_groups, hybrid_order
    from .layout import shard_positions, shard_sequence, unshard_sequence
    from .model import ShardPositions, apply_context_parallel
    from .ring import (
        RingAttention,
        RingComm,
        block_plan,
        pieces_of,
        register_plan_hook,
        ring_attention,
        ring_attention_backward,
        ring_attention_forward,
    )
    from .work import WorkCounter

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
