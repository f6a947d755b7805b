"""Mutants of a second class of mistake for tasks whose other mutants cover one (see
tests/test_mutants.py for what a mutant is and how it is run): a shard rounded down, a policy
that keeps what it should drop, a result in the wrong order, a forgotten scale factor, a floor
ignored, a buffer left out. Each message is the graded test's own, naming the mistake.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from mutants_common import Mutant
from mutants_lookups import (
    _all_reduce_in_place,
    _apply_names_only,
    _checkpoint_plain_call,
    _offload_init_on_device,
    _stage1_all_reduce,
    _stage2_all_reduce,
    _update_like_grad_scaler,
)

from minitorch_dist.memory.estimate import activation_bytes as _activation_bytes
from minitorch_dist.memory.estimate import bytes_per_param as _bytes_per_param
from minitorch_dist.memory.estimate import model_state_bytes as _model_state_bytes
from minitorch_dist.models.capacity import expert_capacity as _expert_capacity
from minitorch_dist.models.routing import top_k_route as _top_k_route

_SHARDED = {
    0: (),
    1: ("optimizer",),
    2: ("grads", "optimizer"),
    3: ("params", "grads", "optimizer"),
}


# -- lab01.1: the shard rounded down -----------------------------------------------------------
def _states_shard_floor(
    num_params, *, zero_stage=0, dp=1, recipe="mixed", optimizer="adam", offload=False
):  # noqa: ANN001, ANN202
    got = dict(
        _model_state_bytes(
            num_params,
            zero_stage=zero_stage,
            dp=dp,
            recipe=recipe,
            optimizer=optimizer,
            offload=offload,
        )
    )
    per = _bytes_per_param(recipe, optimizer)
    for part in _SHARDED[zero_stage]:
        key = "offloaded" if part == "optimizer" and offload else part
        got[key] = per[part] * (num_params // dp)  # floor: the last rank's padding forgotten
    got["total"] = got["params"] + got["grads"] + got["optimizer"]
    return got


# -- lab01.2: selective recomputation that keeps the attention scores ----------------------------
def _selective_keeps_scores(**kwargs):  # noqa: ANN003, ANN202
    if kwargs.get("recompute") == "selective":
        kwargs["recompute"] = "none"  # the 5 a s^2 b of scores stays stored
    return _activation_bytes(**kwargs)


# -- lab02.4: the per-tensor scale without the format's maximum ----------------------------------
def _scale_is_amax(x, dtype=torch.float8_e4m3fn):  # noqa: ANN001, ANN202
    amax = x.detach().abs().max().float()
    scale = torch.where(amax > 0, amax, torch.ones_like(amax))  # not divided by the format max
    return (x.float() / scale).to(dtype), scale


# -- lab05.2: the broadcast skips the buffers ------------------------------------------------------
def _broadcast_parameters_only(module, group=None) -> None:  # noqa: ANN001
    src = dist.get_global_rank(group, 0) if group is not None else 0
    with torch.no_grad():
        for tensor in module.parameters():  # buffers (running stats, masks) left out
            dist.broadcast(tensor.detach(), src=src, group=group)


# -- lab10.1: the experts sorted by index --------------------------------------------------------
def _top_k_experts_by_index(logits, k, *, normalize=True):  # noqa: ANN001, ANN202
    weights, experts, probs = _top_k_route(logits, k, normalize=normalize)
    experts, order = experts.sort(-1)  # ascending expert index, not by probability
    return weights.gather(-1, order), experts, probs


# -- lab10.2: min_capacity ignored -----------------------------------------------------------------
def _capacity_without_min(tokens, experts, capacity_factor=1.0, *, top_k=1, min_capacity=0):  # noqa: ANN001, ANN202
    return _expert_capacity(tokens, experts, capacity_factor, top_k=top_k)  # no floor


# -- lab10.3: the backward's all-to-all with the forward's splits ---------------------------------
@staticmethod
def _all_to_all_backward_not_swapped(ctx, grad):  # noqa: ANN001, ANN205
    send_splits, recv_splits = ctx.splits
    out = grad.new_empty((sum(send_splits), *grad.shape[1:]))
    dist.all_to_all_single(out, grad.contiguous(), recv_splits, send_splits, group=ctx.group)
    return out, None, None, None  # the forward's splits: sizes disagree with the rows held


MUTANTS_CLASSES: list[Mutant] = [
    Mutant(
        "lab01.1",
        "zero-shard-floor",
        "minitorch_dist.memory.estimate:model_state_bytes",
        _states_shard_floor,
        r"padded to ceil\(P / N\)",
    ),
    Mutant(
        "lab01.2",
        "selective-keeps-scores",
        "minitorch_dist.memory.estimate:activation_bytes",
        _selective_keeps_scores,
        r"selective recomputation still stores the 5 a s\^2 b",
    ),
    Mutant(
        "lab02.4",
        "scale-without-format-max",
        "minitorch_dist.precision.fp8:quantize_per_tensor",
        _scale_is_amax,
        r"not divided by the format's largest value",
    ),
    Mutant(
        "lab05.2",
        "broadcast-skips-buffers",
        "minitorch_dist.data_parallel.naive:broadcast_parameters",
        _broadcast_parameters_only,
        r"and the module.s buffers too must be copied",
    ),
    Mutant(
        "lab10.1",
        "experts-by-index",
        "minitorch_dist.models.routing:top_k_route",
        _top_k_experts_by_index,
        r"largest probability first, not by expert index",
    ),
    Mutant(
        "lab10.2",
        "min-capacity-ignored",
        "minitorch_dist.models.capacity:expert_capacity",
        _capacity_without_min,
        r"min_capacity is a floor on C",
    ),
    Mutant(
        "lab02.2",
        "growth-past-fp32-max",
        "minitorch_dist.precision.loss_scaling:DynamicLossScaler.update",
        _update_like_grad_scaler,
        r"grows only while S x growth_factor stays finite",
    ),
    Mutant(
        "lab03.1",
        "not-checkpointed",
        "minitorch_dist.recompute.checkpoint:checkpoint",
        _checkpoint_plain_call,
        r"recorded the inside of the function|must run once, under torch.no_grad",
    ),
    Mutant(
        "lab03.2",
        "picked-not-wrapped",
        "minitorch_dist.recompute.policies:apply_activation_checkpointing",
        _apply_names_only,
        r"runs it under checkpoint|nothing recomputes",
    ),
    Mutant(
        "lab05.1",
        "library-all-reduce",
        "minitorch_dist.comm.ring:ring_reduce_scatter",
        _all_reduce_in_place,
        r"the reduce-scatter sent 0 bytes, the ring sends",
    ),
    Mutant(
        "lab06.1",
        "all-reduce-not-reduce-scatter",
        "minitorch_dist.zero.stage1:ZeroStage1._reduce_gradients",
        _stage1_all_reduce,
        r"an all-reduce sends twice",
    ),
    Mutant(
        "lab06.2",
        "whole-gradient-all-reduced",
        "minitorch_dist.zero.stage2:UnitwiseGradients._reduce_unit",
        _stage2_all_reduce,
        r"an all-reduce sends twice",
    ),
    Mutant(
        "lab06.4",
        "states-on-the-device",
        "minitorch_dist.zero.offload:CpuOffloadAdam.__init__",
        _offload_init_on_device,
        r"optimizer bytes: with offload",
    ),
    Mutant(
        "lab10.3",
        "backward-splits-not-swapped",
        "minitorch_dist.expert_parallel.dispatch:AllToAll.backward",
        _all_to_all_backward_not_swapped,
        r"the forward's splits swapped \(recv_splits going, send_splits coming\)",
    ),
]
