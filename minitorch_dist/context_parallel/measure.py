"""What the lab, chapter 8 and the benchmark call: context parallelism against the
single-process reference, its bytes counted against the formulas of :mod:`.cost`, its causal
work per rank, and per-rank peak memory and time of ring vs all-gather attention. Every
function runs its ranks with :func:`minitorch_dist.launch` (fork, gloo).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.comm import CommCounter
from minitorch_dist.context_parallel.alternatives import allgather_attention, ulysses_attention
from minitorch_dist.context_parallel.cost import (
    allgather_attention_bytes,
    ring_attention_bytes,
    ulysses_attention_bytes,
)
from minitorch_dist.context_parallel.layout import check_layout, shard_sequence
from minitorch_dist.context_parallel.model import LayoutShard, apply_context_parallel, cp_split
from minitorch_dist.context_parallel.ring import ring_attention
from minitorch_dist.context_parallel.work import WorkCounter
from minitorch_dist.launching.launcher import launch
from minitorch_dist.memory.track import MemoryTracker
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.reference import (  # TINY, full_cross_entropy: importable here too
    TINY,
    Comparison,
    Holding,
    Run,
    adamw,
    compare_runs,
    full_cross_entropy,
    make_batches,
    reference_run,
    run_training,
)

__all__ = [
    "ATTENTIONS",
    "TINY",
    "attention_inputs",
    "compare_with_reference",
    "count_cp_bytes",
    "cp_runs",
    "full_cross_entropy",
    "measure_attention",
    "measure_work",
]

ATTENTIONS = {
    "ring": ring_attention,
    "allgather": allgather_attention,
    "ulysses": ulysses_attention,
}


# -- the tiny Llama against the reference ---------------------------------------------------------
def _cp_rank(
    rank: int,
    cp: int,
    config: LlamaConfig,
    batches: list,
    layout: str,
    attention: str,
    dtype: torch.dtype,
    lr: float,
    seed: int,
) -> Run:
    torch.manual_seed(seed)  # the same whole model on every rank
    model = Llama(config).to(dtype)
    apply_context_parallel(model, dist.group.WORLD, layout=layout, attention=ATTENTIONS[attention])
    opt = adamw(lr)(model.parameters())
    return run_training(
        model,
        opt,
        batches,
        loss_fn=full_cross_entropy,
        rank=rank,
        world_size=cp,
        split=cp_split(layout),
    )


def cp_runs(
    cp: int,
    *,
    layout: str = "zigzag",
    attention: str = "ring",
    steps: int = 3,
    dtype: torch.dtype = torch.float64,
    config: LlamaConfig | None = None,
    global_batch: int = 2,
    seq_len: int = 16,
    lr: float = 1e-2,
    seed: int = 0,
    timeout: float = 120.0,
) -> tuple[list[Run], Run]:
    """``(runs, reference)``: ``steps`` AdamW steps of the tiny Llama (or ``config``) with
    context parallelism over ``cp`` emulated ranks (each its ``seq_len / cp`` tokens of every
    row) and in one process on the whole batches, through :mod:`minitorch_dist.reference`. Pass
    them to :func:`~minitorch_dist.reference.assert_runs_match` with
    ``outputs=lambda r: LayoutShard(r, cp, layout)``."""
    config = TINY if config is None else config
    check_int("cp", cp)
    check_int("steps", steps)
    check_choice("attention", attention, ATTENTIONS)
    check_layout(seq_len, cp, layout)
    batches = make_batches(config.vocab_size, global_batch, seq_len, steps, seed)
    ref = reference_run(
        lambda: Llama(config),
        adamw(lr),
        batches,
        seed=seed,
        dtype=dtype,
        loss_fn=full_cross_entropy,
    )
    runs = launch(
        _cp_rank, cp, config, batches, layout, attention, dtype, lr, seed, timeout=timeout
    )
    return runs, ref


def compare_with_reference(cp: int, **kwargs: Any) -> list[Comparison]:
    """Per rank, the largest error of each compared tensor (arguments of :func:`cp_runs`):
    ``loss k`` (the mean of the ranks' step-k losses), ``outputs`` (this rank's logits vs its
    shard of the reference's), ``grad <name>`` (first step) and ``weight <name>`` (after the
    last step). In fp64 every error is about 1e-16."""
    runs, ref = cp_runs(cp, **kwargs)
    layout = kwargs.get("layout", "zigzag")
    # each rank's tokens: its loss a share of the mean, its logits the layout's shard of them
    holding = Holding(outputs=lambda rank: LayoutShard(rank, cp, layout))
    return compare_runs(runs, ref, holding=holding)


# -- attention alone: inputs, bytes, work, memory and time ----------------------------------------
def attention_inputs(
    rank: int,
    cp: int,
    *,
    layout: str = "zigzag",
    batch: int = 1,
    heads: int = 4,
    kv_heads: int = 2,
    seq: int = 32,
    head_dim: int = 8,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> tuple[torch.Tensor, ...]:
    """Seeded full q, k, v and an output gradient, and rank ``rank``'s shards of them:
    ``(q, k, v, dout, q_r, k_r, v_r, dout_r)``, the shards leaves that require grad."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq, head_dim, generator=gen, dtype=dtype)
    k = torch.randn(batch, kv_heads, seq, head_dim, generator=gen, dtype=dtype)
    v = torch.randn(batch, kv_heads, seq, head_dim, generator=gen, dtype=dtype)
    dout = torch.randn(batch, heads, seq, head_dim, generator=gen, dtype=dtype)
    shards = [shard_sequence(t, rank, cp, layout=layout) for t in (q, k, v, dout)]
    for t in shards[:3]:
        t.requires_grad_()
    return (q, k, v, dout, *shards)


def _bytes_rank(rank: int, cp: int, method: str, layout: str, shape: dict) -> dict:
    *_, q, k, v, dout = attention_inputs(rank, cp, layout=layout, **shape)
    with CommCounter() as forward:
        out = ATTENTIONS[method](q, k, v, layout=layout)
    with CommCounter() as backward:
        out.backward(dout)
    return {
        "forward": forward.total_bytes_sent,
        "backward": backward.total_bytes_sent,
        "calls": (dict(forward.calls), dict(backward.calls)),
    }


def count_cp_bytes(
    cp: int,
    *,
    method: str = "ring",
    layout: str = "zigzag",
    batch: int = 1,
    heads: int = 4,
    kv_heads: int = 2,
    seq: int = 32,
    head_dim: int = 8,
    dtype: torch.dtype = torch.float32,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Bytes each rank sent in one attention call (forward, backward) counted by CommCounter,
    and the formula's: ``{"per_rank": [...], "formula": {"forward", "backward"}}``."""
    check_choice("method", method, ATTENTIONS)
    shape = dict(
        batch=batch, heads=heads, kv_heads=kv_heads, seq=seq, head_dim=head_dim, dtype=dtype
    )
    p = torch.empty((), dtype=dtype).element_size()
    dims = (batch, kv_heads, seq, head_dim, cp)
    formula = {
        "ring": lambda bw: ring_attention_bytes(*dims, bytes_per_element=p, backward=bw),
        "allgather": lambda bw: allgather_attention_bytes(*dims, bytes_per_element=p, backward=bw),
        "ulysses": lambda bw: ulysses_attention_bytes(
            batch, heads, *dims[1:], bytes_per_element=p, backward=bw
        ),
    }[method]
    per_rank = launch(_bytes_rank, cp, method, layout, shape, timeout=timeout)
    return {"per_rank": per_rank, "formula": {"forward": formula(False), "backward": formula(True)}}


def _work_rank(rank: int, cp: int, layout: str, seq: int) -> dict:
    *_, q, k, v, _ = attention_inputs(rank, cp, layout=layout, seq=seq)
    with WorkCounter().attached() as work:  # a hook on the ring's block_plan
        ring_attention(q, k, v, layout=layout)
    return {
        "units": work.units,
        "full": work.full,
        "diagonal": work.diagonal,
        "skipped": work.skipped,
        "per_step": [u / 2 for u in work.per_step],
    }


def measure_work(
    cp: int, *, layout: str = "zigzag", seq: int | None = None, timeout: float = 60.0
) -> list[dict]:
    """Per rank, the attention blocks ring attention computed (forward), counted by a
    :class:`WorkCounter`: ``units`` in half-chunk x half-chunk blocks (a diagonal one 1/2)."""
    seq = 4 * cp if seq is None else seq
    check_layout(seq, cp, layout)
    return launch(_work_rank, cp, layout, seq, timeout=timeout)


def _memory_rank(rank: int, cp: int, method: str, layout: str, shape: dict, repeats: int) -> dict:
    *_, q, k, v, dout = attention_inputs(rank, cp, layout=layout, **shape)
    attention = ATTENTIONS[method]
    with MemoryTracker() as tracker:
        for t in (q, k, v, dout):
            tracker.track(t, "other")  # made before: the inputs, the same for every method
        before = tracker.peak_total
        out = attention(q, k, v, layout=layout)
        saved = sum(tracker.current().values()) - before  # kept for backward, and the output
        out.backward(dout)
        peak = tracker.peak_total - before
    del out
    times = []
    for _ in range(repeats):
        q.grad = k.grad = v.grad = None
        dist.barrier()
        start = time.perf_counter()
        attention(q, k, v, layout=layout).backward(dout)
        times.append(time.perf_counter() - start)
    return {
        "peak_bytes": peak,
        "saved_bytes": saved,
        "step_s": statistics.median(times) if times else None,
    }


def measure_attention(
    cp: int,
    *,
    method: str = "ring",
    layout: str = "zigzag",
    batch: int = 1,
    heads: int = 4,
    kv_heads: int = 2,
    seq: int = 256,
    head_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    repeats: int = 0,
    timeout: float = 120.0,
) -> list[dict]:
    """Per rank: ``peak_bytes``, the most memory one attention forward + backward held at once
    beyond its inputs (measured by :class:`~minitorch_dist.memory.MemoryTracker`);
    ``saved_bytes``, what the forward left alive for backward (its output included): what a
    model keeps per layer until backward reaches it; and
    ``step_s``, the median wall time of ``repeats`` more forward + backward (None if 0)."""
    check_choice("method", method, ATTENTIONS)
    check_int("repeats", repeats, minimum=0)
    shape = dict(
        batch=batch, heads=heads, kv_heads=kv_heads, seq=seq, head_dim=head_dim, dtype=dtype
    )
    return launch(_memory_rank, cp, method, layout, shape, repeats, timeout=timeout)
