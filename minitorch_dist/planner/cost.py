"""How long a step takes: compute, each axis's communication on its link, and the bubble.

Per micro-batch, one rank of stage 0 spends (each term from its chapter's closed form, turned
into seconds on the link its group gets, :meth:`~minitorch_dist.planner.Cluster.link`: ``bytes /
bandwidth + messages x alpha``):

- compute: the step's FLOPs (:func:`minitorch_dist.memory.flops.flops_per_token`, ``6 N + 12 L s h_q``
  per token, ``8 N + 16 L s h_q`` with full recomputation; selective recomputation adds the
  attention core's forward, ``4 L s h_q``) over ``tp pp cp`` ranks, at ``matmul_efficiency``
  of the peak;
- tp: :func:`~minitorch_dist.tensor_parallel.tp_comm_bytes` per layer, ``8 b s h (t - 1) / t``
  elements (Shoeybi et al. 2019, section 3), ``2 (t - 1)`` messages per all-reduce;
- cp: :func:`~minitorch_dist.context_parallel.cost.ring_bytes_per_rank`, forward and backward
  (Liu et al. 2023, section 3), ``cp - 1`` messages each way per pass;
- ep: :func:`~minitorch_dist.expert_parallel.ep_step_bytes` of a uniform dispatch
  (:func:`~minitorch_dist.expert_parallel.all_to_all_bytes`) per MoE layer: four all-to-alls,
  six under full recomputation, whose re-run forward dispatches and combines again
  (:func:`~minitorch_dist.expert_parallel.all_to_alls_per_step`, chapter 10);
- pp: :func:`~minitorch_dist.pipeline.p2p_bytes` sent forward and back, ``v`` times per
  micro-batch with interleaving; without SP with scatter/gather, ``1 / t`` per TP rank, and the
  receiving TP group all-gathers the slices (Narayanan et al. 2021, section 4.1), booked on tp.

A pipeline runs ``m`` micro-batches plus a bubble of ``(p - 1) / v`` of them
(:func:`~minitorch_dist.pipeline.bubble_fraction`; Narayanan et al. 2021, section 2.2), then the
``dp x cp`` ranks that hold the same weights (``ParallelConfig.shard``; experts' ``dp / ep x cp``)
exchange gradients and parameters, :func:`~minitorch_dist.zero.measure.zero_comm_bytes`
(Rajbhandari et al. 2020, section 7):

    T = m t_mb (1 + (p - 1) / (v m)) + t_dp (+ t_offload)

By default nothing overlaps: every byte is on the critical path. Offload adds the gradient shard
down and the parameters back over PCIe (``pcie_bandwidth``, assumed). ``overlap`` hides each
axis's traffic in the window its chapter teaches, under that chapter's condition
(:mod:`.overlap`): ``True`` hides the data-parallel exchange, the pipeline sends, TP's backward
all-reduces under the weight gradients and CP's ring under block attention; an
:class:`~.overlap.Overlap` chooses axis by axis (async TP, a DualPipe-style schedule for EP).
With ``e_x`` the exposed seconds of axis x and ``W`` the ZeRO windows of :mod:`.overlap`:

    T = (t_c + e_tp + e_cp + e_ep + e_pp) (1 + (p - 1) / (v m))
        + max(0, t_grad - W_bwd) + max(0, t_param - W_fwd) + max(0, t_rep - W_rep) + t_offload

``StepTime.hidden`` is the seconds that came off, ``StepTime.terms`` each term's exposed and
hidden seconds and why (``StepTime.explain()`` prints them).

ZeRO-3's resharding policy (``ParallelConfig.reshard``) sets its bytes: ``3m`` all-gathers +
reduce-scatters of the sharded weights (``(n - 1) / n`` each) when it frees the gathered
parameters after forward and after backward, ``2m`` when it keeps them from forward to backward
(FSDP2's ``reshard_after_forward=False``), ``m + 1`` when it keeps them across micro-batches and
``2`` when it also reduce-scatters once per step.

HSDP (``shard_group`` g, :mod:`.hsdp`): the ZeRO exchange runs over the shard group's link and
the replicas' all-reduce of the gradient shard over the link of the ``dp / g`` replicas
(``dp_replica``), once per step (``hsdp_sync="step"``, deferred to the last micro-batch) or
after every micro-batch's reduce-scatter (``"micro_batch"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from minitorch_dist.tensor_parallel.cost import kv_heads_per_rank

from .config import ParallelConfig, micro_batches, strides
from .hsdp import replica_all_reduce_bytes
from .memo import (  # the per-package closed forms, memoised (same numbers)
    all_to_all_bytes,
    all_to_alls_per_step,
    bubble_fraction,
    ep_step_bytes,
    p2p_bytes,
    ring_bytes_per_rank,
    split_layers,
    tp_comm_bytes,
    zero_comm_bytes,
)
from .overlap import Overlap, Term, as_overlap, explain, hide

__all__ = ["PCIE_BANDWIDTH", "StepTime", "comm_bytes", "step_time"]

PCIE_BANDWIDTH = 25e9  # bytes/s host <-> device, assumed (PCIe 4.0 x16 is 32 GB/s peak)
# the share of the ZeRO bytes that gathers parameters before a forward, by stage (and policy)
PARAM_SHARE = {
    0: lambda m: 0.0,
    1: lambda m: 0.5,
    2: lambda m: 1 / (m + 1),
    "after_forward": lambda m: 1 / 3,
    "after_backward": lambda m: 1 / 2,
    "after_step": lambda m: 1 / (m + 1),
    "after_step_no_sync": lambda m: 1 / 2,
}
AXES = ("tp", "cp", "ep", "pp")


@dataclass(frozen=True)
class StepTime:
    """Seconds of one step by part; ``total`` is the predicted step time."""

    compute: float  # the step's products on one rank, m micro-batches
    tp: float  # tensor-parallel collectives, m micro-batches
    cp: float  # context-parallel ring, m micro-batches
    ep: float  # expert all-to-alls, m micro-batches
    pp: float  # pipeline sends, m micro-batches
    bubble: float  # idle time of the pipeline's fill and drain
    dp: float  # gradient/parameter exchange over the data-parallel ranks (ZeRO)
    offload: float  # PCIe traffic of the optimizer offload
    total: float
    mfu: float  # model FLOPs (6 N + attention, no recomputation) per second over the peak
    tflops_per_gpu: float  # FLOP/s per GPU counting recomputation, Narayanan's eq. (3) / 1e12
    hidden: float = 0.0  # seconds of traffic hidden behind compute (overlap)
    dp_param: float = 0.0  # the part of dp that gathers parameters before a forward (ZeRO-1-3)
    terms: tuple[Term, ...] = ()  # each part: exposed seconds, hidden seconds, why

    def explain(self, width: int = 88) -> str:
        """Each term of the step: exposed seconds, hidden seconds, and why (``width`` wide)."""
        return explain(self.terms, width)


def _stage_layers(model, config: ParallelConfig) -> tuple[int, int]:  # noqa: ANN001
    """(layers, MoE layers) of stage 0, the stage the cost model follows."""
    layers = split_layers(model.llama.layers, config.pp)[0]
    return layers, round(model.moe_layers * layers / model.llama.layers)


def comm_bytes(
    model, config: ParallelConfig, *, seq_len: int, global_batch: int
) -> dict[str, float]:  # noqa: ANN001
    """Bytes one rank of stage 0 sends per step on each axis (``tp``, ``cp``, ``ep``, ``pp``,
    ``dp``, ``dp_expert``, ``dp_replica``): the per-package closed forms, times layers and
    micro-batches; ``dp`` runs over the HSDP shard group (every dp rank without HSDP) and
    ``dp_replica`` is HSDP's all-reduce across the replicas (0 without HSDP)."""
    c, llama = config, model.llama
    m = micro_batches(c, global_batch)
    layers, moe_layers = _stage_layers(model, c)
    b, s = c.micro_batch, seq_len // c.cp  # each CP rank holds s / cp tokens
    out = dict.fromkeys(("tp", "cp", "ep", "pp", "dp", "dp_expert", "dp_replica"), 0.0)
    if c.tp > 1:
        out["tp"] = (
            m
            * layers
            * tp_comm_bytes(
                micro_batch=b,
                seq_len=s,
                hidden=llama.hidden,
                tp=c.tp,
                recompute=c.recompute,
                sp=c.sp,
            )
        )
    if c.cp > 1:
        kv = kv_heads_per_rank(llama.kv_heads, c.tp)
        ring = ring_bytes_per_rank(b, kv, seq_len, llama.head_dim, c.cp, backward=False)
        passes = 4 if c.recompute == "full" else 3  # forward, backward (2x), forward again
        out["cp"] = m * layers * passes * ring
    if model.moe is not None and c.ep > 1:
        tokens = b * s // (c.tp if c.sp else 1)
        try:
            dispatch = all_to_all_bytes(
                tokens=tokens, top_k=model.moe.top_k, hidden=llama.hidden, ep=c.ep
            )
        except ValueError:  # uneven tokens: the average over ranks
            dispatch = tokens * model.moe.top_k * (c.ep - 1) / c.ep * llama.hidden * 2
        out["ep"] = m * ep_step_bytes(dispatch, moe_layers=moe_layers, recompute=c.recompute)
    if c.pp > 1:  # scatter/gather without SP: 1 / t each, all-gathered over TP (chapter 9)
        one = p2p_bytes(
            micro_batch=b, seq_len=s, hidden=llama.hidden, tp=c.tp, sp=c.sp, scatter_gather=True
        )
        out["pp"] = m * 2 * c.v * one
        out["tp"] += 0 if c.sp else out["pp"] * (c.tp - 1)  # the all-gather's (t - 1) slices
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=0)
    if c.shard > 1:
        out["dp"] = _zero_bytes(dense, c, c.shard, m)
    if c.replicas > 1:
        reduces = m if c.hsdp_sync == "micro_batch" else 1
        out["dp_replica"] = replica_all_reduce_bytes(dense, c.dp * c.cp, c.shard, reduces=reduces)
    if expert and c.expert_shard > 1:
        out["dp_expert"] = _zero_bytes(expert, c, c.expert_shard, m)
    return out


def _zero_bytes(params: int, c: ParallelConfig, n: int, m: int) -> float:
    """Chapter 6's ZeRO bytes over ``n`` ranks; ZeRO-3 under its resharding policy: ``3m``,
    ``2m``, ``m + 1`` (stage 2's count) or ``2`` (stage 1's) units of ``(n - 1) / n``."""
    if c.zero < 3 or c.reshard == "after_forward":
        return zero_comm_bytes(params, c.zero, n, grad_acc=m)
    if c.reshard == "after_backward":
        return zero_comm_bytes(params, 3, n, grad_acc=m) * 2 / 3
    return zero_comm_bytes(params, 2 if c.reshard == "after_step" else 1, n, grad_acc=m)


def _messages(
    model, config: ParallelConfig, m: int, layers: int, moe_layers: int
) -> dict[str, float]:  # noqa: ANN001
    """Messages on each axis per step (each pays the link's alpha)."""
    c = config
    collectives = 6 if c.recompute == "full" else 4  # all-reduces (or RS + AG pairs) per layer
    passes = 4 if c.recompute == "full" else 3
    sends = m * 2 * c.v if c.pp > 1 else 0
    gathers = 0 if c.sp else sends  # scatter/gather: an all-gather per pipeline message
    return {
        "tp": (m * layers * collectives * 2 + gathers) * (c.tp - 1),
        "cp": m * layers * passes * (c.cp - 1),
        "ep": m * moe_layers * all_to_alls_per_step(c.recompute) * (c.ep - 1),
        "pp": sends,
    }


def step_time(
    model,
    cluster,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,
    overlap: bool | Overlap = False,
) -> StepTime:  # noqa: ANN001
    """Predicted seconds of one step, by part: ``compute`` (the step's FLOPs over every GPU at
    ``matmul_efficiency`` of the peak); ``tp``, ``cp``, ``ep``, ``pp`` (each axis's bytes from
    :func:`comm_bytes` over the bandwidth of ``cluster.link(size, stride)``, plus its messages
    times the link's alpha; a pipeline send is a group of 2); ``bubble`` (those five times
    ``bubble_fraction(p, m, v)``); ``dp`` (the ZeRO bytes over the link of the dp x cp ranks
    holding the same weights, experts over the dp/ep x cp group's, plus alpha per ring step;
    ``dp_param``, its part that gathers parameters); then ``offload``, ``total``, MFU and
    TFLOP/s. ``overlap``: False, nothing overlaps; True or an :class:`~.overlap.Overlap`, each
    axis hides in its chapter's window under its chapter's condition (:mod:`.overlap`), and
    ``tp``, ``cp``, ``ep``, ``pp``, ``dp`` are what stays exposed (``hidden``, the seconds that
    came off). ``terms``: each part's exposed and hidden seconds and why (``explain()``).

    See the module docstring for where each formula comes from."""
    c = config
    m = micro_batches(c, global_batch)
    layers, moe_layers = _stage_layers(model, c)
    sent = comm_bytes(model, c, seq_len=seq_len, global_batch=global_batch)
    messages = _messages(model, c, m, layers, moe_layers)
    stride = strides(c)
    tokens = global_batch * seq_len
    hardware = model.flops_per_token(seq_len, c.recompute) * tokens
    if c.recompute == "selective":  # the attention core's forward again: 4 L s h_q per token
        hardware += 4 * model.llama.layers * seq_len * model.llama.hidden * tokens
    # BEGIN SOLUTION lab12.1: compute, communication on each group's link, the bubble
    compute = hardware / (cluster.gpus * cluster.peak_flops * cluster.matmul_efficiency)
    times = {}
    for axis, size in (("tp", c.tp), ("cp", c.cp), ("ep", c.ep), ("pp", 2)):
        link = cluster.link(size, stride[axis])
        times[axis] = sent[axis] / link.bandwidth + messages[axis] * link.alpha
    per_step = compute + sum(times.values())  # m micro-batches of work on stage 0
    bubble = per_step * bubble_fraction(c.pp, m, c.v)
    dp_parts = dict.fromkeys(("dp", "dp_expert", "dp_replica"), 0.0)
    for key, size in (("dp", c.shard), ("dp_expert", c.expert_shard), ("dp_replica", c.replicas)):
        if sent[key]:
            link = cluster.link(size, _dp_stride(cluster, c, key))
            ring_passes = sent[key] * size / ((size - 1) * _state_bytes(model, c, key))
            dp_parts[key] = sent[key] / link.bandwidth + ring_passes * (size - 1) * link.alpha
    dp = sum(dp_parts.values())
    # END SOLUTION
    key = c.reshard if c.zero == 3 else c.zero
    param = (dp_parts["dp"] + dp_parts["dp_expert"]) * PARAM_SHARE[key](m)
    beta = 1 - model.flops_per_token(seq_len, "none") * tokens / 3 / hardware
    exposed, hidden_dp, why = hide(
        model, cluster, c, as_overlap(overlap), seq_len=seq_len, m=m, layers=layers,
        moe_layers=moe_layers, compute=compute, beta=beta, times=times, dp_parts=dp_parts,
        param=param,
    )  # fmt: skip
    share = bubble / per_step  # the bubble's share of the work, (p - 1) / (v m)
    hidden_axes = sum(times[a] - exposed[a] for a in AXES)
    per_step -= hidden_axes
    bubble -= hidden_axes * share
    param -= hidden_dp[1]
    dp -= sum(hidden_dp)
    hidden = hidden_axes * (1 + share) + sum(hidden_dp)
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=0)
    shard = -(-dense // c.shard) + -(-expert // c.expert_shard) if c.zero else dense + expert
    offload = 4 * shard / PCIE_BANDWIDTH if c.offload else 0.0  # 16-bit grads down, params up
    total = per_step + bubble + dp + offload
    model_flops = model.flops_per_token(seq_len, "none") * tokens
    terms = (
        Term("compute", compute, 0.0, f"products at {cluster.matmul_efficiency:.0%} of peak"),
        *(Term(a, exposed[a], times[a] - exposed[a], why[a]) for a in AXES),
        Term("bubble", bubble, 0.0, f"(p - 1) / (v m) = {share:.2%} of the work above"),
        Term("dp", dp, sum(hidden_dp), why["dp"]),
        Term("offload", offload, 0.0, "PCIe, not overlapped" if offload else "no offload"),
    )
    return StepTime(
        compute=compute,
        **exposed,
        bubble=bubble,
        dp=dp,
        offload=offload,
        total=total,
        mfu=model_flops / (total * cluster.gpus * cluster.peak_flops),
        tflops_per_gpu=model.flops_per_token(seq_len, c.recompute)
        * tokens
        / (total * cluster.gpus)
        / 1e12,
        hidden=hidden,
        dp_param=param,
        terms=terms,
    )


def _dp_stride(cluster, c: ParallelConfig, key: str) -> int:  # noqa: ANN001
    """The stride of a ring with as many members per node as the ``key`` group has: the dp x cp
    group (shard group x cp under HSDP) is a block of ranks ``tp`` apart; the replicas sit
    ``tp cp g`` apart; an expert's group is its cp ranks ``tp`` apart times its dp / ep
    replicas ``tp cp ep`` apart."""
    if key == "dp_replica":
        return c.tp * c.shard
    if key == "dp" or c.ep == 1:
        return c.tp
    gpn = cluster.gpus_per_node
    per_node = min(c.cp, max(1, gpn // c.tp)) * min(
        c.dp // c.ep, max(1, gpn // (c.tp * c.cp * c.ep))
    )
    return max(1, gpn // per_node)


def _state_bytes(model, config: ParallelConfig, key: str) -> int:  # noqa: ANN001
    """Bytes of 16-bit gradients (or parameters) the dp (or expert-dp) ring exchanges."""
    dense, expert = model.params_per_rank(tp=config.tp, pp=config.pp, ep=config.ep, stage=0)
    if key == "dp_replica":  # the all-reduce of the gradient shard
        return 2 * -(-dense // config.shard)
    return 2 * (dense if key == "dp" else expert)
