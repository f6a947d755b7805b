"""Mutants of a second class of mistake for tasks whose other mutants cover one (see
tests/test_mutants.py for what a mutant is and how it is run): a shard rounded down, a policy
that keeps what it should drop, a result in the wrong order, a forgotten scale factor, a floor
ignored, a buffer left out. Each message is the graded test's own, naming the mistake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib

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

from minitorch_dist.accumulate import measure as _accumulate_measure
from minitorch_dist.accumulate.accumulate import count_tokens, token_loss_sum
from minitorch_dist.comm.collectives import all_reduce_copy
from minitorch_dist.comm.groups import group_rank, group_size
from minitorch_dist.context_parallel import ring as _ring
from minitorch_dist.context_parallel.blocks import (
    block_attention,
    block_attention_backward,
    merge_partials,
)
from minitorch_dist.memory.estimate import activation_bytes as _activation_bytes
from minitorch_dist.memory.estimate import bytes_per_param as _bytes_per_param
from minitorch_dist.memory.estimate import model_state_bytes as _model_state_bytes
from minitorch_dist.models.capacity import expert_capacity as _expert_capacity
from minitorch_dist.models.llama import Block
from minitorch_dist.models.routing import top_k_route as _top_k_route
from minitorch_dist.pipeline.schedules import Action
from minitorch_dist.pipeline.simulate import simulate as _simulate
from minitorch_dist.planner.fit import rank_memory as _rank_memory
from minitorch_dist.precision import formats
from minitorch_dist.precision.formats import encode as _encode
from minitorch_dist.tensor_parallel.functions import reduce_from_tp

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


# -- lab02.1: encode cuts the mantissa off -------------------------------------------------------
def _encode_truncates(x, fmt):  # noqa: ANN001, ANN202
    f = formats.get_format(fmt)
    fields = _encode(x, f)
    value = formats.decode(fields, f)
    if abs(value) > abs(x) and fields_ok(fields):  # rounded up: take the pattern below
        bits = formats.fields_to_bits(fields, f) - 1
        fields = formats.bits_to_fields(bits, f)
    return fields


def fields_ok(fields) -> bool:  # noqa: ANN001
    return fields.exponent > 0 or fields.mantissa > 0


# -- lab02.3: clipping the scaled gradients ------------------------------------------------------
@torch.no_grad()
def _clip_before_unscale(self) -> bool:  # noqa: ANN001
    pairs = self.pairs
    masters = [master for _, master in pairs]
    if not self.fp32_grads:
        for p, master in pairs:
            master.grad = None if p.grad is None else p.grad.to(torch.float32, copy=True)
    if self.max_grad_norm is not None:  # clipped while still multiplied by S
        torch.nn.utils.clip_grad_norm_(masters, self.max_grad_norm)
    stepped = True
    if self.loss_scaler is not None:
        found_inf = self.loss_scaler.unscale_(m.grad for m in masters)
        self.loss_scaler.update(found_inf)
        stepped = not found_inf
    if stepped:
        self.optimizer.step()
        for p, master in pairs:
            p.copy_(master)
    return stepped


# -- lab03.3: the selective policy picks whole blocks ------------------------------------------------
def _selective_picks_blocks(name, module) -> bool:  # noqa: ANN001
    return isinstance(module, Block)  # the full policy's choice


# -- lab04.1: the last micro-batch inside no_sync too -----------------------------------------------
def _accumulation_all_in_no_sync(model, micro_batches, *, ignore_index=-100, no_sync=None):  # noqa: ANN001, ANN202
    tokens = sum(count_tokens(t, ignore_index) for _, t in micro_batches)
    losses = []
    for inputs, targets in micro_batches:
        with no_sync() if no_sync is not None else contextlib.nullcontext():  # the last too
            loss = token_loss_sum(model(inputs), targets, ignore_index) / tokens
            loss.backward()
        losses.append(loss.detach())
    return {"loss": torch.stack(losses).sum(), "tokens": tokens, "micro_batches": len(losses)}


# -- lab05.3: the cap checked before adding the tensor ---------------------------------------------
def _buckets_cap_checked_first(tensors, bucket_cap_bytes):  # noqa: ANN001, ANN202
    buckets, size = [], 0
    for i, t in enumerate(tensors):
        first = tensors[buckets[-1][0]] if buckets else None
        if first is not None and size < bucket_cap_bytes and t.dtype == first.dtype:
            buckets[-1].append(i)  # room left before adding: the bucket overflows the cap
        else:
            buckets.append([i])
            size = 0
        size += t.numel() * t.element_size()
    return buckets


# -- lab08.4: positions of the shard's own places ---------------------------------------------------
def _positions_local(seq_len, rank, world_size, *, layout="zigzag"):  # noqa: ANN001, ANN202
    return torch.arange(seq_len // world_size)  # 0..s/cp - 1, not the tokens' places


# -- lab09.2: the interleaved schedule with 1F1B's warm-up ------------------------------------------
def _interleaved_1f1b_warmup(rank, pp, m, v):  # noqa: ANN001, ANN202
    total = m * v

    def unit(k: int, backward: bool) -> tuple[int, int]:
        group, within = divmod(k, pp * v)
        chunk = within // pp
        return group * pp + within % pp, (v - 1 - chunk) if backward else chunk

    warmup = min(pp - rank - 1, total)  # 1F1B's warm-up, not 2 (p - r - 1) + (v - 1) p
    actions = [Action("F", *unit(k, False)) for k in range(warmup)]
    for i in range(total - warmup):
        actions += [Action("F", *unit(warmup + i, False)), Action("B", *unit(i, True))]
    actions += [Action("B", *unit(k, True)) for k in range(total - warmup, total)]
    return actions


# -- lab09.3: a clock that runs one action at a time ----------------------------------------------
def _simulate_serialised(schedule, t_forward=1.0, t_backward=2.0, t_weight=None):  # noqa: ANN001, ANN202
    result = _simulate(schedule, t_forward, t_backward, t_weight)
    return dataclasses.replace(result, makespan=sum(result.busy))  # the ranks never overlap


# -- lab12.1: every stage's memory taken as the last stage's -----------------------------------------
def _rank_memory_last_stage(
    model, config, *, seq_len, global_batch, stage=0, activations="korthikanti"
):  # noqa: ANN001, ANN202, E501
    last = config.pp - 1  # one micro-batch in flight and the head, on every stage
    return _rank_memory(
        model,
        config,
        seq_len=seq_len,
        global_batch=global_batch,
        stage=last,
        activations=activations,
    )


# -- lab12.2: ties left in the input order ------------------------------------------------------------
def _rank_ties_in_input_order(rows):  # noqa: ANN001, ANN202
    fitting = sorted((r for r in rows if r.fits), key=lambda r: r.time.total)  # stable: input order
    return fitting + [r for r in rows if not r.fits]


# -- lab00.1: the sum in a new tensor --------------------------------------------------------------
def _halves_not_in_place(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.clone()  # a copy reduced: the caller's tensor keeps its own values
    dist.all_reduce(out)
    return out


# -- lab01.3: dead storages stay on the books -----------------------------------------------------
def _free_nothing(self, key: int) -> None:  # noqa: ANN001
    return None  # the finalizer runs, but the bytes are never taken off


# -- lab04.2: the loop over micro-batches runs once ---------------------------------------------------
def _measure_one_micro_batch(config, *, micro_batch, grad_acc, seq_len, policy="full", seed=0):  # noqa: ANN001, ANN202
    return _original_measure(
        config, micro_batch=micro_batch, grad_acc=1, seq_len=seq_len, policy=policy, seed=seed
    )


_original_measure = _accumulate_measure.measure_accumulation


# -- lab06.3: no prefetch ------------------------------------------------------------------------------
def _pre_forward_no_prefetch(self, unit, module, args) -> None:  # noqa: ANN001
    if not self._in_backward:
        self._seen.append(unit)
    self._gather(unit)  # the next unit is gathered only when its own forward asks


# -- lab07.1: f's backward averages -------------------------------------------------------------------
@staticmethod
def _f_backward_averaged(ctx, grad):  # noqa: ANN001, ANN205
    return all_reduce_copy(grad, ctx.group) / dist.get_world_size(ctx.group), None  # a mean


# -- lab07.2: the row-parallel block of the next rank --------------------------------------------
@classmethod
def _row_block_of_next_rank(cls, linear, group, *, sp=False):  # noqa: ANN001, ANN206
    t, r = group_size(group), group_rank(group)
    cols = linear.in_features // t
    r = (r + 1) % t  # off by one: the neighbour's block
    weight = linear.weight.detach()[:, r * cols : (r + 1) * cols].clone()
    bias = linear.bias.detach().clone() if linear.bias is not None else None
    return cls(
        weight, bias, group, in_features=linear.in_features, out_features=linear.out_features, sp=sp
    )


# -- lab07.4: other ranks' ids not zeroed -------------------------------------------------------------
def _embedding_others_not_zeroed(self, ids):  # noqa: ANN001, ANN202
    mine = (ids >= self.start) & (ids < self.start + self.weight.shape[0])
    local = torch.where(mine, ids - self.start, 0)
    out = torch.nn.functional.embedding(local, self.weight)  # row 0 for every id not mine
    return reduce_from_tp(out, self.group)


# -- lab08.1: no guard where both parts saw no key ------------------------------------------------------
def _merge_unguarded(out_a, lse_a, out_b, lse_b):  # noqa: ANN001, ANN202
    lse = torch.logaddexp(lse_a, lse_b)
    w_a = torch.exp(lse_a - lse).unsqueeze(-1)  # -inf - -inf = NaN on a row masked in both
    w_b = torch.exp(lse_b - lse).unsqueeze(-1)
    return w_a * out_a + w_b * out_b, lse


# -- lab09.4: every W held back to the end -----------------------------------------------------------
def _zb_h1_all_w_at_the_end(rank, pp, m, v):  # noqa: ANN001, ANN202
    warmup = min(pp - rank - 1, m)
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(m):
        if warmup + i < m:
            actions.append(Action("F", warmup + i))
        actions.append(Action("B", i))
    return actions + [Action("W", j) for j in range(m)]  # every W delayed: memory grows


# -- lab10.4: received rows taken as grouped by expert, not by source -----------------------------------
def _dropless_rows_by_expert(self, flat, indices):  # noqa: ANN001, ANN202
    ep_layer = importlib.import_module("minitorch_dist.expert_parallel.layer")

    k, per = indices.shape[1], self.cfg.experts // self.ep
    choices = indices.reshape(-1)
    order = torch.sort(choices, stable=True).indices
    x_sorted = flat[order // k]
    counts = torch.bincount(choices, minlength=self.cfg.experts)
    received = ep_layer.exchange_counts(counts, self.group).view(self.ep, per)
    send = counts.view(self.ep, per).sum(1).tolist()
    recv = received.sum(1).tolist()
    self.last_send_splits, self.last_recv_splits = send, recv
    rows = ep_layer.dispatch(x_sorted, send, recv, self.group)
    local_ids = torch.repeat_interleave(torch.arange(per), received.sum(0))  # transposed layout
    y_sorted = ep_layer.combine(self._run_local(rows, local_ids), send, recv, self.group)
    return y_sorted[torch.argsort(order)]


# -- lab07.5: the scatter keeps the neighbour's tokens ------------------------------------------------
@staticmethod
def _scatter_neighbours_tokens(ctx, x, group, dim):  # noqa: ANN001, ANN205
    ctx.group, ctx.dim = group, dim
    t = group_size(group)
    return x.chunk(t, dim=dim)[(group_rank(group) + 1) % t].contiguous()  # off by one rank


# -- lab07.3: f before each of wq, wk and wv ---------------------------------------------------------
def _parallelize_block_f_per_projection(block, group, *, sp=False, regather=False):  # noqa: ANN001, ANN202
    tp_model = importlib.import_module("minitorch_dist.tensor_parallel.model")
    column_cls, row_cls = tp_model.ColumnParallelLinear, tp_model.RowParallelLinear
    t, r = group_size(group), group_rank(group)
    attn, mlp = block.attn, block.mlp
    each = dict(sp=sp, enter_region=True)  # every projection enters the region: f three times
    column = dict(sp=sp, enter_region=False)
    attn.wq = column_cls.from_linear(attn.wq, group, **each)
    if attn.kv_heads % t == 0:
        attn.wk = column_cls.from_linear(attn.wk, group, **each)
        attn.wv = column_cls.from_linear(attn.wv, group, **each)
    else:
        index = r // (t // attn.kv_heads)
        for name in ("wk", "wv"):
            layer = column_cls.from_linear(
                getattr(attn, name), group, index=index, parts=attn.kv_heads, **each
            )
            tp_model.sum_replica_grads(layer.weight, group, index, attn.kv_heads)
            setattr(attn, name, layer)
    attn.wo = row_cls.from_linear(attn.wo, group, sp=sp)
    mlp.w1 = column_cls.from_linear(mlp.w1, group, **column)
    mlp.w3 = column_cls.from_linear(mlp.w3, group, **column)
    mlp.w2 = row_cls.from_linear(mlp.w2, group, sp=sp)
    attn.__class__, mlp.__class__ = tp_model.TensorParallelAttention, tp_model.TensorParallelSwiGLU
    for module in (attn, mlp):
        module.tp_group, module.sp = group, sp
    attn.regather = mlp.regather = regather and sp
    return block


# -- lab08.2: the K/V block taken for the next rank's, not the previous one's -------------------------
def _ring_forward_owner_off_by_one(
    q, k, v, *, group=None, layout="zigzag", merge=None, counter=None
):  # noqa: ANN001, ANN202, E501
    merge = merge_partials if merge is None else merge
    cp = group_size(group)
    comm, rank = _ring.RingComm(group, counter), group_rank(group)
    qs = _ring.pieces_of(q, layout)
    out = [None] * len(qs)
    for step in range(cp):
        if step < cp - 1:
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = _ring.pieces_of(k, layout), _ring.pieces_of(v, layout)
        owner = (rank + step) % cp  # the K/V came from rank - step, not rank + step
        for i, j, kind in _ring.block_plan(rank, owner, cp, layout):
            part = block_attention(qs[i], ks[j], vs[j], causal=kind == "diagonal")
            out[i] = part if out[i] is None else merge(*out[i], *part)
        if step < cp - 1:
            comm.wait()
            k, v = k_next, v_next
    return torch.cat([o for o, _ in out], dim=2), torch.cat([lse for _, lse in out], dim=2)


# -- lab08.3: the returning dK/dV buffer received but never added ---------------------------------------
def _ring_backward_shares_dropped(
    dout, q, k, v, out, lse, *, group=None, layout="zigzag", counter=None
):  # noqa: ANN001, ANN202, E501
    cp = group_size(group)
    comm, rank = _ring.RingComm(group, counter), group_rank(group)
    grads = _ring.RingComm(group, counter, tag=1)
    delta = (dout * out).sum(-1)
    qs, dos = _ring.pieces_of(q, layout), _ring.pieces_of(dout, layout)
    lses, deltas = _ring.pieces_of(lse, layout), _ring.pieces_of(delta, layout)
    dq = [torch.zeros_like(x) for x in qs]
    dk_own = dv_own = travelling = None
    for step in range(cp):
        if step < cp - 1:
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = _ring.pieces_of(k, layout), _ring.pieces_of(v, layout)
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dks, dvs = _ring.pieces_of(dk, layout), _ring.pieces_of(dv, layout)
        for i, j, kind in _ring.block_plan(rank, (rank - step) % cp, cp, layout):
            g = block_attention_backward(
                dos[i], qs[i], ks[j], vs[j], lses[i], deltas[i], causal=kind == "diagonal"
            )
            dq[i] += g[0]
            dks[j].add_(g[1])
            dvs[j].add_(g[2])
        if step == 0:
            dk_own, dv_own = dk, dv
        else:
            if travelling is not None:
                grads.wait()
                dk, dv = dk + travelling[0], dv + travelling[1]
            travelling = grads.send_recv([dk, dv])
        if step < cp - 1:
            comm.wait()
            k, v = k_next, v_next
    if travelling is not None:
        grads.wait()  # the other ranks' shares arrive ... and are dropped
    return torch.cat(dq, dim=2), dk_own, dv_own


# -- lab09.1: backward keeps what forward saved ---------------------------------------------------------
def _stage_backward_never_frees(self, micro_batch, chunk, grad=None, *, weights=True):  # noqa: ANN001, ANN202
    x, out = self._saved[(micro_batch, chunk)]
    if not weights:
        if self.is_first(chunk):
            return None
        (dx,) = torch.autograd.grad(out, [x], grad, retain_graph=True)
        return dx
    torch.autograd.backward(out, grad)  # the saved (input, output) stay in self._saved
    return None if self.is_first(chunk) else x.grad


# -- lab11.1: the replicated norm weights counted on every tp rank ---------------------------------------
def _grid_norm_unmasked(optimizer, grid, counted):  # noqa: ANN001, ANN202
    sq = torch.zeros((), dtype=torch.float64)
    for unit in optimizer.units:
        sq += (unit.shard.grad.double() ** 2).sum()  # no mask: a norm weight counted t times
    dist.all_reduce(sq, group=grid.group("dp_cp"))
    dist.all_reduce(sq, group=grid.group("tp"))
    dist.all_reduce(sq, group=grid.group("pp"))
    return sq.sqrt()


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
        r"optimizer bytes: with offload|more than one fp32 master, m and v",
    ),
    Mutant(
        "lab10.3",
        "backward-splits-not-swapped",
        "minitorch_dist.expert_parallel.dispatch:AllToAll.backward",
        _all_to_all_backward_not_swapped,
        r"the forward's splits swapped \(recv_splits going, send_splits coming\)",
    ),
    Mutant(
        "lab02.1",
        "encode-truncates",
        "minitorch_dist.precision.formats:encode",
        _encode_truncates,
        r"do not cut them off|a tie goes to the neighbour with the even mantissa|encodes to",
    ),
    Mutant(
        "lab02.3",
        "clip-before-unscale",
        "minitorch_dist.precision.mixed:MixedPrecisionOptimizer.step",
        _clip_before_unscale,
        r"clip after unscaling",
    ),
    Mutant(
        "lab03.3",
        "selective-picks-blocks",
        "minitorch_dist.recompute.policies:selective_policy",
        _selective_picks_blocks,
        r"must pick only the attention core",
    ),
    Mutant(
        "lab04.1",
        "last-inside-no-sync",
        "minitorch_dist.accumulate.accumulate:accumulation_step",
        _accumulation_all_in_no_sync,
        r"the last outside it",
    ),
    Mutant(
        "lab05.3",
        "bucket-cap-checked-first",
        "minitorch_dist.data_parallel.bucketed:build_buckets",
        _buckets_cap_checked_first,
        r"stay <= the cap",
    ),
    Mutant(
        "lab08.4",
        "positions-of-the-shard",
        "minitorch_dist.context_parallel.layout:shard_positions",
        _positions_local,
        r"not the shard's own places 0..s/cp - 1",
    ),
    Mutant(
        "lab09.2",
        "interleaved-1f1b-warm-up",
        "minitorch_dist.pipeline.schedules:_interleaved",
        _interleaved_1f1b_warmup,
        r"warm-up forwards, not 2 \(p - r - 1\) \+ \(v - 1\) p",
    ),
    Mutant(
        "lab09.3",
        "serialised-clock",
        "minitorch_dist.pipeline.simulate:simulate",
        _simulate_serialised,
        r"too long, an action waited",
    ),
    Mutant(
        "lab12.1",
        "every-stage-as-last",
        "minitorch_dist.planner.fit:rank_memory",
        _rank_memory_last_stage,
        r"1F1B's first stage holds p micro-batches",
    ),
    Mutant(
        "lab12.2",
        "ties-in-input-order",
        "minitorch_dist.planner.search:rank",
        _rank_ties_in_input_order,
        r"ties: fewer bytes, then fields",
    ),
    Mutant(
        "lab00.1",
        "sum-not-in-place",
        "minitorch_dist.comm.halves:all_reduce_by_halves",
        _halves_not_in_place,
        r"the sum must be written into the tensor passed in",
    ),
    Mutant(
        "lab01.3",
        "dead-storages-kept",
        "minitorch_dist.memory.track:MemoryTracker._free",
        _free_nothing,
        r"a dead storage must leave the books",
    ),
    Mutant(
        "lab04.2",
        "one-micro-batch",
        "minitorch_dist.accumulate.measure:measure_accumulation",
        _measure_one_micro_batch,
        r"tokens counted: .* not 128",
    ),
    Mutant(
        "lab06.3",
        "no-prefetch",
        "minitorch_dist.zero.stage3:ZeroStage3._pre_forward",
        _pre_forward_no_prefetch,
        r"must start the next unit's all-gather",
    ),
    Mutant(
        "lab07.1",
        "f-backward-averaged",
        "minitorch_dist.tensor_parallel.functions:CopyToTP.backward",
        _f_backward_averaged,
        r"must all-reduce \(sum\)",
    ),
    Mutant(
        "lab07.2",
        "row-block-of-next-rank",
        "minitorch_dist.tensor_parallel.layers:RowParallelLinear.from_linear",
        _row_block_of_next_rank,
        r"each rank keeps the block of its own rank in the tp group",
    ),
    Mutant(
        "lab07.4",
        "embedding-others-not-zeroed",
        "minitorch_dist.tensor_parallel.vocab:VocabParallelEmbedding.forward",
        _embedding_others_not_zeroed,
        r"gives zeros for every other id",
    ),
    Mutant(
        "lab08.1",
        "merge-nan-where-both-masked",
        "minitorch_dist.context_parallel.blocks:merge_partials",
        _merge_unguarded,
        r"exp\(-inf - -inf\) is NaN where both",
    ),
    Mutant(
        "lab09.4",
        "every-w-at-the-end",
        "minitorch_dist.pipeline.schedules:_zb_h1",
        _zb_h1_all_w_at_the_end,
        r"micro-batches alive per rank, more than p",
    ),
    Mutant(
        "lab10.4",
        "received-rows-by-expert",
        "minitorch_dist.expert_parallel.layer:ExpertParallelMoE._dropless",
        _dropless_rows_by_expert,
        r"come source by source",
    ),
    Mutant(
        "lab07.5",
        "scatter-keeps-neighbours-tokens",
        "minitorch_dist.tensor_parallel.functions:ScatterToSP.forward",
        _scatter_neighbours_tokens,
        r"the scatter kept rank \d+'s tokens, not its own slice",
    ),
    Mutant(
        "lab07.3",
        "f-before-each-projection",
        "minitorch_dist.tensor_parallel.model:parallelize_block",
        _parallelize_block_f_per_projection,
        r"one f\s+before the shared input of wq, wk and wv, not one each",
    ),
    Mutant(
        "lab08.2",
        "kv-owner-off-by-one",
        "minitorch_dist.context_parallel.ring:ring_attention_forward",
        _ring_forward_owner_off_by_one,
        r"holds the K/V of rank \(r - s\) mod cp",
    ),
    Mutant(
        "lab08.3",
        "returned-shares-dropped",
        "minitorch_dist.context_parallel.ring:ring_attention_backward",
        _ring_backward_shares_dropped,
        r"holds only its own share: the other ranks' shares never came back",
    ),
    Mutant(
        "lab09.1",
        "saved-never-freed",
        "minitorch_dist.pipeline.stage:PipelineStage.backward",
        _stage_backward_never_frees,
        r"backward must free what forward kept",
    ),
    Mutant(
        "lab11.1",
        "norm-weights-counted-t-times",
        "minitorch_dist.parallel3d.clip:grid_grad_norm",
        _grid_norm_unmasked,
        r"the replicated norm weights counted once over tp",
    ),
]
