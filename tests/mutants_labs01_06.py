"""Mutants of labs 1–6's tasks (see tests/test_mutants.py for what a mutant is and how it is run).

Each wrong implementation is the reference's body with ONE mistake a student would make, marked
``# the mistake``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import weakref
from typing import Any

import torch
from mutants_common import Mutant
from torch import nn

from minitorch_dist.accumulate.accumulate import (
    IGNORE_INDEX,
    _check_micro_batches,
    count_tokens,
    split_micro_batches,
)
from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.memory.track import CATEGORIES, MemoryTracker
from minitorch_dist.models import Attention, cross_entropy, synthetic_batch
from minitorch_dist.precision.formats import Fields, _check_fields, get_format, is_nan
from minitorch_dist.recompute.checkpoint import checkpoint
from minitorch_dist.recompute.policies import _FLAG, resolve_policy
from minitorch_dist.zero.stage3 import FREE, GATHERING


# -- lab01.1: model states -------------------------------------------------------------------
def _bytes_per_param_no_fp32_grad_buffer(recipe: str = "mixed", optimizer: str = "adam") -> dict:
    params, grads, master = {"mixed": (2, 2, 4), "mixed_fp32_grads": (2, 2, 4), "fp32": (4, 4, 0)}[
        recipe
    ]  # the mistake: mixed_fp32_grads keeps 2 bytes of grads, its fp32 buffer forgotten
    states = {"adam": 2, "sgd": 0, "sgd_momentum": 1}[optimizer]
    optim = master + 4 * states
    return {"params": params, "grads": grads, "optimizer": optim, "total": params + grads + optim}


# -- lab01.2: activations --------------------------------------------------------------------
def _activation_bytes_tp_splits_everything(
    *,
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    layers: int = 1,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    cp: int = 1,
) -> int:
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    sbh = s * b * h
    if recompute == "full":
        return layers * (2 * sbh // t if sp else 2 * sbh)
    scores = 5 * a * s * s * b // t if recompute == "none" else 0
    per_layer = 34 * sbh // t  # the mistake: the replicated 10sbh divided by t without sp
    return layers * (per_layer + scores) // cp


# -- lab01.3: the tracker --------------------------------------------------------------------
def _track_counted_once(self, tensor, category: str, *, refile: bool = True) -> None:  # noqa: ANN001
    check_choice("category", category, CATEGORIES)
    storage = tensor if isinstance(tensor, torch.UntypedStorage) else tensor.untyped_storage()
    key = id(storage)
    entry = self._live.get(key)
    if entry is not None:  # the mistake: a storage seen before is never re-measured
        if refile and entry[0] != category:
            self._bytes[entry[0]] -= entry[1]
            self._bytes[category] += entry[1]
            entry[0] = category
        return
    entry = self._live[key] = [category, storage.nbytes()]
    weakref.finalize(storage, self._free, key).atexit = False
    self._bytes[category] += entry[1]
    self._total += entry[1]
    if self._total > self.peak_total:
        self.peak_total, self._peak = self._total, dict(self._bytes)


# -- lab02.1: float formats ------------------------------------------------------------------
def _decode_subnormal_exponent_minus_bias(fields, fmt) -> float:  # noqa: ANN001
    f = get_format(fmt)
    fields = Fields(*fields)
    _check_fields(fields, f)
    s, e, m = fields
    sign = -1.0 if s else 1.0
    if is_nan(fields, f):
        return math.nan
    if f.has_inf and e == 2**f.exponent_bits - 1:
        return sign * math.inf
    if e == 0:  # the mistake: 0.m * 2^(-B), the subnormals' exponent taken as 0 - B, not 1 - B
        return sign * math.ldexp(m, -f.bias - f.mantissa_bits)
    return sign * math.ldexp(2**f.mantissa_bits + m, e - f.bias - f.mantissa_bits)


# -- lab02.2: loss scaling -------------------------------------------------------------------
def _update_keeps_counting_after_overflow(self, found_inf: bool | None = None) -> None:  # noqa: ANN001
    if found_inf is None:
        found_inf = self._found_inf
    if found_inf:
        self._scale *= self.backoff_factor  # the mistake: growth_tracker not reset
    else:
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            if self._scale * self.growth_factor <= torch.finfo(torch.float32).max:
                self._scale *= self.growth_factor
            self.growth_tracker = 0
    self._found_inf = None


# -- lab02.3: the mixed-precision optimizer --------------------------------------------------
@torch.no_grad()
def _mixed_step_on_overflow(self) -> bool:  # noqa: ANN001
    pairs = self.pairs
    masters = [master for _, master in pairs]
    if not self.fp32_grads:
        for p, master in pairs:
            master.grad = None if p.grad is None else p.grad.to(torch.float32, copy=True)
    if self.loss_scaler is not None:
        found_inf = self.loss_scaler.unscale_(m.grad for m in masters)
        self.loss_scaler.update(found_inf)  # the mistake: the step is taken even on inf/NaN
    if self.max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(masters, self.max_grad_norm)
    self.optimizer.step()
    for p, master in pairs:
        p.copy_(master)
    if not self.fp32_grads:
        for master in masters:
            master.grad = None
    return True


# -- lab02.4: fp8 block scaling --------------------------------------------------------------
def _quantize_blockwise_no_transpose(x, block=(1, 128), dtype=torch.float8_e4m3fn):  # noqa: ANN001, ANN202
    r, c = block
    top = torch.finfo(dtype).max
    m, n = x.shape
    # the mistake: (m/r, n/c, r, c) straight from a reshape: tiles mix rows of different blocks
    blocks = x.detach().float().reshape(m // r, n // c, r, c)
    amax = blocks.abs().amax(dim=(2, 3))  # (m/r, n/c)
    scales = torch.where(amax > 0, amax / top, torch.ones_like(amax))
    q = (blocks / scales[:, :, None, None]).to(dtype).reshape(m, n)
    return q, scales


# -- lab03.1: checkpoint ---------------------------------------------------------------------
def _checkpoint_backward_new_masks(ctx: Any, *grad_outputs: torch.Tensor):  # noqa: ANN205
    saved = iter(ctx.saved_tensors)
    inputs = []
    for is_tensor, other in zip(ctx.is_tensor, ctx.others):
        if is_tensor:
            t = next(saved)
            inputs.append(t.detach().requires_grad_(t.requires_grad))
        else:
            inputs.append(other)
    devices = ctx.devices if ctx.preserve_rng_state else []
    with torch.random.fork_rng(devices=devices, enabled=ctx.preserve_rng_state):
        # the mistake: the RNG state saved in forward is never set back before recomputing
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    pairs = [
        (o, g)
        for o, g in zip(outputs, grad_outputs)
        if isinstance(o, torch.Tensor) and o.requires_grad and g is not None
    ]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    grads = tuple(x.grad if isinstance(x, torch.Tensor) else None for x in inputs)
    return (None, None, *grads)


# -- lab03.2: applying a policy --------------------------------------------------------------
def _apply_checkpointing_nested(model, policy="full", *, preserve_rng_state=True):  # noqa: ANN001, ANN202
    chosen = resolve_policy(policy)
    wrapped: list[str] = []
    for name, module in model.named_modules():
        if not chosen(name, module):  # the mistake: modules inside a wrapped one wrapped again
            continue
        forward = type(module).forward

        def checkpointed(*args, _module=module, _forward=forward, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            run = functools.partial(_forward, _module, **kwargs)
            return checkpoint(run, *args, preserve_rng_state=preserve_rng_state)

        module.forward = checkpointed
        setattr(module, _FLAG, True)
        wrapped.append(name)
    return wrapped


# -- lab03.3: the selective policy -----------------------------------------------------------
def _selective_policy_whole_attention(name: str, module: nn.Module) -> bool:
    return isinstance(module, Attention)  # the mistake: the projections recomputed too


# -- lab04.1: the token-weighted step --------------------------------------------------------
def _accumulation_mean_of_means(model, micro_batches, *, ignore_index=IGNORE_INDEX, no_sync=None):  # noqa: ANN001, ANN202
    _check_micro_batches(micro_batches, ignore_index)
    tokens = sum(count_tokens(t, ignore_index) for _, t in micro_batches)
    losses = []
    last = len(micro_batches) - 1
    for i, (inputs, targets) in enumerate(micro_batches):
        sync = no_sync() if no_sync is not None and i < last else contextlib.nullcontext()
        with sync:  # the mistake: each micro-batch's mean loss / the number of micro-batches
            loss = cross_entropy(model(inputs), targets, ignore_index) / len(micro_batches)
            loss.backward()
        losses.append(loss.detach())
    return {
        "loss": torch.stack(losses).sum(),
        "tokens": tokens,
        "micro_batches": len(micro_batches),
    }


# -- lab04.2: accumulation with recomputation ------------------------------------------------
def _measure_accumulation_policy_ignored(
    config, *, micro_batch, grad_acc, seq_len, policy="full", seed=0
):  # noqa: ANN001, ANN202
    from minitorch_dist.accumulate.accumulate import accumulation_step
    from minitorch_dist.recompute.measure import build_model

    check_int("micro_batch", micro_batch)
    check_int("grad_acc", grad_acc)
    model = build_model(config, policy="none", seed=seed)  # the mistake: `policy` not passed on
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs, targets = synthetic_batch(config.vocab_size, micro_batch * grad_acc, seq_len, seed=seed)
    micro_batches = split_micro_batches(inputs, targets, grad_acc)
    with MemoryTracker(model, optimizer) as tracker:
        out = accumulation_step(model, micro_batches)
        optimizer.step()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return {
        "peak_total": tracker.peak_total,
        "peak": tracker.peak(),
        "loss": float(out["loss"]),
        "tokens": out["tokens"],
        "grads": grads,
    }


# -- lab05.3: bucketed data parallelism ------------------------------------------------------
def _grad_ready_launch_on_last_slot(self, param) -> None:  # noqa: ANN001
    b, i = self._where[id(param)]
    bucket = self.buckets[b]
    bucket.slot(i).copy_(param.grad)
    bucket.ready[i] = True
    # the mistake: "the bucket's last parameter arrived, so the bucket is full" -- gradients
    # need not arrive in bucket order
    if b == self._next and i == len(bucket.params) - 1:
        self._launch(self._next)
        self._next += 1
        while self._next < len(self.buckets) and all(self.buckets[self._next].ready):
            self._launch(self._next)
            self._next += 1


def _bucketed_sync_offset_not_advanced(self) -> None:  # noqa: ANN001
    if not self._start_sync():
        return
    for bucket in self.buckets:
        bucket.work.wait()
        bucket.buffer.div_(self.world_size)
        offset = 0
        for p in bucket.params:  # the mistake: offset never advanced past each gradient
            p.grad = bucket.buffer[offset : offset + p.numel()].view_as(p)
        bucket.ready = [False] * len(bucket.params)
        bucket.work = None
    self._next = 0
    self._end_sync()


# -- lab06.3: ZeRO-3 ---------------------------------------------------------------------------
def _free_without_resize(self, unit) -> None:  # noqa: ANN001
    if unit.state == GATHERING:
        unit.work.wait()
        unit.work = None
    unit.state = FREE  # the mistake: marked free, but its storage is never resized to 0


# -- lab06.4: offload --------------------------------------------------------------------------
@torch.no_grad()
def _offload_step_no_copy_back(self) -> None:  # noqa: ANN001
    for master, shard in zip(self.masters, self.shards):
        master.grad = shard.grad.to("cpu", torch.float32, copy=True)
    self.optimizer.step()
    for master in self.masters:  # the mistake: the updated masters never go back to the shards
        master.grad = None


_DDP = "minitorch_dist.data_parallel.bucketed:DataParallelBucket"
MUTANTS_LABS01_06: list[Mutant] = [
    Mutant(
        "lab01.1",
        "no-fp32-grad-buffer",
        "minitorch_dist.memory.estimate:bytes_per_param",
        _bytes_per_param_no_fp32_grad_buffer,
        r"fp32 gradient accumulation buffer is missing",
    ),
    Mutant(
        "lab01.2",
        "tp-splits-replicated",
        "minitorch_dist.memory.estimate:activation_bytes",
        _activation_bytes_tp_splits_everything,
        r"10sbh .* replicated",
    ),
    Mutant(
        "lab01.3",
        "not-remeasured",
        "minitorch_dist.memory.track:MemoryTracker.track",
        _track_counted_once,
        r"resized in place .* must be re-measured",
    ),
    Mutant(
        "lab02.1",
        "subnormal-exponent",
        "minitorch_dist.precision.formats:decode",
        _decode_subnormal_exponent_minus_bias,
        r"subnormal .*2\^\(1 - B\)",
    ),
    Mutant(
        "lab02.2",
        "count-not-restarted",
        "minitorch_dist.precision.loss_scaling:DynamicLossScaler.update",
        _update_keeps_counting_after_overflow,
        r"overflow must restart the count",
    ),
    Mutant(
        "lab02.3",
        "steps-on-overflow",
        "minitorch_dist.precision.mixed:MixedPrecisionOptimizer.step",
        _mixed_step_on_overflow,
        r"inf gradient must be skipped",
    ),
    Mutant(
        "lab02.4",
        "blocks-without-transpose",
        "minitorch_dist.precision.fp8:quantize_blockwise",
        _quantize_blockwise_no_transpose,
        r"not the amax of its own|tiles cut along the wrong axes",
    ),
    Mutant(
        "lab03.1",
        "rng-not-restored",
        "minitorch_dist.recompute.checkpoint:CheckpointFunction.backward",
        staticmethod(_checkpoint_backward_new_masks),
        r"new dropout masks",
    ),
    Mutant(
        "lab03.2",
        "nested-wrapped",
        "minitorch_dist.recompute.policies:apply_activation_checkpointing",
        _apply_checkpointing_nested,
        r"inside one already wrapped",
    ),
    Mutant(
        "lab03.3",
        "whole-attention",
        "minitorch_dist.recompute.policies:selective_policy",
        _selective_policy_whole_attention,
        r"only the attention core",
    ),
    Mutant(
        "lab04.1",
        "mean-of-means",
        "minitorch_dist.accumulate.accumulate:accumulation_step",
        _accumulation_mean_of_means,
        r"mean of the micro-batches' mean losses",
    ),
    Mutant(
        "lab04.2",
        "policy-ignored",
        "minitorch_dist.accumulate.measure:measure_accumulation",
        _measure_accumulation_policy_ignored,
        r"not checkpointed by `policy`",
    ),
    Mutant(
        "lab05.3",
        "launch-before-ready",
        f"{_DDP}._grad_ready",
        _grad_ready_launch_on_last_slot,
        r"launched before all its gradients",
    ),
    Mutant(
        "lab05.3",
        "offset-not-advanced",
        f"{_DDP}.finish_gradient_synchronization",
        _bucketed_sync_offset_not_advanced,
        r"wrong bucket offset",
    ),
    Mutant(
        "lab06.3",
        "never-freed",
        "minitorch_dist.zero.stage3:ZeroStage3._free",
        _free_without_resize,
        r"never freed",
    ),
    Mutant(
        "lab06.4",
        "no-copy-back",
        "minitorch_dist.zero.offload:CpuOffloadAdam.step",
        _offload_step_no_copy_back,
        r"never moved: the update stayed on the CPU",
    ),
]
