"""What the lab and chapter 7 call: tensor parallelism against the single-process reference, its
bytes counted against :func:`tp_bytes` and its stored activations against
:func:`tp_activation_bytes` (one Block: :mod:`~minitorch_dist.tensor_parallel.measure_block`,
re-exported here). Every function runs its ranks with :func:`minitorch_dist.launch`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from minitorch_dist.checks import check_bool, check_int
from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.models.configs import padded_vocab_size
from minitorch_dist.reference import (  # TINY, full_cross_entropy: importable here too
    TINY,
    Comparison,
    Holding,
    Run,
    Shard,
    adamw,
    compare_runs,
    full_cross_entropy,
    make_batches,
    param_grads,
    param_values,
    reference_run,
    run_training,
)
from minitorch_dist.tensor_parallel.measure_block import count_tp_bytes, measure_tp_activations
from minitorch_dist.tensor_parallel.model import apply_tensor_parallel, check_tp_config, tp_loss_fn

__all__ = [
    "TPRun",
    "compare_with_reference",
    "count_tp_bytes",
    "full_cross_entropy",
    "measure_tp_activations",
    "tp_shards",
    "TINY",
]


def tp_shards(model_config: Any, rank: int, tp: int) -> dict[str, Shard]:
    """Which slice of each full parameter rank ``rank`` of ``tp`` holds, by name, for
    :func:`minitorch_dist.reference.compare` (norms: whole, not listed). The embedding and head
    are slices of the table padded to ``padded_vocab_size`` (pad the reference's tensor first)."""
    check_tp_config(model_config, tp)
    check_int("rank", rank, minimum=0, maximum=tp - 1)
    kv = model_config.kv_heads
    kv_shard = Shard(0, rank, tp) if kv % tp == 0 else Shard(0, rank // (tp // kv), kv)
    shards = {"embed.weight": Shard(0, rank, tp), "head.weight": Shard(0, rank, tp)}
    for i in range(model_config.layers):
        p = f"layers.{i}."
        shards |= {
            p + "attn.wq.weight": Shard(0, rank, tp),
            p + "attn.wk.weight": kv_shard,
            p + "attn.wv.weight": kv_shard,
            p + "attn.wo.weight": Shard(1, rank, tp),
            p + "mlp.w1.weight": Shard(0, rank, tp),
            p + "mlp.w3.weight": Shard(0, rank, tp),
            p + "mlp.w2.weight": Shard(1, rank, tp),
        }
    return shards


def _padded(tensors: dict[str, torch.Tensor], rows: int) -> dict[str, torch.Tensor]:
    """The embedding and head tensors padded with zero rows to the padded vocabulary."""
    out = dict(tensors)
    for name in ("embed.weight", "head.weight"):
        t = out[name]
        out[name] = torch.cat([t, t.new_zeros(rows - t.shape[0], *t.shape[1:])])
    return out


@dataclass(frozen=True)
class TPRun:
    """What :func:`compare_with_reference` trains, on both sides (its keyword arguments)."""

    sp: bool = False  # sequence parallelism on the tp group
    steps: int = 3  # AdamW steps
    dtype: torch.dtype = torch.float64  # fp64: only the order of additions differs
    config: LlamaConfig = TINY  # the model
    vocab_multiple: int = 128  # the vocabulary is padded to a multiple of this times tp
    global_batch: int = 2  # sequences per step; every rank sees all of them
    seq_len: int = 16
    lr: float = 1e-2
    seed: int = 0  # of the model's weights and of the batches
    reduce_norm_grads: bool = True  # False: the norms' gradients not all-reduced (a bug)
    mask_padding: bool = True  # False: the padded vocabulary rows left in the loss (a bug)
    regather: bool = False  # save this rank's shard of the gathered input, gather again later
    timeout: float = 120.0  # seconds for the launch


def _tp_rank(rank: int, world_size: int, run: TPRun, batches: list) -> Run:
    torch.manual_seed(run.seed)  # the same full model on every rank: each cuts its shard from it
    model = Llama(run.config).to(run.dtype)
    apply_tensor_parallel(
        model,
        dist.group.WORLD,
        sp=run.sp,
        vocab_multiple=run.vocab_multiple,
        reduce_norm_grads=run.reduce_norm_grads,
        regather=run.regather,
    )
    vocab = run.config.vocab_size if run.mask_padding else None
    loss_fn = tp_loss_fn(dist.group.WORLD, vocab)
    opt = adamw(run.lr)(model.parameters())
    return run_training(model, opt, batches, loss_fn=loss_fn, split=None)  # whole batch


def compare_with_reference(tp: int, run: TPRun | None = None, **options: Any) -> list[Comparison]:
    """Train ``run.steps`` AdamW steps of the tiny Llama (or ``run.config``) tensor-parallel
    over ``tp`` emulated ranks and in one process, through :mod:`minitorch_dist.reference`;
    ``options`` replace fields of ``run`` (a :class:`TPRun`; e.g. ``sp=True, steps=1``).
    Per rank, a :class:`~minitorch_dist.reference.Comparison` whose errors are named
    ``loss <k>`` (every step), ``outputs`` (this rank's logits vs its slice of the reference's),
    ``grad <name>`` (every parameter's first-step gradient vs the matching slice of the full
    one) and ``weight <name>`` (after the last step). In fp64 every error is about 1e-16.
    ``reduce_norm_grads`` and ``mask_padding`` exist to break things on purpose.
    """
    run = replace(run or TPRun(), **options)
    config = TINY if run.config is None else run.config
    check_int("tp", tp)
    check_int("steps", run.steps)
    check_bool("sp", run.sp)
    check_tp_config(config, tp)
    rows = padded_vocab_size(config.vocab_size, tp, run.vocab_multiple)
    batches = make_batches(config.vocab_size, run.global_batch, run.seq_len, run.steps, run.seed)
    ref = reference_run(
        lambda: Llama(config),
        adamw(run.lr),
        batches,
        seed=run.seed,
        dtype=run.dtype,
        loss_fn=full_cross_entropy,
        grads=lambda m, o: _padded(param_grads(m), rows),
        weights=lambda m, o: _padded(param_values(m), rows),
    )
    ref.outputs = F.pad(ref.outputs, (0, rows - config.vocab_size))  # padded logits are 0
    runs = launch(_tp_rank, tp, replace(run, config=config), batches, timeout=run.timeout)
    # every rank sees the whole batch: its own loss is the reference's, its logits a slice
    holding = Holding(
        outputs=lambda rank: Shard(-1, rank, tp),
        shards=lambda rank: tp_shards(config, rank, tp),
        losses="each",
    )
    return compare_runs(runs, ref, holding=holding)
