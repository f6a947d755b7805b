"""What the lab and chapter 7 call: tensor parallelism against the single-process reference, its
bytes counted against :func:`tp_bytes` and its stored activations against
:func:`tp_activation_bytes` (one Block: :mod:`~minitorch_dist.tensor_parallel.measure_block`,
re-exported here). Every function runs its ranks with :func:`minitorch_dist.launch`.
"""

from __future__ import annotations

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
from minitorch_dist.tensor_parallel.model import (
    apply_tensor_parallel,
    check_tp_config,
    tp_loss_fn,
    tp_shards,
)

__all__ = [
    "compare_with_reference",
    "count_tp_bytes",
    "full_cross_entropy",
    "measure_tp_activations",
    "TINY",
]


def _padded(tensors: dict[str, torch.Tensor], rows: int) -> dict[str, torch.Tensor]:
    """The embedding and head tensors padded with zero rows to the padded vocabulary."""
    out = dict(tensors)
    for name in ("embed.weight", "head.weight"):
        t = out[name]
        out[name] = torch.cat([t, t.new_zeros(rows - t.shape[0], *t.shape[1:])])
    return out


def _tp_rank(
    rank: int,
    world_size: int,
    config: LlamaConfig,
    batches: list,
    sp: bool,
    dtype: torch.dtype,
    vocab_multiple: int,
    lr: float,
    seed: int,
    reduce_norm_grads: bool,
    mask_padding: bool,
    regather: bool,
) -> Run:
    torch.manual_seed(seed)  # the same full model on every rank: each cuts its shard from it
    model = Llama(config).to(dtype)
    apply_tensor_parallel(
        model,
        dist.group.WORLD,
        sp=sp,
        vocab_multiple=vocab_multiple,
        reduce_norm_grads=reduce_norm_grads,
        regather=regather,
    )
    loss_fn = tp_loss_fn(dist.group.WORLD, config.vocab_size if mask_padding else None)
    opt = adamw(lr)(model.parameters())
    return run_training(model, opt, batches, loss_fn=loss_fn, split=None)  # whole batch


def compare_with_reference(
    tp: int,
    *,
    sp: bool = False,
    steps: int = 3,
    dtype: torch.dtype = torch.float64,
    config: LlamaConfig | None = None,
    vocab_multiple: int = 128,
    global_batch: int = 2,
    seq_len: int = 16,
    lr: float = 1e-2,
    seed: int = 0,
    reduce_norm_grads: bool = True,
    mask_padding: bool = True,
    regather: bool = False,
    timeout: float = 120.0,
) -> list[Comparison]:
    """Train ``steps`` AdamW steps of the tiny Llama (or ``config``) tensor-parallel over ``tp``
    emulated ranks and in one process, through :mod:`minitorch_dist.reference`; per rank, a
    :class:`~minitorch_dist.reference.Comparison` whose errors are named ``loss`` (every step),
    ``outputs`` (this rank's logits vs its slice of the reference's), ``grad <name>`` (every
    parameter's first-step gradient vs the matching slice of the full one) and ``weight <name>``
    (after the last step). In fp64 every error is about 1e-16. ``reduce_norm_grads`` and
    ``mask_padding`` exist to break things on purpose.
    """
    config = TINY if config is None else config
    check_int("tp", tp)
    check_int("steps", steps)
    check_bool("sp", sp)
    check_tp_config(config, tp)
    rows = padded_vocab_size(config.vocab_size, tp, vocab_multiple)
    batches = make_batches(config.vocab_size, global_batch, seq_len, steps, seed)
    ref = reference_run(
        lambda: Llama(config),
        adamw(lr),
        batches,
        seed=seed,
        dtype=dtype,
        loss_fn=full_cross_entropy,
        grads=lambda m, o: _padded(param_grads(m), rows),
        weights=lambda m, o: _padded(param_values(m), rows),
    )
    ref.outputs = F.pad(ref.outputs, (0, rows - config.vocab_size))  # padded logits are 0
    runs = launch(
        _tp_rank,
        tp,
        config,
        batches,
        sp,
        dtype,
        vocab_multiple,
        lr,
        seed,
        reduce_norm_grads,
        mask_padding,
        regather,
        timeout=timeout,
    )
    # every rank sees the whole batch: its own loss is the reference's, its logits a slice
    holding = Holding(
        outputs=lambda rank: Shard(-1, rank, tp),
        shards=lambda rank: tp_shards(config, rank, tp),
        losses="each",
    )
    return compare_runs(runs, ref, holding=holding)
