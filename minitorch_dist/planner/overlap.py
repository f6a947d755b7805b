"""Which communication hides behind compute, axis by axis, under the condition its chapter gives.

:func:`~.cost.step_time` prices every axis's bytes on its link; with ``overlap`` on, this module
takes off what a framework can hide and says why for each term (:class:`Term`). ``overlap`` is
``False`` (nothing hides), ``True`` (:class:`Overlap`'s defaults) or an :class:`Overlap`. With
``t_c`` the step's compute on a rank and ``beta`` the share of its FLOPs after the forward:

- **dp** (chapters 5 and 6): the gradient reduction runs under backward, bucket by bucket (Li et
  al. 2020, section 3.2.3): under the last micro-batch's, ``beta t_c / m``, where the gradients
  are reduced once per step (ZeRO-0/1, ZeRO-3 ``after_step_no_sync``), under every one,
  ``beta t_c``, where they are reduce-scattered every micro-batch. A parameter all-gather of
  ZeRO-1/2 can start only after the optimizer step, so it hides under the next step's first
  forward, ``(1 - beta) t_c / m`` (Megatron-LM's ``--overlap-param-gather``), all but the first
  layer's gather, which the first layer waits for; ZeRO-3's forward
  gathers are prefetched under the forwards that gather (all ``m``, or the first one when the
  policy keeps the parameters across micro-batches), except the step's first gather, one layer's,
  which nothing runs before. HSDP's replica all-reduce hides under the last backward (deferred)
  or every backward (``hsdp_sync="micro_batch"``).
- **pp** (chapter 9): the sends run under the next micro-batch's products (``overlap_p2p_comm``).
- **tp** (chapter 7, :mod:`minitorch_dist.tensor_parallel.overlap` in closed form):
  ``"backward"``: each region's dX all-reduce runs under its column-parallel dW product
  (Megatron-LM), exposed by ``max(0, all-reduce - dW)``; the forward's collectives stay exposed.
  ``"async"``: the forward's all-gathers and reduce-scatters are decomposed into ``t`` chunk
  products, ``g + (t - 1) max(g, c)`` for a product ``t g`` and a shard transfer ``c`` (Wang et
  al. 2023); it needs sequence parallelism, and PyTorch's async TP needs ``torch.compile`` and
  SymmetricMemory. Chunk products are assumed to run at the full product's rate.
- **cp** (chapter 8): a ring step's K/V block hides behind the block attention it feeds,
  exposed by ``max(0, 1 - compute / transfer)`` of the ring; without latency it hides from
  ``s / cp >= n_kv p F / (n_h B)`` tokens per rank (:func:`~minitorch_dist.context_parallel.cost.min_tokens_per_rank`).
- **ep** (chapters 9 and 10): only a schedule that runs a forward chunk of one micro-batch beside
  a backward chunk of another (DualPipe, DeepSeek-AI 2024, section 3.2.1; ``Overlap(ep=True)``)
  hides the all-to-alls: the forward's under the other's backward, ``beta t_c``, the backward's
  under the other's forward, ``(1 - beta) t_c``; it needs two micro-batches. 1F1B and the
  interleaved schedule run one chunk at a time, so their all-to-alls stay exposed, and the
  planner's bubble stays theirs (DualPipe's smaller bubble is not modelled).

Each axis's window is its own: the axes' collectives run on their own links beside the same
compute, and the compute is assumed not slowed by them (on a GPU they take some of the SMs and
of the memory bandwidth: real gains are smaller, chapter 7). Arithmetic only (no torch).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import NamedTuple

from minitorch_dist.checks import check_bool, check_choice
from minitorch_dist.context_parallel.cost import min_tokens_per_rank
from minitorch_dist.tensor_parallel.cost import kv_heads_per_rank

from .config import strides
from .memo import all_to_alls_per_step

__all__ = ["TP_OVERLAP", "Overlap", "Term", "as_overlap", "explain", "hide"]

TP_OVERLAP = ("none", "backward", "async")


@dataclass(frozen=True)
class Overlap:
    """What a framework overlaps, axis by axis; each still hides only under its condition."""

    dp: bool = True  # gradient reduction under backward, parameter gathers under a forward
    pp: bool = True  # the pipeline's sends under the next micro-batch
    tp: str = "backward"  # "none", "backward" (dX under dW) or "async" (and the forward decomposed)
    cp: bool = True  # the ring's K/V blocks under block attention
    ep: bool = False  # a schedule pairing two micro-batches' chunks (DualPipe)

    def __post_init__(self) -> None:
        for name in ("dp", "pp", "cp", "ep"):
            check_bool(name, getattr(self, name))
        check_choice("tp", self.tp, TP_OVERLAP)

    @classmethod
    def none(cls) -> Overlap:
        """Nothing hides: ``overlap=False``."""
        return cls(dp=False, pp=False, tp="none", cp=False, ep=False)

    @classmethod
    def full(cls) -> Overlap:
        """Every axis in the way its chapter teaches: async TP and a DualPipe-style schedule too."""
        return cls(tp="async", ep=True)


def as_overlap(overlap: bool | Overlap) -> Overlap:
    """``False``: :meth:`Overlap.none`; ``True``: ``Overlap()``; an :class:`Overlap` as it is."""
    if isinstance(overlap, Overlap):
        return overlap
    check_bool("overlap", overlap)
    return Overlap() if overlap else Overlap.none()


class Term(NamedTuple):
    """One part of a step: seconds on the critical path, seconds hidden, and why."""

    name: str
    seconds: float
    hidden: float
    why: str


def explain(terms: tuple[Term, ...], width: int = 88) -> str:
    """Each term: its exposed seconds, the seconds hidden, and why, wrapped to ``width``."""
    lines = []
    for t in terms:
        hidden = f" (+{t.hidden:.3f} s hidden)" if t.hidden else ""
        text = f"{t.name:<8} {t.seconds:7.3f} s{hidden}: {t.why}"
        lines += textwrap.wrap(text, width, subsequent_indent=" " * 9)
    return "\n".join(lines)


def tp_exposed(model, config, *, seq_len: int, seconds: float, m: int, layers: int,
               moe_layers: int, rate: float, alpha: float, mode: str) -> tuple[float, str]:  # noqa: ANN001  # fmt: skip
    """Seconds of the TP collectives left exposed under ``mode`` (module docstring), and why."""
    c, llama = config, model.llama
    if not seconds:
        return 0.0, "no tensor parallelism (tp = 1)"
    collectives = 6 if c.recompute == "full" else 4
    forward = collectives - 2  # the forward's (and a full recomputation's) collectives
    if mode == "none":
        return seconds, f"exposed: {collectives} collectives per layer, none overlapped"
    t, h, ar = c.tp, llama.hidden, seconds / (m * layers * collectives)
    rows = c.micro_batch * seq_len // c.cp  # the tokens a rank's products run over
    kv = kv_heads_per_rank(llama.kv_heads, t) * llama.head_dim
    half = (ar - 2 * (t - 1) * alpha) / 2 + (t - 1) * alpha  # an all-gather or reduce-scatter
    moe = model.moe
    exposed = 0.0
    for ffn, count in (
        (llama.ffn_hidden, layers - moe_layers),
        ((moe.top_k + moe.shared_experts) * moe.expert_ffn if moe else 0, moe_layers),
    ):
        gemm = lambda k, n: 2 * rows * k * n / rate  # noqa: B023, E731  (rows x k) @ (k x n)
        qkv, w13 = gemm(h, h // t + 2 * kv), gemm(h, 2 * ffn // t)  # the column-parallel ones
        backward = max(0.0, ar - qkv) + max(0.0, ar - w13)  # dX all-reduce beside dW
        products = (qkv, gemm(h // t, h), w13, gemm(ffn // t, h))
        decomposed = sum((t - 1) * max(0.0, half / (t - 1) - g / t) for g in products)
        fwd = decomposed * forward / 2 if mode == "async" and c.sp else forward * ar
        exposed += m * count * (backward + fwd)
    why = "dX all-reduce under the dW product (Megatron-LM, chapter 7)"
    if mode == "async" and c.sp:
        why += "; the forward's all-gathers and reduce-scatters decomposed into t chunk products"
        return exposed, why + " (async TP: torch.compile and SymmetricMemory)"
    why += f"; the forward's {forward} collectives per layer exposed"
    if mode == "async":
        return exposed, why + " (async TP decomposes sequence parallelism's: needs sp)"
    return exposed, why + " (Overlap(tp='async') decomposes them)"


def cp_exposed(model, config, *, seq_len: int, seconds: float, m: int, layers: int,
               rate: float, bandwidth: float, on: bool) -> tuple[float, str]:  # noqa: ANN001  # fmt: skip
    """Seconds of the ring left exposed: ``1 - compute / transfer`` of each step when the block
    attention is the shorter, nothing when it is the longer (chapter 8), and why."""
    c, llama = config, model.llama
    if not seconds:
        return 0.0, "no context parallelism (cp = 1)"
    if not on:
        return seconds, "exposed: the ring not overlapped"
    passes = 4 if c.recompute == "full" else 3  # forward, backward (twice the bytes), again
    transfer = seconds / (m * layers * passes * (c.cp - 1))  # one forward ring step
    heads, kv = llama.heads // c.tp, kv_heads_per_rank(llama.kv_heads, c.tp)
    local = seq_len // c.cp
    block = 2 * c.micro_batch * heads * local * local * llama.head_dim / rate  # a zig-zag step
    need = min_tokens_per_rank(heads=heads, kv_heads=kv, bandwidth=bandwidth, flops=rate)
    exposed = seconds * max(0.0, 1 - block / transfer)
    verdict = "hidden" if not exposed else f"{1 - block / transfer:.0%} of each step exposed"
    return exposed, (
        f"ring step under block attention (chapter 8): s/cp = {local:,} tokens against "
        f"{need:,.0f} needed without latency; {verdict}"
    )


def ep_exposed(seconds: float, *, recompute: str, m: int, compute: float, beta: float,
               on: bool) -> tuple[float, str]:  # fmt: skip
    """Seconds of the all-to-alls left exposed, and why (module docstring)."""
    if not seconds:
        return 0.0, "no expert parallelism (ep = 1)"
    if not on:
        return seconds, (
            "exposed: 1F1B and interleaving run one chunk at a time; hiding the all-to-alls "
            "needs a schedule pairing two micro-batches (DualPipe: Overlap(ep=True))"
        )
    if m < 2:
        return seconds, "exposed: one micro-batch, none to pair it with"
    fwd = seconds * 2 / all_to_alls_per_step(recompute)
    exposed = max(0.0, fwd - beta * compute) + max(0.0, seconds - fwd - (1 - beta) * compute)
    return exposed, (
        "all-to-alls under the paired micro-batch's compute (DualPipe-style; the bubble "
        "stays 1F1B's)"
    )


def dp_hidden(config, *, m: int, layers: int, compute: float, beta: float, grads: float,
              param: float, replica: float) -> tuple[float, float, float, str]:  # noqa: ANN001  # fmt: skip
    """Seconds of the ZeRO exchange hidden: (gradients, parameters, HSDP replicas), and why."""
    c = config
    once = c.zero < 2 or c.reshard == "after_step_no_sync"  # gradients reduced once per step
    w_bwd = beta * compute / (m if once else 1)
    rounds = m if c.zero == 3 and c.reshard in ("after_forward", "after_backward") else 1
    w_fwd = (1 - beta) * compute * rounds / m
    why = "gradients under " + ("the last backward" if once else "every backward")
    if c.zero == 3:  # the step's first gather: one layer's of its rounds x layers gathers
        w_fwd = min(w_fwd, param * (1 - 1 / (rounds * layers)))
        why += f"; parameters prefetched under {'every' if rounds > 1 else 'the first'} forward"
        why += ", the step's first gather exposed"
    elif c.zero:  # the first gather waits at the first layer (Megatron-LM's forward pre-hook)
        w_fwd = min(w_fwd, param * (1 - 1 / layers))
        why += "; parameters after the optimizer step, under the next step's first forward"
        why += ", its first gather exposed"
    w_rep = beta * compute / (m if c.hsdp_sync == "step" else 1)
    if replica:
        why += "; replicas' all-reduce under " + (
            "the last backward" if c.hsdp_sync == "step" else "every backward"
        )
    return min(grads, w_bwd), min(param, w_fwd), min(replica, w_rep), why


def hide(model, cluster, config, overlap: Overlap, *, seq_len: int, m: int, layers: int,
         moe_layers: int, compute: float, beta: float, times: dict[str, float],
         dp_parts: dict[str, float], param: float,
         ) -> tuple[dict[str, float], tuple[float, float, float], dict[str, str]]:  # noqa: ANN001  # fmt: skip
    """What stays exposed of each axis's ``times`` (``tp``, ``cp``, ``ep``, ``pp``), the seconds
    of the ZeRO exchange hidden (gradients, parameters, HSDP replicas), and why, per term."""
    c, ov = config, overlap
    kw = {"seq_len": seq_len, "m": m, "layers": layers,
          "rate": cluster.peak_flops * cluster.matmul_efficiency}  # fmt: skip
    exposed, why = {}, {}
    exposed["tp"], why["tp"] = tp_exposed(
        model, c, **kw, seconds=times["tp"], moe_layers=moe_layers, mode=ov.tp,
        alpha=cluster.link(c.tp, 1).alpha,
    )  # fmt: skip
    exposed["cp"], why["cp"] = cp_exposed(
        model, c, **kw, seconds=times["cp"], on=ov.cp,
        bandwidth=cluster.link(c.cp, strides(c)["cp"]).bandwidth,
    )  # fmt: skip
    exposed["ep"], why["ep"] = ep_exposed(
        times["ep"], recompute=c.recompute, m=m, compute=compute, beta=beta, on=ov.ep
    )
    exposed["pp"] = times["pp"] - (min(times["pp"], compute) if ov.pp else 0.0)
    why["pp"] = "no pipeline (pp = 1)" if not times["pp"] else (
        "sends under the next micro-batch's products" if ov.pp else "exposed: sends not overlapped"
    )  # fmt: skip
    replica = dp_parts["dp_replica"]
    grads = sum(dp_parts.values()) - param - replica
    if not sum(dp_parts.values()):
        return exposed, (0.0, 0.0, 0.0), {**why, "dp": "no ZeRO exchange (dp x cp = 1)"}
    if not ov.dp:
        return exposed, (0.0, 0.0, 0.0), {**why, "dp": "exposed: after the last backward"}
    *hidden, why["dp"] = dp_hidden(
        c, m=m, layers=layers, compute=compute, beta=beta, grads=grads, param=param,
        replica=replica,
    )  # fmt: skip
    return exposed, tuple(hidden), why
