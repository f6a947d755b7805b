"""A roofline view of a layout: which resource bounds each phase of a step, and how far from it.

A phase moves ``bytes`` over one resource (HBM, an NVLink or InfiniBand ring, PCIe) while the
products of a window of ``flops`` run beside it. Its arithmetic intensity ``I = flops / bytes``
against the resource's critical intensity ``I* = C / B`` (the GPU's peak FLOP/s over the
resource's bytes/s) says which one bounds it: below ``I*`` the bytes take longer than the
products, above it the products do, and at ``I = I*`` the two take the same time (Williams et
al. 2009; Austin et al. 2025, "How to Scale Your Model", "All About Rooflines" and "How to
Parallelize a Transformer for Training"). Each axis's critical size follows from its chapter's
bytes and FLOPs, ``C`` the FLOP/s of the products and ``B`` the ring's bandwidth:

- data parallelism and ZeRO (chapters 5, 6): every stage's exchange hides behind the pass it
  runs under when each rank's micro-batch has ``T >= (n - 1) / n * C / B`` tokens (the
  all-reduce's ``4 Psi (n - 1)/n`` bytes under the backward's ``4 Psi T`` FLOPs; a gather's
  ``2 Psi (n - 1)/n`` under the forward's ``2 Psi T``): :func:`dp_critical_tokens`;
- tensor parallelism (chapter 7): a layer's ``16 b s h (t - 1)/t`` bytes against its
  ``6 r h^2 b s / t`` FLOPs (``r h^2`` the layer's weights, 12 for GPT) -- the tokens cancel:
  ``h / (t - 1) >= 8 C / (3 r B)``, :func:`tp_critical_hidden`;
- context parallelism (chapter 8): ``s / c >= (n_kv / n_h) p C / B``, chapter 8's
  :func:`~minitorch_dist.context_parallel.cost.min_tokens_per_rank` (a ring step's bytes
  under the causal, balanced half of its block's products);
- expert parallelism (chapter 10): four all-to-alls of ``T k h (ep - 1)/ep`` elements against
  the experts' ``18 T k h f`` FLOPs -- the tokens cancel again, the expert width decides:
  ``f >= (4/9) (ep - 1)/ep C / B`` (:func:`ep_critical_width`); the tokens per expert decide
  the expert product's own roofline against HBM (:func:`expert_critical_tokens`);
- the pipeline (chapter 9): the bubble ``(p - 1)/(v m)`` of the work equals the work itself at
  ``m = (p - 1)/v`` micro-batches (:func:`pp_critical_micro_batches`).

:func:`roofline` applies this to one configuration of the planner, phase by phase on one rank
of stage 0, with the bytes of :func:`~.cost.comm_bytes` on the link of
:meth:`~.cluster.Cluster.link` and the step time of :func:`~.cost.step_time`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ParallelConfig, micro_batches, strides
from .cost import PARAM_SHARE, PCIE_BANDWIDTH, _dp_stride, comm_bytes, step_time
from .memo import split_layers

__all__ = [
    "HBM_BANDWIDTH",
    "Phase",
    "dp_critical_tokens",
    "ep_critical_width",
    "expert_critical_tokens",
    "layer_ratio",
    "link_intensity",
    "step_roof",
    "tightest",
    "pp_critical_micro_batches",
    "roofline",
    "tp_critical_hidden",
]

# HBM bytes/s per GPU (datasheets: A100 80GB SXM 2,039 GB/s; H100 and H800 SXM 3.35 TB/s)
HBM_BANDWIDTH = {"dgx-a100": 2.039e12, "dgx-h100": 3.35e12, "h800": 3.35e12}
ADAM_BYTES = 28  # per parameter: fp32 weight, m, v read and written, 16-bit grad in, weight out
ADAM_FLOPS = 15  # per parameter, about: the moments, the square root, the division, the update


def dp_critical_tokens(n: int, *, flops: float, bandwidth: float) -> float:
    """Tokens per rank per micro-batch from which a ZeRO exchange over ``n`` ranks hides behind
    the pass it runs under: ``(n - 1) / n * flops / bandwidth`` (every stage, module docstring)."""
    return (n - 1) / n * flops / bandwidth


def layer_ratio(llama) -> float:  # noqa: ANN001
    """``r``: a layer's matrix weights over ``h^2`` (12 for GPT; q, k, v, o and SwiGLU's three
    for a Llama: ``(2 h^2 + 2 h h_kv + 3 h f) / h^2``)."""
    h = llama.hidden
    return (2 * h * h + 2 * h * llama.kv_hidden + 3 * h * llama.ffn_hidden) / (h * h)


def tp_critical_hidden(tp: int, *, flops: float, bandwidth: float, ratio: float = 12) -> float:
    """Hidden size from which a layer's TP collectives take no longer than its products:
    ``h* = (t - 1) 8 C / (3 r B)`` (module docstring; ``ratio`` is ``r``)."""
    return (tp - 1) * 8 * flops / (3 * ratio * bandwidth)


def ep_critical_width(ep: int, *, flops: float, bandwidth: float) -> float:
    """Expert FFN width from which the four all-to-alls take no longer than the experts'
    products: ``f* = (4/9) (ep - 1)/ep C / B``."""
    return 4 / 9 * (ep - 1) / ep * flops / bandwidth


def expert_critical_tokens(hidden: int, ffn: int, *, flops: float, hbm: float) -> float:
    """Tokens per expert from which an expert's product is compute-bound against HBM: with the
    ``2 T h f`` FLOPs of one ``h x f`` matrix over its ``2 (h f + T h + T f)`` bytes (weights
    read, input read, output written), ``T* = I* h f / (h f - I* (h + f))``, ``I* = C / B``."""
    critical = flops / hbm
    return critical * hidden * ffn / (hidden * ffn - critical * (hidden + ffn))


def pp_critical_micro_batches(pp: int, virtual: int = 1) -> float:
    """Micro-batches at which the bubble, ``(p - 1)/(v m)`` of the work, equals the work."""
    return (pp - 1) / virtual


@dataclass(frozen=True)
class Phase:
    """One phase of a step on one rank: what it moves, over which resource, and its bound."""

    name: str  # forward, backward, optimizer, tp, cp, ep, pp, dp_grad, dp_param, ...
    resource: str  # "HBM", "NVLink", "InfiniBand" or "PCIe"
    flops: float  # the products of the phase (for a collective: of the window it may hide in)
    bytes: float  # bytes over ``resource``
    bandwidth: float  # the resource's bytes/s (a ring's, per rank)
    peak: float  # the GPU's FLOP/s
    planner: float | None  # seconds the planner's step time charges for it (None: not charged)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def critical(self) -> float:
        return self.peak / self.bandwidth

    @property
    def bound(self) -> str:
        """``"compute"`` at or above the critical intensity, else the resource."""
        return "compute" if self.intensity >= self.critical else self.resource

    @property
    def seconds(self) -> float:
        """The roofline's time: the longer of the products at peak and the bytes at bandwidth."""
        return max(self.flops / self.peak, self.bytes / self.bandwidth)

    @property
    def gap(self) -> float | None:
        """The planner's seconds over the roofline's: how far the phase is from its roof."""
        return None if self.planner is None or not self.seconds else self.planner / self.seconds


def _gemm_bytes(llama, tp: int, tokens: float) -> float:  # noqa: ANN001
    """HBM bytes of one layer's products on a rank, forward: weights read once, every input
    read and output written once (2 bytes each): ``2 (W + T sum(h_in + h_out))``."""
    h, kv, f = llama.hidden, llama.kv_hidden, llama.ffn_hidden
    weights = (2 * h * h + 2 * h * kv + 3 * h * f) / tp
    edges = 7 * h + (2 * h + 2 * kv + 3 * f) / tp  # q, k, v, o, gate, up, down
    return 2 * (weights + tokens * edges)


def _link(cluster, size: int, stride: int) -> tuple[str, float]:  # noqa: ANN001
    link = cluster.link(size, stride)
    return ("InfiniBand" if link.inter_node else "NVLink"), link.bandwidth


def roofline(
    model,
    cluster,
    config: ParallelConfig,
    *,
    seq_len: int,
    global_batch: int,
    overlap: bool = False,
) -> list[Phase]:  # noqa: ANN001
    """The phases of one step on a rank of stage 0 (module docstring): ``forward`` and
    ``backward`` (products against HBM), ``optimizer`` (Adam's pass over its shard in HBM, or
    over PCIe with offload), and each collective with bytes on its link (``tp``, ``cp``,
    ``ep``, ``pp``, ``dp_grad``, ``dp_param``, ``dp_expert``, ``dp_replica``), each beside the
    window of products it can hide behind (the windows of :func:`~.cost.step_time`). ``planner``
    is what :func:`~.cost.step_time` charges: the window at ``matmul_efficiency`` plus the
    collective's exposed seconds (with ``overlap``, the dp and pp exchange less what hides)."""
    c, llama = config, model.llama
    m = micro_batches(c, global_batch)
    peak, rate = cluster.peak_flops, cluster.peak_flops * cluster.matmul_efficiency
    hbm = getattr(cluster, "hbm_bandwidth", HBM_BANDWIDTH.get(cluster.name, 3.35e12))
    layers = split_layers(llama.layers, c.pp)[0]
    tokens = global_batch * seq_len
    forward = model.flops_per_token(seq_len, "none") * tokens / 3 / cluster.gpus
    total = model.flops_per_token(seq_len, c.recompute) * tokens / cluster.gpus
    if c.recompute == "selective":
        total += 4 * llama.layers * seq_len * llama.hidden * tokens / cluster.gpus
    backward = total - forward
    time = step_time(model, cluster, c, seq_len=seq_len, global_batch=global_batch, overlap=overlap)
    sent = comm_bytes(model, c, seq_len=seq_len, global_batch=global_batch)
    tau = c.micro_batch * seq_len / c.cp  # tokens of a rank's micro-batch
    gemm = m * layers * _gemm_bytes(llama, c.tp, tau)
    phases = [
        Phase("forward", "HBM", forward, gemm, hbm, peak, forward / rate),
        # the backward's products have the forward's shapes (dX and dW): the same intensity
        Phase("backward", "HBM", backward, gemm * backward / forward, hbm, peak, backward / rate),
    ]
    dense, expert = model.params_per_rank(tp=c.tp, pp=c.pp, ep=c.ep, stage=0)
    shard = dense / c.shard + expert / c.expert_shard if c.zero else dense + expert
    if c.offload:
        phases.append(Phase("optimizer", "PCIe", 0.0, 4 * shard, PCIE_BANDWIDTH, peak,
                            time.offload))  # fmt: skip
    else:
        phases.append(Phase("optimizer", "HBM", ADAM_FLOPS * shard, ADAM_BYTES * shard, hbm,
                            peak, None))  # fmt: skip
    stride = strides(c)
    attention = 6 * llama.layers * seq_len * llama.hidden * tokens / cluster.gpus
    experts = 0.0
    if model.moe is not None:
        moe, share = model.moe, layers / llama.layers
        experts = 18 * llama.hidden * moe.expert_ffn * moe.top_k * model.moe_layers * share
        experts *= m * tau / c.tp
    windows = {"tp": total, "cp": attention, "ep": experts, "pp": total}
    for axis, size in (("tp", c.tp), ("cp", c.cp), ("ep", c.ep), ("pp", 2)):
        if sent[axis]:
            resource, bw = _link(cluster, size, stride[axis])
            charged = windows[axis] / rate + getattr(time, axis)  # its exposed seconds
            phases.append(Phase(axis, resource, windows[axis], sent[axis], bw, peak, charged))
    windows = {
        "grad": backward / (m if c.zero < 2 else 1),
        "param": forward / (m if c.zero < 3 else 1),
    }
    key = getattr(c, "reshard", 3) if c.zero == 3 else c.zero  # ZeRO-3's policy, where modelled
    param = PARAM_SHARE.get(key, PARAM_SHARE.get(3, lambda m: 1 / 3))(m)
    dp = []  # (name, part, bytes, resource, bandwidth)
    for group, size in (("dp", c.shard), ("dp_expert", c.expert_shard), ("dp_replica", c.replicas)):
        if sent[group]:
            resource, bw = _link(cluster, size, _dp_stride(cluster, c, group))
            share = 0.0 if group == "dp_replica" else param
            if share < 1:
                name = "dp_grad" if group == "dp" else group
                dp.append((name, "grad", sent[group] * (1 - share), resource, bw))
            if share:
                dp.append((f"{group}_param", "param", sent[group] * share, resource, bw))
    # the step time's exposed dp seconds, its parameter part and the rest, shared by raw seconds
    exposed = {"param": time.dp_param, "grad": time.dp - time.dp_param}
    for part in ("grad", "param"):
        raw = sum(b / bw for _, p, b, _, bw in dp if p == part)
        for name, _, nbytes, resource, bw in (d for d in dp if d[1] == part):
            charged = windows[part] / rate + exposed[part] * nbytes / bw / raw
            phases.append(Phase(name, resource, windows[part], nbytes, bw, peak, charged))
    return phases


def tightest(phases: list[Phase]) -> Phase:
    """Of the phases the step time charges, the one with the lowest intensity over its critical
    intensity: the one its resource binds most (ties: the first)."""
    return min((p for p in phases if p.planner is not None), key=lambda p: p.intensity / p.critical)


def link_intensity(phases: list[Phase], resource: str, bandwidth: float) -> float:
    """The step's products (``forward`` + ``backward``) per byte-equivalent on ``resource``:
    the seconds of its phases there, times ``bandwidth`` (so that rings faster than it count
    for less), the x of a run on that link's roof ``min(peak, I bandwidth)``; inf when no
    phase uses it."""
    flops = sum(p.flops for p in phases if p.name in ("forward", "backward"))
    seconds = sum(p.bytes / p.bandwidth for p in phases if p.resource == resource)
    return flops / (seconds * bandwidth) if seconds else float("inf")


def step_roof(phases: list[Phase]) -> float:
    """The step's roofline seconds: the longest of its products at peak and each resource's
    bytes at its bandwidth, as if every phase overlapped every other perfectly."""
    flops = sum(p.flops for p in phases if p.name in ("forward", "backward"))
    peak = phases[0].peak
    per_resource: dict[str, float] = {}
    for p in phases:
        per_resource[p.resource] = per_resource.get(p.resource, 0.0) + p.bytes / p.bandwidth
    return max(flops / peak, *per_resource.values())
