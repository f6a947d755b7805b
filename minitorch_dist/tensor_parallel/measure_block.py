"""One Block measured (chapter 7, lab 7): the bytes its tensor-parallel forward and backward
send, counted against :func:`~minitorch_dist.tensor_parallel.cost.tp_bytes`, and the bytes it
saves for backward, against :func:`~minitorch_dist.tensor_parallel.cost.tp_activation_bytes`.
Every function runs its ranks with :func:`minitorch_dist.launch`;
:mod:`minitorch_dist.tensor_parallel.measure` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from minitorch_dist.checks import check_choice
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.launching.launcher import launch
from minitorch_dist.memory.track import MemoryTracker
from minitorch_dist.models import Block, LlamaConfig, rope_for
from minitorch_dist.reference import TINY
from minitorch_dist.tensor_parallel.cost import (
    kv_heads_per_rank,
    tp_activation_breakdown,
    tp_bytes,
)
from minitorch_dist.tensor_parallel.functions import scatter_to_sp
from minitorch_dist.tensor_parallel.model import check_tp_config, parallelize_block
from minitorch_dist.tensor_parallel.sequence import sequence_parallel_norms

__all__ = ["BlockRun", "count_tp_bytes", "measure_tp_activations"]


@dataclass(frozen=True)
class BlockRun:
    """One Block, tensor-parallel, as :func:`count_tp_bytes` and :func:`measure_tp_activations`
    run it (their keyword arguments)."""

    sp: bool = False  # sequence parallelism on the tp group
    micro_batch: int = 2
    seq_len: int = 16
    config: LlamaConfig = TINY  # the Block's shapes
    dtype: torch.dtype = torch.float32
    regather: bool = False  # save this rank's shard of the gathered input, gather again later
    timeout: float = 60.0  # seconds for the launch


def _block_and_input(
    run: BlockRun, seed: int = 0
) -> tuple[Block, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One seeded Block cut over the world group, and this rank's input (b, s or s/t, h)."""
    config, dtype, seq_len = run.config, run.dtype, run.seq_len
    torch.manual_seed(seed)
    block = Block(config).to(dtype)
    x = torch.randn(run.micro_batch, seq_len, config.hidden, dtype=dtype)
    if run.sp:  # the norms' gradient hooks first, as apply_tensor_parallel does
        sequence_parallel_norms(block, dist.group.WORLD)
        x = scatter_to_sp(x, dist.group.WORLD)  # (b, s/t, h): my tokens
    parallelize_block(block, dist.group.WORLD, sp=run.sp, regather=run.regather)
    cos, sin = rope_for(config, seq_len, None, dtype)
    return block, x.detach().requires_grad_(), cos, sin


def _count_rank(rank: int, tp: int, run: BlockRun, recompute: str) -> dict[str, Any]:
    block, x, cos, sin = _block_and_input(run)

    def step() -> CommCounter:
        with CommCounter() as cc:
            if recompute == "full":  # the whole forward again: no early stop (see above)
                with set_checkpoint_early_stop(False):
                    out = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                out = block(x, cos, sin)
            out.sum().backward()
        return cc

    block.requires_grad_(False)  # the activation path alone: no weight gradient, no hook
    path = step()
    block.requires_grad_(True)
    total = step()  # with the weights' gradients: replicated norms and kv copies are summed too
    return {
        "counted": path.total_bytes_sent,
        "calls": dict(path.calls),
        "total": total.total_bytes_sent,
        "total_calls": dict(total.calls),
        "table": path.table(),
    }


def count_tp_bytes(
    tp: int, run: BlockRun | None = None, *, recompute: str = "none", **options: Any
) -> dict[str, Any]:
    """Count with :class:`~minitorch_dist.comm.CommCounter` what rank 0 sends in one Block's
    forward + backward, tp-parallel over ``tp`` emulated ranks, beside :func:`tp_bytes`.

    ``recompute="full"`` checkpoints the Block and recomputes its whole forward in backward,
    as Megatron-LM does; torch's non-reentrant checkpoint would otherwise stop recomputing once
    every saved tensor is back (``set_checkpoint_early_stop``), which skips the MLP's final
    all-reduce (5 all-reduces instead of 6, measured).

    ``counted``: the activation path alone (the weights frozen, so only f/g and their sequence
    -parallel halves run), which ``formula`` predicts. ``total``: with the weight gradients too,
    which adds the all-reduce of the replicated norm weights' gradients under sp (2 x h per layer)
    and of the kv-head copies when tp > kv_heads, and with ``regather`` the two all-gathers of
    the regions' inputs that the weight gradients need; ``extra_formula`` predicts that
    difference. ``options`` replace fields of ``run`` (a :class:`BlockRun`).
    """
    run = replace(run or BlockRun(), **options)
    run = replace(run, config=TINY if run.config is None else run.config)
    config, sp, dtype = run.config, run.sp, run.dtype
    check_choice("recompute", recompute, ("none", "selective", "full"))
    check_tp_config(config, tp)
    p = torch.empty((), dtype=dtype).element_size()
    shape = {
        "micro_batch": run.micro_batch,
        "seq_len": run.seq_len,
        "hidden": config.hidden,
        "tp": tp,
        "bytes_per_element": p,
        "recompute": recompute,
        "sp": sp,
    }
    formula = tp_bytes(**shape)  # the activation path
    # the re-gathers feed the weight gradients only: they run when the weights train
    extra = tp_bytes(**shape, regather=True) - formula if run.regather else 0
    runs = launch(_count_rank, tp, run, recompute, timeout=run.timeout)
    if sp:  # the two norm weights of the block
        extra += 2 * collective_bytes("all_reduce", config.hidden * p, tp)
    if config.kv_heads % tp:  # wk and wv: a (kv_heads, d, h) buffer each
        extra += 2 * collective_bytes("all_reduce", config.kv_hidden * config.hidden * p, tp)
    kv_heads_per_rank(config.kv_heads, tp)
    return {
        **runs[0],
        "formula": formula,
        "extra_formula": extra,
        "per_rank": [r["counted"] for r in runs],
    }


def _activation_rank(rank: int, tp: int, run: BlockRun) -> int:
    block, x, cos, sin = _block_and_input(run)
    with MemoryTracker(block) as tracker:  # the weights counted as params on entry
        for t in (x, cos, sin):
            tracker.track(t, "other")  # made before: not part of the forward's growth
        before = tracker.current()
        out = block(x, cos, sin)
        after = tracker.current()
    grown = sum(after[c] - before[c] for c in ("activations", "other"))
    # saved = what the forward made and keeps, less its output, plus its input (made before the
    # tracker looked, saved by attn_norm: in a model it is the previous block's output)
    return grown - out.numel() * out.element_size() + x.numel() * x.element_size()


def measure_tp_activations(tp: int, run: BlockRun | None = None, **options: Any) -> dict[str, Any]:
    """Bytes one Block saves for backward on each rank, measured by
    :class:`~minitorch_dist.memory.MemoryTracker` (made by its forward and alive after it, minus
    its output, plus its input, which the first norm saves),
    beside :func:`tp_activation_breakdown`. ``options`` replace fields of ``run`` (a
    :class:`BlockRun`)."""
    run = replace(run or BlockRun(), **options)
    run = replace(run, config=TINY if run.config is None else run.config)
    config, dtype = run.config, run.dtype
    check_tp_config(config, tp)
    measured = launch(_activation_rank, tp, run, timeout=run.timeout)
    p = torch.empty((), dtype=dtype).element_size()
    breakdown = tp_activation_breakdown(
        config,
        micro_batch=run.micro_batch,
        seq_len=run.seq_len,
        tp=tp,
        sp=run.sp,
        bytes_per_element=p,
        regather=run.regather,
    )
    return {
        "measured": measured[0],
        "per_rank": measured,
        "formula": sum(breakdown.values()),
        "breakdown": breakdown,
    }
