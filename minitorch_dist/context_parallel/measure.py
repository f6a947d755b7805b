"""What the lab, chapter 8 and the benchmark call: context parallelism against the
single-process reference, its bytes counted against the formulas of :mod:`.cost`, its causal
work per rank, and per-rank peak memory and time of ring vs all-gather attention. Every
function runs its ranks with :func:`minitorch_dist.launch` (fork, gloo).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.comm import CommCounter
from minitorch_dist.context_parallel.alternatives import allgather_attention, ulysses_attention
from minitorch_dist.context_parallel.compare import LayoutShard, cp_split
from minitorch_dist.context_parallel.cost import (
    allgather_attention_bytes,
    ring_attention_bytes,
    ulysses_attention_bytes,
)
from minitorch_dist.context_parallel.layout import check_layout, shard_sequence
from minitorch_dist.context_parallel.model import apply_context_parallel
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
    "AttentionShape",
    "CPRun",
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
@dataclass(frozen=True)
class CPRun:
    """What :func:`cp_runs` trains, on both sides (its keyword arguments)."""

    layout: str = "zigzag"  # or "contiguous": which tokens each rank holds
    attention: str = "ring"  # a key of ATTENTIONS: "ring", "allgather" or "ulysses"
    steps: int = 3  # AdamW steps
    dtype: torch.dtype = torch.float64  # fp64: only the order of additions differs
    config: LlamaConfig = TINY  # the model
    global_batch: int = 2  # sequences per step; each rank holds seq_len / cp of every one
    seq_len: int = 16
    lr: float = 1e-2
    seed: int = 0  # of the model's weights and of the batches
    timeout: float = 120.0  # seconds for the launch


def _cp_rank(rank: int, cp: int, run: CPRun, batches: list) -> Run:
    torch.manual_seed(run.seed)  # the same whole model on every rank
    model = Llama(run.config).to(run.dtype)
    attention = ATTENTIONS[run.attention]
    apply_context_parallel(model, dist.group.WORLD, layout=run.layout, attention=attention)
    opt = adamw(run.lr)(model.parameters())
    return run_training(
        model,
        opt,
        batches,
        loss_fn=full_cross_entropy,
        rank=rank,
        world_size=cp,
        split=cp_split(run.layout),
    )


def cp_runs(cp: int, run: CPRun | None = None, **options: Any) -> tuple[list[Run], Run]:
    """``(runs, reference)``: ``run.steps`` AdamW steps of the tiny Llama (or ``run.config``)
    with context parallelism over ``cp`` emulated ranks (each its ``seq_len / cp`` tokens of
    every row) and in one process on the whole batches, through :mod:`minitorch_dist.reference`;
    ``options`` replace fields of ``run`` (a :class:`CPRun`). Pass them to
    :func:`~minitorch_dist.reference.assert_runs_match` with
    ``outputs=lambda r: LayoutShard(r, cp, layout)``."""
    run = replace(run or CPRun(), **options)
    run = replace(run, config=TINY if run.config is None else run.config)
    config = run.config
    check_int("cp", cp)
    check_int("steps", run.steps)
    check_choice("attention", run.attention, ATTENTIONS)
    check_layout(run.seq_len, cp, run.layout)
    batches = make_batches(config.vocab_size, run.global_batch, run.seq_len, run.steps, run.seed)
    ref = reference_run(
        lambda: Llama(config),
        adamw(run.lr),
        batches,
        seed=run.seed,
        dtype=run.dtype,
        loss_fn=full_cross_entropy,
    )
    runs = launch(_cp_rank, cp, run, batches, timeout=run.timeout)
    return runs, ref


def compare_with_reference(cp: int, run: CPRun | None = None, **options: Any) -> list[Comparison]:
    """Per rank, the largest error of each compared tensor (arguments of :func:`cp_runs`):
    ``loss k`` (the mean of the ranks' step-k losses), ``outputs`` (this rank's logits vs its
    shard of the reference's), ``grad <name>`` (first step) and ``weight <name>`` (after the
    last step). In fp64 every error is about 1e-16."""
    run = replace(run or CPRun(), **options)
    runs, ref = cp_runs(cp, run)
    layout = run.layout
    # each rank's tokens: its loss a share of the mean, its logits the layout's shard of them
    holding = Holding(outputs=lambda rank: LayoutShard(rank, cp, layout))
    return compare_runs(runs, ref, holding=holding)


# -- attention alone: inputs, bytes, work, memory and time ----------------------------------------
@dataclass(frozen=True)
class AttentionShape:
    """The q, k, v of one attention call (whole sequence): (batch, heads, seq, head_dim)."""

    batch: int = 1
    heads: int = 4
    kv_heads: int = 2  # grouped-query attention: heads / kv_heads queries share a K/V head
    seq: int = 32  # the whole sequence; each rank holds seq / cp tokens
    head_dim: int = 8
    dtype: torch.dtype = torch.float32


def attention_inputs(
    rank: int,
    cp: int,
    shape: AttentionShape | None = None,
    *,
    layout: str = "zigzag",
    seed: int = 0,
    **dims: Any,
) -> tuple[torch.Tensor, ...]:
    """Seeded full q, k, v and an output gradient of ``shape`` (an :class:`AttentionShape`;
    ``dims`` replace its fields), and rank ``rank``'s shards of them:
    ``(q, k, v, dout, q_r, k_r, v_r, dout_r)``, the shards leaves that require grad."""
    s = replace(shape or AttentionShape(), **dims)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(s.batch, s.heads, s.seq, s.head_dim, generator=gen, dtype=s.dtype)
    k = torch.randn(s.batch, s.kv_heads, s.seq, s.head_dim, generator=gen, dtype=s.dtype)
    v = torch.randn(s.batch, s.kv_heads, s.seq, s.head_dim, generator=gen, dtype=s.dtype)
    dout = torch.randn(s.batch, s.heads, s.seq, s.head_dim, generator=gen, dtype=s.dtype)
    shards = [shard_sequence(t, rank, cp, layout=layout) for t in (q, k, v, dout)]
    for t in shards[:3]:
        t.requires_grad_()
    return (q, k, v, dout, *shards)


def _bytes_rank(rank: int, cp: int, method: str, layout: str, shape: AttentionShape) -> dict:
    *_, q, k, v, dout = attention_inputs(rank, cp, shape, layout=layout)
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
    shape: AttentionShape | None = None,
    *,
    method: str = "ring",
    layout: str = "zigzag",
    timeout: float = 60.0,
    **dims: Any,
) -> dict[str, Any]:
    """Bytes each rank sent in one attention call (forward, backward) counted by CommCounter,
    and the formula's: ``{"per_rank": [...], "formula": {"forward", "backward"}}``; ``shape``
    an :class:`AttentionShape` (default seq 32, head_dim 8), ``dims`` replace its fields."""
    check_choice("method", method, ATTENTIONS)
    s = replace(shape or AttentionShape(), **dims)
    p = torch.empty((), dtype=s.dtype).element_size()
    sizes = (s.batch, s.kv_heads, s.seq, s.head_dim, cp)
    formula = {
        "ring": lambda bw: ring_attention_bytes(*sizes, bytes_per_element=p, backward=bw),
        "allgather": lambda bw: allgather_attention_bytes(*sizes, bytes_per_element=p, backward=bw),
        "ulysses": lambda bw: ulysses_attention_bytes(
            s.batch, s.heads, *sizes[1:], bytes_per_element=p, backward=bw
        ),
    }[method]
    per_rank = launch(_bytes_rank, cp, method, layout, s, timeout=timeout)
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


def _memory_rank(
    rank: int, cp: int, method: str, layout: str, shape: AttentionShape, repeats: int
) -> dict:
    *_, q, k, v, dout = attention_inputs(rank, cp, shape, layout=layout)
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
    shape: AttentionShape | None = None,
    *,
    method: str = "ring",
    layout: str = "zigzag",
    repeats: int = 0,
    timeout: float = 120.0,
    **dims: Any,
) -> list[dict]:
    """Per rank: ``peak_bytes``, the most memory one attention forward + backward held at once
    beyond its inputs (measured by :class:`~minitorch_dist.memory.MemoryTracker`);
    ``saved_bytes``, what the forward left alive for backward (its output included): what a
    model keeps per layer until backward reaches it; and
    ``step_s``, the median wall time of ``repeats`` more forward + backward (None if 0).
    ``shape`` an :class:`AttentionShape` (default seq 256, head_dim 16), ``dims`` replace its
    fields."""
    check_choice("method", method, ATTENTIONS)
    check_int("repeats", repeats, minimum=0)
    s = replace(shape or AttentionShape(seq=256, head_dim=16), **dims)
    return launch(_memory_rank, cp, method, layout, s, repeats, timeout=timeout)
