"""Mutants of labs 7–10's tasks (see tests/test_mutants.py for what a mutant is and how it is run).

Each wrong version is the reference body with one mistake a student makes; the comment on the
changed line says which.
"""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn.functional as F
from mutants_common import Mutant

from minitorch_dist.comm.collectives import all_reduce_copy, split_copy
from minitorch_dist.context_parallel.blocks import block_attention, block_attention_backward
from minitorch_dist.context_parallel.layout import check_layout
from minitorch_dist.context_parallel.ring import RingComm, _rank, _size, block_plan, pieces_of
from minitorch_dist.models.capacity import check_top_k
from minitorch_dist.pipeline.schedules import Action
from minitorch_dist.tensor_parallel.functions import reduce_from_tp
from minitorch_dist.tensor_parallel.layers import group_rank
from minitorch_dist.tensor_parallel.vocab import _upcast


# -- lab07.1: f and g ---------------------------------------------------------------------------
@staticmethod
def _f_backward_identity(ctx, grad):  # noqa: ANN001, ANN205
    return grad, None  # f's backward passes the gradient on without summing the ranks' parts


@staticmethod
def _g_forward_identity(ctx, x, group):  # noqa: ANN001, ANN205
    return x  # g passes the partial output on: the ranks' parts are never summed


# -- lab07.2: the row-parallel linear -----------------------------------------------------------
def _row_bias_on_every_rank(self, x):  # noqa: ANN001, ANN202
    y = F.linear(x, self.weight, self.bias)  # the bias joins every rank's partial sum
    return reduce_from_tp(y, self.group)


def _column_interleaved(
    cls,
    linear,
    group,
    *,
    sp=False,
    enter_region=True,
    index=None,  # noqa: ANN001, ANN202
    parts=None,
):
    t = dist.get_world_size(group)
    index = group_rank(group) if index is None else index
    parts = t if parts is None else parts
    weight = linear.weight.detach()[index::parts].clone()  # every t-th row, not a block
    bias = linear.bias.detach()[index::parts].clone() if linear.bias is not None else None
    return cls(
        weight,
        bias,
        group,
        in_features=linear.in_features,
        out_features=linear.out_features,
        sp=sp,
        enter_region=enter_region,
    )


def _column_bias_whole(
    cls,
    linear,
    group,
    *,
    sp=False,
    enter_region=True,
    index=None,  # noqa: ANN001, ANN202
    parts=None,
):
    index = group_rank(group) if index is None else index
    parts = dist.get_world_size(group) if parts is None else parts
    rows = linear.out_features // parts
    keep = slice(index * rows, (index + 1) * rows)
    weight = linear.weight.detach()[keep].clone()
    bias = linear.bias.detach().clone() if linear.bias is not None else None  # whole, not sharded
    return cls(
        weight,
        bias,
        group,
        in_features=linear.in_features,
        out_features=linear.out_features,
        sp=sp,
        enter_region=enter_region,
    )


# -- lab07.3: the tensor-parallel Llama block ---------------------------------------------------
def _parallelize_block_kv_copies_not_summed(block, group, *, sp=False, regather=False):  # noqa: ANN001, ANN202
    m = importlib.import_module("minitorch_dist.tensor_parallel.model")

    t, r = m.group_size(group), m.group_rank(group)
    attn, mlp = block.attn, block.mlp
    m.check_divisible("heads", attn.heads, "tp", t)
    m.check_divisible("ffn_hidden", mlp.w1.out_features, "tp", t)
    m.kv_heads_per_rank(attn.kv_heads, t)
    column = dict(sp=sp, enter_region=False)
    attn.wq = m.ColumnParallelLinear.from_linear(attn.wq, group, **column)
    if attn.kv_heads % t == 0:
        attn.wk = m.ColumnParallelLinear.from_linear(attn.wk, group, **column)
        attn.wv = m.ColumnParallelLinear.from_linear(attn.wv, group, **column)
    else:
        index = r // (t // attn.kv_heads)
        for name in ("wk", "wv"):
            layer = m.ColumnParallelLinear.from_linear(
                getattr(attn, name), group, index=index, parts=attn.kv_heads, **column
            )
            setattr(attn, name, layer)  # the copies' gradients are never summed
    attn.wo = m.RowParallelLinear.from_linear(attn.wo, group, sp=sp)
    mlp.w1 = m.ColumnParallelLinear.from_linear(mlp.w1, group, **column)
    mlp.w3 = m.ColumnParallelLinear.from_linear(mlp.w3, group, **column)
    mlp.w2 = m.RowParallelLinear.from_linear(mlp.w2, group, sp=sp)
    attn.__class__, mlp.__class__ = m.TensorParallelAttention, m.TensorParallelSwiGLU
    for module in (attn, mlp):
        module.tp_group, module.sp = group, sp
    attn.regather = mlp.regather = m.check_bool("regather", regather) and sp
    return block


# -- lab07.4: vocabulary-parallel cross-entropy -------------------------------------------------
@staticmethod
def _cross_entropy_no_max(ctx, local_logits, target, group, vocab_size):  # noqa: ANN001, ANN205
    x = _upcast(local_logits)
    width = x.shape[-1]
    start = group_rank(group) * width
    if vocab_size is not None and start + width > vocab_size:
        column = torch.arange(start, start + width, device=x.device)
        x = x.masked_fill(column >= vocab_size, float("-inf"))
    top = all_reduce_copy(x.max(dim=-1).values, group, dist.ReduceOp.MAX)  # computed, never used
    del top  # exp of the raw logits: overflows for large ones
    mine = (target >= start) & (target < start + width)
    local = torch.where(mine, target - start, 0)
    picked = x.gather(-1, local.unsqueeze(-1)).squeeze(-1)
    picked = all_reduce_copy(torch.where(mine, picked, 0.0), group)
    exp = x.exp()
    total = all_reduce_copy(exp.sum(dim=-1), group)
    ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), local, mine)
    ctx.dtype = local_logits.dtype
    return total.log() - picked


@staticmethod
def _cross_entropy_local_max(ctx, local_logits, target, group, vocab_size):  # noqa: ANN001, ANN205
    x = _upcast(local_logits)
    width = x.shape[-1]
    start = group_rank(group) * width
    if vocab_size is not None and start + width > vocab_size:
        column = torch.arange(start, start + width, device=x.device)
        x = x.masked_fill(column >= vocab_size, float("-inf"))
    x = x - x.max(dim=-1, keepdim=True).values  # this rank's own max, never all-reduced
    mine = (target >= start) & (target < start + width)
    local = torch.where(mine, target - start, 0)
    picked = x.gather(-1, local.unsqueeze(-1)).squeeze(-1)
    picked = all_reduce_copy(torch.where(mine, picked, 0.0), group)
    exp = x.exp()
    total = all_reduce_copy(exp.sum(dim=-1), group)
    ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), local, mine)
    ctx.dtype = local_logits.dtype
    return total.log() - picked


@staticmethod
def _cross_entropy_unpadded_offset(ctx, local_logits, target, group, vocab_size):  # noqa: ANN001, ANN205
    x = _upcast(local_logits)
    width = x.shape[-1]
    t = dist.get_world_size(group)
    start = group_rank(group) * (width if vocab_size is None else vocab_size // t)  # unpadded
    if vocab_size is not None and start + width > vocab_size:
        column = torch.arange(start, start + width, device=x.device)
        x = x.masked_fill(column >= vocab_size, float("-inf"))
    top = all_reduce_copy(x.max(dim=-1).values, group, dist.ReduceOp.MAX)
    x = x - top.unsqueeze(-1)
    mine = (target >= start) & (target < start + width)
    local = torch.where(mine, target - start, 0)
    picked = x.gather(-1, local.unsqueeze(-1)).squeeze(-1)
    picked = all_reduce_copy(torch.where(mine, picked, 0.0), group)
    exp = x.exp()
    total = all_reduce_copy(exp.sum(dim=-1), group)
    ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), local, mine)
    ctx.dtype = local_logits.dtype
    return total.log() - picked


# -- lab07.5: sequence parallelism's norm weights -------------------------------------------------
def _sp_norms_not_reduced(model, group):  # noqa: ANN001, ANN202
    return []  # no hook: each rank keeps the norm gradient of its own s/t tokens


@staticmethod
def _gather_backward_local(ctx, grad):  # noqa: ANN001, ANN205
    return split_copy(grad, ctx.group, ctx.dim), None, None  # my tokens' gradient from me alone


# -- lab08.1: the online-softmax merge ----------------------------------------------------------
def _merge_not_rescaled(out_a, lse_a, out_b, lse_b):  # noqa: ANN001, ANN202
    lse = torch.logaddexp(lse_a, lse_b)
    return out_a + out_b, lse  # each part's output kept at its own normalisation


def _merge_lse_max(out_a, lse_a, out_b, lse_b):  # noqa: ANN001, ANN202
    lse = torch.maximum(lse_a, lse_b)  # the max stands in for log(exp(a) + exp(b))
    wa = torch.exp(lse_a - lse).nan_to_num(0.0).unsqueeze(-1)
    wb = torch.exp(lse_b - lse).nan_to_num(0.0).unsqueeze(-1)
    return wa * out_a + wb * out_b, lse


# -- lab08.2 / lab08.3: ring attention ------------------------------------------------------------
def _ring_forward_mask_everywhere(
    q,
    k,
    v,
    *,
    group=None,
    layout="zigzag",
    merge=None,  # noqa: ANN001, ANN202
    counter=None,
):
    merge = (
        importlib.import_module("minitorch_dist.context_parallel.blocks").merge_partials
        if merge is None
        else merge
    )
    cp = _size(group)
    check_layout(q.shape[2] * cp, cp, layout)
    comm, rank = RingComm(group, counter), _rank(group)
    qs = pieces_of(q, layout)
    out = [None] * len(qs)
    for step in range(cp):
        if step < cp - 1:
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = pieces_of(k, layout), pieces_of(v, layout)
        for i, j, _kind in block_plan(rank, (rank - step) % cp, cp, layout):
            part = block_attention(qs[i], ks[j], vs[j], causal=True)  # on every block
            out[i] = part if out[i] is None else merge(*out[i], *part)
        if step < cp - 1:
            comm.wait()
            k, v = k_next, v_next
    return torch.cat([o for o, _ in out], dim=2), torch.cat([lse for _, lse in out], dim=2)


def _ring_backward_own_share_overwritten(
    dout,
    q,
    k,
    v,
    out,
    lse,
    *,
    group=None,  # noqa: ANN001, ANN202
    layout="zigzag",
    counter=None,
):
    cp = _size(group)
    check_layout(q.shape[2] * cp, cp, layout)
    comm, rank = RingComm(group, counter), _rank(group)
    grads = RingComm(group, counter, tag=1)
    delta = (dout * out).sum(-1)
    qs, dos = pieces_of(q, layout), pieces_of(dout, layout)
    lses, deltas = pieces_of(lse, layout), pieces_of(delta, layout)
    dq = [torch.zeros_like(x) for x in qs]
    dk_own = dv_own = travelling = None
    for step in range(cp):
        if step < cp - 1:
            k_next, v_next = comm.send_recv([k, v])
        ks, vs = pieces_of(k, layout), pieces_of(v, layout)
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dks, dvs = pieces_of(dk, layout), pieces_of(dv, layout)
        for i, j, kind in block_plan(rank, (rank - step) % cp, cp, layout):
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
        grads.wait()
        dk_own, dv_own = travelling[0], travelling[1]  # the returned buffer replaces my share
    return torch.cat(dq, dim=2), dk_own, dv_own


# -- lab08.4: the zig-zag layout ------------------------------------------------------------------
def _zigzag_off_by_one(x, rank, world_size, *, layout="zigzag", dim=2):  # noqa: ANN001, ANN202
    check_layout(x.shape[dim], world_size, layout)
    if layout == "contiguous":
        return x.chunk(world_size, dim=dim)[rank].contiguous()
    halves = x.chunk(2 * world_size, dim=dim)
    first, last = halves[rank], halves[(2 * world_size - rank) % (2 * world_size)]  # 2cp - r
    return torch.cat([first, last], dim=dim)


def _positions_contiguous(seq_len, rank, world_size, *, layout="zigzag"):  # noqa: ANN001, ANN202
    check_layout(seq_len, world_size, layout)
    return torch.arange(seq_len).chunk(world_size)[rank].clone()  # the zig-zag layout forgotten


# -- lab09.1: a pipeline stage --------------------------------------------------------------------
def _stage_forward_loss_not_divided(
    self,
    micro_batch,
    chunk,
    x,
    *,
    target=None,
    loss_fn=None,  # noqa: ANN001, ANN202
    micro_batches=1,
):
    if not self.is_first(chunk):
        x = x.detach().requires_grad_()
    out = self.chunks[chunk](x)
    if self.is_last(chunk):
        if target is None or loss_fn is None:
            raise ValueError(f"stage {self.stage(chunk)} is the last: it needs target and loss_fn")
        out = loss_fn(out, target)  # not divided by the number of micro-batches
    self._saved[(micro_batch, chunk)] = (x, out)
    return out.detach()


def _stage_forward_input_not_a_leaf(
    self,
    micro_batch,
    chunk,
    x,
    *,
    target=None,
    loss_fn=None,  # noqa: ANN001, ANN202
    micro_batches=1,
):
    out = self.chunks[chunk](x)  # the received activation used as it is: not a leaf with grad
    if self.is_last(chunk):
        if target is None or loss_fn is None:
            raise ValueError(f"stage {self.stage(chunk)} is the last: it needs target and loss_fn")
        out = loss_fn(out, target) / micro_batches
    self._saved[(micro_batch, chunk)] = (x, out)
    return out.detach()


# -- lab09.2: 1F1B --------------------------------------------------------------------------------
def _one_f_one_b_warmup_p_minus_r(rank, pp, m, v):  # noqa: ANN001, ANN202
    warmup = min(pp - rank, m)  # one warm-up forward too many
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        actions += [Action("F", warmup + i), Action("B", i)]
    actions += [Action("B", i) for i in range(m - warmup, m)]
    return actions


# -- lab09.3: the simulator -----------------------------------------------------------------------
def _simulate_ignores_arrival(schedule, t_forward=1.0, t_backward=2.0, t_weight=None):  # noqa: ANN001, ANN202
    from minitorch_dist.pipeline.simulate import ScheduleDeadlock, SimResult

    v, p = schedule.virtual_stages, schedule.pp
    split = any(a.op == "W" for acts in schedule.actions for a in acts)
    t_w = (t_backward / 2 if t_weight is None else t_weight) if split else 0.0
    cost = {"F": t_forward / v, "B": (t_backward - t_w) / v, "W": t_w / v}
    last = schedule.num_stages - 1
    done = {}
    nxt, free = [0] * p, [0.0] * p
    live, peak, busy = [0] * p, [0] * p, [0.0] * p
    events = []
    remaining = sum(len(a) for a in schedule.actions)
    while remaining:
        progressed = False
        for rank in range(p):
            while nxt[rank] < len(schedule.actions[rank]):
                a = schedule.actions[rank][nxt[rank]]
                s = schedule.stage(rank, a.chunk)
                need = {
                    "F": ("F", s - 1) if s > 0 else None,
                    "B": ("B", s + 1) if s < last else ("F", s),
                    "W": ("B", s),
                }[a.op]
                if need is not None and (need[0], a.micro_batch, need[1]) not in done:
                    break
                start = free[rank]  # starts when the rank is free, not when its input arrived
                end = start + cost[a.op]
                done[(a.op, a.micro_batch, s)] = free[rank] = end
                events.append((rank, a, start, end))
                busy[rank] += cost[a.op]
                frees = "W" if split else "B"
                live[rank] += 1 if a.op == "F" else -1 if a.op == frees else 0
                peak[rank] = max(peak[rank], live[rank])
                nxt[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ScheduleDeadlock("the schedule deadlocks")
    makespan = max(end for _, _, _, end in events)
    return SimResult(events, makespan, peak, busy)


# -- lab09.4: zero-bubble H1 ----------------------------------------------------------------------
def _zb_h1_no_delay(rank, pp, m, v):  # noqa: ANN001, ANN202
    warmup = min(pp - rank - 1, m)
    actions = [Action("F", i) for i in range(warmup)]
    for i in range(m):
        if warmup + i < m:
            actions.append(Action("F", warmup + i))
        actions += [Action("B", i), Action("W", i)]  # each W right after its B: nothing delayed
    return actions


# -- lab10.1: the router and its loss ------------------------------------------------------------
def _top_k_not_renormalised(logits, k, *, normalize=True):  # noqa: ANN001, ANN202
    probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).softmax(-1)
    experts = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :k]
    return probs.gather(-1, experts), experts, probs  # the k weights never divided by their sum


def _top_k_ties_to_higher(logits, k, *, normalize=True):  # noqa: ANN001, ANN202
    probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).softmax(-1)
    flipped = torch.sort(probs.flip(-1), dim=-1, descending=True, stable=True).indices[:, :k]
    experts = probs.shape[-1] - 1 - flipped  # a tie goes to the higher index
    weights = probs.gather(-1, experts)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, experts, probs


def _loss_without_e(router_probs, *, top_k=1, style="switch"):  # noqa: ANN001, ANN202
    experts = router_probs.shape[-1]
    mean_probs = router_probs.mean(0)
    k = 1 if style == "switch" else top_k
    chosen = torch.topk(router_probs.detach(), k, dim=-1).indices
    share = F.one_hot(chosen, experts).sum(1).to(router_probs.dtype).mean(0)
    loss = (share * mean_probs).sum()  # the factor E forgotten
    return loss / top_k if style == "topk" else loss


def _top_k_softmax_after(logits, k, *, normalize=True):  # noqa: ANN001, ANN202
    check_top_k(k, logits.shape[-1])
    x = logits.to(torch.promote_types(logits.dtype, torch.float32))
    experts = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :k]
    weights = x.gather(-1, experts).softmax(-1)  # the softmax over the k chosen logits only
    return weights, experts, x.softmax(-1)


def _loss_from_top_k_probs(router_probs, *, top_k=1, style="switch"):  # noqa: ANN001, ANN202
    experts = router_probs.shape[-1]
    k = 1 if style == "switch" else top_k
    chosen = torch.topk(router_probs.detach(), k, dim=-1).indices
    mask = F.one_hot(chosen, experts).sum(1).to(router_probs.dtype)
    share = mask.mean(0)
    mean_probs = (router_probs * mask).mean(0)  # only the chosen experts' probabilities
    loss = experts * (share * mean_probs).sum()
    return loss / top_k if style == "topk" else loss


# -- lab10.2: capacity ----------------------------------------------------------------------------
def _capacity_floor(tokens, experts, capacity_factor=1.0, *, top_k=1, min_capacity=0):  # noqa: ANN001, ANN202
    cf = Fraction(repr(float(capacity_factor)))
    return max(math.floor(Fraction(tokens * top_k, experts) * cf), min_capacity)  # floor


def _capacity_in_floats(tokens, experts, capacity_factor=1.0, *, top_k=1, min_capacity=0):  # noqa: ANN001, ANN202
    return max(math.ceil(tokens / experts * capacity_factor * top_k), min_capacity)  # floats


def _capacity_keeps_one_more(expert_indices, experts, capacity):  # noqa: ANN001, ANN202
    onehot = F.one_hot(expert_indices.reshape(-1), experts)
    position = (onehot.cumsum(0) * onehot).sum(-1) - 1
    return (position <= capacity).view_as(expert_indices)  # <= keeps C + 1


def _capacity_slot_major(expert_indices, experts, capacity):  # noqa: ANN001, ANN202
    onehot = F.one_hot(expert_indices.t().reshape(-1), experts)  # all first choices, then seconds
    position = (onehot.cumsum(0) * onehot).sum(-1) - 1
    return (position < capacity).view(expert_indices.shape[1], -1).t()


# -- lab10.3: the counts' exchange ----------------------------------------------------------------
def _counts_not_exchanged(send_counts, group=None):  # noqa: ANN001, ANN202
    return send_counts.clone()  # assumes every rank receives what it sends


def _all_to_all_splits_swapped(ctx, x, send_splits, recv_splits, group):  # noqa: ANN001, ANN202
    ctx.splits, ctx.group = (list(send_splits), list(recv_splits)), group
    out = x.new_empty((sum(send_splits), *x.shape[1:]))  # sized and split by the send counts
    dist.all_to_all_single(out, x.contiguous(), list(send_splits), list(recv_splits), group=group)
    return out


# -- lab10.4: the expert-parallel layer -----------------------------------------------------------
def _dropless_not_unsorted(self, flat, indices):  # noqa: ANN001, ANN202
    ep_layer = importlib.import_module("minitorch_dist.expert_parallel.layer")

    k, per = indices.shape[1], self.cfg.experts // self.ep
    choices = indices.reshape(-1)
    order = torch.sort(choices, stable=True).indices
    x_sorted = flat[order // k]
    counts = self.last_tokens_per_expert
    received = ep_layer.exchange_counts(counts, self.group).view(self.ep, per)
    send = counts.view(self.ep, per).sum(1).tolist()
    recv = received.sum(1).tolist()
    self.last_send_splits, self.last_recv_splits = send, recv
    rows = ep_layer.dispatch(x_sorted, send, recv, self.group)
    local_ids = torch.repeat_interleave(torch.arange(per).repeat(self.ep), received.reshape(-1))
    return ep_layer.combine(self._run_local(rows, local_ids), send, recv, self.group)  # sorted


def _dropless_experts_strided(self, flat, indices):  # noqa: ANN001, ANN202
    ep_layer = importlib.import_module("minitorch_dist.expert_parallel.layer")

    k, per = indices.shape[1], self.cfg.experts // self.ep
    choices = indices.reshape(-1)
    key = (choices % self.ep) * per + choices // self.ep  # expert e on rank e % ep
    order = torch.sort(key, stable=True).indices
    x_sorted = flat[order // k]
    counts = torch.bincount(key, minlength=self.cfg.experts)
    received = ep_layer.exchange_counts(counts, self.group).view(self.ep, per)
    send = counts.view(self.ep, per).sum(1).tolist()
    recv = received.sum(1).tolist()
    self.last_send_splits, self.last_recv_splits = send, recv
    rows = ep_layer.dispatch(x_sorted, send, recv, self.group)
    local_ids = torch.repeat_interleave(torch.arange(per).repeat(self.ep), received.reshape(-1))
    y_sorted = ep_layer.combine(self._run_local(rows, local_ids), send, recv, self.group)
    return y_sorted[torch.argsort(order)]


MUTANTS_LABS07_10: list[Mutant] = [
    Mutant(
        "lab07.1",
        "f-backward-no-all-reduce",
        "minitorch_dist.tensor_parallel.functions:CopyToTP.backward",
        _f_backward_identity,
        r"f's backward must all-reduce",
    ),
    Mutant(
        "lab07.1",
        "g-forward-no-all-reduce",
        "minitorch_dist.tensor_parallel.functions:ReduceFromTP.forward",
        _g_forward_identity,
        r"g's forward must all-reduce",
    ),
    Mutant(
        "lab07.2",
        "row-bias-on-every-rank",
        "minitorch_dist.tensor_parallel.layers:RowParallelLinear.forward",
        _row_bias_on_every_rank,
        r"bias was added on every rank",
    ),
    Mutant(
        "lab07.2",
        "column-rows-interleaved",
        "minitorch_dist.tensor_parallel.layers:ColumnParallelLinear.from_linear",
        classmethod(_column_interleaved),
        r"every t-th row of the weight \(interleaved\)",
    ),
    Mutant(
        "lab07.2",
        "column-bias-not-sharded",
        "minitorch_dist.tensor_parallel.layers:ColumnParallelLinear.from_linear",
        classmethod(_column_bias_whole),
        r"bias of a column-parallel linear must be sharded",
    ),
    Mutant(
        "lab07.3",
        "kv-copies-grads-not-summed",
        "minitorch_dist.tensor_parallel.model:parallelize_block",
        _parallelize_block_kv_copies_not_summed,
        r"copies of a kv head",
    ),
    Mutant(
        "lab07.4",
        "no-max-subtracted",
        "minitorch_dist.tensor_parallel.vocab:VocabParallelCrossEntropy.forward",
        _cross_entropy_no_max,
        r"subtract the all-reduced max",
    ),
    Mutant(
        "lab07.4",
        "max-not-all-reduced",
        "minitorch_dist.tensor_parallel.vocab:VocabParallelCrossEntropy.forward",
        _cross_entropy_local_max,
        r"each rank subtracted its own max",
        every=True,
    ),
    Mutant(
        "lab07.4",
        "offset-of-the-unpadded-vocabulary",
        "minitorch_dist.tensor_parallel.vocab:VocabParallelCrossEntropy.forward",
        _cross_entropy_unpadded_offset,
        r"read from the wrong column",
    ),
    Mutant(
        "lab07.5",
        "norm-grads-not-reduced",
        "minitorch_dist.tensor_parallel.sequence:sequence_parallel_norms",
        _sp_norms_not_reduced,
        r"norm weight.*all-reduced over the tp group",
    ),
    Mutant(
        "lab07.5",
        "gather-backward-local",
        "minitorch_dist.tensor_parallel.functions:GatherFromSP.backward",
        _gather_backward_local,
        r"all-gather's backward kept only this rank's gradient",
    ),
    Mutant(
        "lab08.1",
        "merge-not-rescaled",
        "minitorch_dist.context_parallel.blocks:merge_partials",
        _merge_not_rescaled,
        r"rescaled by exp\(lse_part - lse\)",
    ),
    Mutant(
        "lab08.1",
        "merge-lse-max",
        "minitorch_dist.context_parallel.blocks:merge_partials",
        _merge_lse_max,
        r"logaddexp\(lse_a, lse_b\) \(not the max",
    ),
    Mutant(
        "lab08.2",
        "causal-mask-off-diagonal",
        "minitorch_dist.context_parallel.ring:ring_attention_forward",
        _ring_forward_mask_everywhere,
        r"causal mask on an off-diagonal block",
    ),
    Mutant(
        "lab08.3",
        "own-share-overwritten",
        "minitorch_dist.context_parallel.ring:ring_attention_backward",
        _ring_backward_own_share_overwritten,
        r"replaced this rank's own share instead of being added",
    ),
    Mutant(
        "lab08.4",
        "zigzag-off-by-one",
        "minitorch_dist.context_parallel.layout:shard_sequence",
        _zigzag_off_by_one,
        r"half-chunks .* not r and 2cp - 1 - r",
    ),
    Mutant(
        "lab08.4",
        "positions-contiguous",
        "minitorch_dist.context_parallel.layout:shard_positions",
        _positions_contiguous,
        r"the contiguous layout's; a token keeps its place",
    ),
    Mutant(
        "lab09.1",
        "loss-not-divided-by-m",
        "minitorch_dist.pipeline.stage:PipelineStage.forward",
        _stage_forward_loss_not_divided,
        r"not divided by the number of micro-batches",
    ),
    Mutant(
        "lab09.1",
        "input-not-a-leaf",
        "minitorch_dist.pipeline.stage:PipelineStage.forward",
        _stage_forward_input_not_a_leaf,
        r"must be made a leaf that requires grad",
    ),
    Mutant(
        "lab09.2",
        "warmup-p-minus-r",
        "minitorch_dist.pipeline.schedules:_one_f_one_b",
        _one_f_one_b_warmup_p_minus_r,
        r"warm-up forwards .* p - r - 1",
    ),
    Mutant(
        "lab09.3",
        "start-ignores-arrival",
        "minitorch_dist.pipeline.simulate:simulate",
        _simulate_ignores_arrival,
        r"before its input arrived",
    ),
    Mutant(
        "lab09.4",
        "w-not-delayed",
        "minitorch_dist.pipeline.schedules:_zb_h1",
        _zb_h1_no_delay,
        r"W passes .* delayed",
    ),
    Mutant(
        "lab10.1",
        "top-k-not-renormalised",
        "minitorch_dist.models.routing:top_k_route",
        _top_k_not_renormalised,
        r"not renormalised",
    ),
    Mutant(
        "lab10.1",
        "top-k-ties-to-higher-index",
        "minitorch_dist.models.routing:top_k_route",
        _top_k_ties_to_higher,
        r"a tie going to the lower index",
    ),
    Mutant(
        "lab10.1",
        "loss-without-e",
        "minitorch_dist.models.routing:load_balancing_loss",
        _loss_without_e,
        r"factor E",
    ),
    Mutant(
        "lab10.1",
        "softmax-after-top-k",
        "minitorch_dist.models.routing:top_k_route",
        _top_k_softmax_after,
        r"softmax ran over the k chosen logits",
    ),
    Mutant(
        "lab10.1",
        "loss-from-top-k-probabilities",
        "minitorch_dist.models.routing:load_balancing_loss",
        _loss_from_top_k_probs,
        r"P_i was computed from the top-k probabilities only",
    ),
    Mutant(
        "lab10.2",
        "capacity-floor",
        "minitorch_dist.models.capacity:expert_capacity",
        _capacity_floor,
        r"ceil\(T k cf / E\), not floor",
    ),
    Mutant(
        "lab10.2",
        "capacity-in-floats",
        "minitorch_dist.models.capacity:expert_capacity",
        _capacity_in_floats,
        r"in floats is 110\.00000000000001",
    ),
    Mutant(
        "lab10.2",
        "keeps-c-plus-1",
        "minitorch_dist.models.routing:apply_capacity",
        _capacity_keeps_one_more,
        r"position < C, not <= C",
    ),
    Mutant(
        "lab10.2",
        "queue-slot-major",
        "minitorch_dist.models.routing:apply_capacity",
        _capacity_slot_major,
        r"filled slot-major .* token-major",
    ),
    Mutant(
        "lab10.3",
        "counts-not-exchanged",
        "minitorch_dist.expert_parallel.dispatch:exchange_counts",
        _counts_not_exchanged,
        r"counts were not exchanged",
    ),
    Mutant(
        "lab10.3",
        "all-to-all-splits-swapped",
        "minitorch_dist.expert_parallel.dispatch:AllToAll.forward",
        _all_to_all_splits_swapped,
        r"were the send and receive splits swapped",
    ),
    Mutant(
        "lab10.4",
        "outputs-not-unsorted",
        "minitorch_dist.expert_parallel.layer:ExpertParallelMoE._dropless",
        _dropless_not_unsorted,
        r"left sorted by expert: they were not put back",
    ),
    Mutant(
        "lab10.4",
        "experts-strided-e-mod-ep",
        "minitorch_dist.expert_parallel.layer:ExpertParallelMoE._dropless",
        _dropless_experts_strided,
        r"not every ep-th one \(e % ep\)",
        every=True,
    ),
]
