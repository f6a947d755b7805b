"""What the lab and chapter 10 call: expert parallelism against the single-process reference
(through :mod:`minitorch_dist.reference`), and its all-to-all bytes counted from the real split
sizes against :func:`all_to_all_bytes`. Every function runs its ranks with
:func:`minitorch_dist.launch`. The split sizes are watched from outside the layer:
:func:`observe_dispatch` attaches a :class:`DispatchObserver` to an :class:`ExpertParallelMoE`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.expert_parallel.cost import all_to_all_bytes, capacity_buffer_bytes
from minitorch_dist.expert_parallel.layer import apply_expert_parallel
from minitorch_dist.expert_parallel.observe import DispatchObserver, observe_dispatch
from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.models.moe import MoEBlock, MoEConfig, moe_preset, use_moe
from minitorch_dist.reference import (  # full_cross_entropy: importable here too
    Comparison,
    Holding,
    Run,
    Shard,
    adamw,
    compare_runs,
    full_cross_entropy,
    make_batches,
    reference_run,
    run_training,
)

__all__ = [
    "ROUTINGS",
    "TINY_MOE",
    "DispatchObserver",
    "DispatchRun",
    "EPRun",
    "compare_with_reference",
    "full_cross_entropy",
    "measure_dispatch",
    "moe_llama",
    "observe_dispatch",
    "routed_input",
]

TINY_MOE = moe_preset("tiny-moe")  # (LlamaConfig tiny, MoEConfig(4 experts, top-2, width 88))
ROUTINGS = ("uniform", "random", "skewed")


def moe_llama(config: LlamaConfig, moe: MoEConfig, seed: int = 0) -> Llama:
    """The tiny Llama with every MLP swapped for a seeded :class:`MoEBlock`."""
    return use_moe(Llama(config), moe, seed=seed)


@dataclass(frozen=True)
class EPRun:
    """What :func:`compare_with_reference` trains, on both sides (its keyword arguments)."""

    steps: int = 3  # AdamW steps
    dtype: torch.dtype = torch.float64  # fp64: only the order of additions differs
    config: LlamaConfig | None = None  # the model (None: the tiny Llama of TINY_MOE)
    moe: MoEConfig | None = None  # its MoE blocks, dropless (None: TINY_MOE's)
    global_batch: int = 4  # sequences per step; rank r trains on rows r*gbs/ep ...
    seq_len: int = 16
    lr: float = 1e-2
    seed: int = 0  # of the model's weights (and experts) and of the batches
    sync_grads: bool = True  # False: the replicated gradients not averaged (a bug)
    timeout: float = 120.0  # seconds for the launch


def _ep_rank(rank: int, ep: int, run: EPRun, batches: list) -> Run:
    torch.set_num_threads(1)
    torch.manual_seed(run.seed)  # the same full model on every rank: each keeps its experts
    model = moe_llama(run.config, run.moe, run.seed).to(run.dtype)
    apply_expert_parallel(model, dist.group.WORLD, sync_grads=run.sync_grads)
    opt = adamw(run.lr)([p for p in model.parameters() if p.requires_grad])
    return run_training(
        model, opt, batches, loss_fn=full_cross_entropy, rank=rank, world_size=ep
    )  # data parallel: rows r*gbs/ep ...


def compare_with_reference(ep: int, run: EPRun | None = None, **options: Any) -> list[Comparison]:
    """Train ``run.steps`` AdamW steps of the tiny Llama with MoE blocks (dropless),
    expert-parallel over ``ep`` ranks (each on its 1/ep of every batch) and in one process;
    ``options`` replace fields of ``run`` (an :class:`EPRun`). Per rank a
    :class:`~minitorch_dist.reference.Comparison` with errors named ``loss <k>`` (the mean of
    the ranks' losses vs the reference's), ``outputs`` (its rows of the logits), ``grad <name>``
    and ``weight <name>`` for every parameter the rank holds (its experts and everything
    replicated), and ``names held by no rank`` (0: the comparison raises an AssertionError
    when some parameter is held by no rank).
    """
    run = replace(run or EPRun(), **options)
    run = replace(run, config=run.config or TINY_MOE[0], moe=run.moe or TINY_MOE[1])
    config, moe, seed = run.config, run.moe, run.seed
    check_int("ep", ep)
    check_int("steps", run.steps)
    if moe.capacity_factor is not None:
        raise ValueError("the reference comparison is dropless: pass capacity_factor=None")
    batches = make_batches(config.vocab_size, run.global_batch, run.seq_len, run.steps, seed)
    ref = reference_run(
        lambda: moe_llama(config, moe, seed),
        adamw(run.lr),
        batches,
        seed=seed,
        dtype=run.dtype,
        loss_fn=full_cross_entropy,
    )
    runs = launch(_ep_rank, ep, run, batches, timeout=run.timeout)
    # each rank trains on its rows (outputs: its chunk of the batch) and holds its own experts
    # and every replicated parameter; together the ranks hold every parameter (else it raises)
    holding = Holding(outputs=lambda rank: Shard(0, rank, ep), names="some")
    results = compare_runs(runs, ref, holding=holding)
    for comparison in results:
        comparison.errors["names held by no rank"] = 0.0  # compare_runs raised otherwise
    return results


def routed_input(
    tokens: int,
    hidden: int,
    experts: int,
    top_k: int,
    routing: str,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Tokens (T, h) for a block whose gate is ``[I_E | 0]`` (:func:`_fixed_gate`): "uniform"
    sends token t to experts t, t+1, ... t+k-1 (mod E), so with T a multiple of E every expert
    gets exactly T k / E choices; "skewed" sends every token to experts 0 ... k-1; "random"
    draws the logits."""
    check_choice("routing", routing, ROUTINGS)
    if hidden < experts:
        raise ValueError(f"hidden={hidden} must be >= experts={experts} for a fixed routing")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=gen, dtype=torch.float64) * 0.1
    if routing != "random":
        x[:, :experts] = 0.0
        for j in range(top_k):  # logit k - j for the j-th choice: distinct, no ties
            cols = (torch.arange(tokens) + j) % experts if routing == "uniform" else j
            x[torch.arange(tokens), cols] = float(top_k - j)
    return x.to(dtype)


@torch.no_grad()
def _fixed_gate(block: MoEBlock) -> None:
    """Gate weight [I_E | 0]: logits are the first E coordinates of the token."""
    w = block.router.gate.weight
    w.zero_()
    w[:, : w.shape[0]] = torch.eye(w.shape[0], dtype=w.dtype)


@dataclass(frozen=True)
class DispatchRun:
    """What :func:`measure_dispatch` runs (its keyword arguments)."""

    tokens: int = 64  # per rank
    hidden: int = 64
    moe: MoEConfig | None = None  # the block (None: the tiny lab shape, TINY_MOE's)
    dispatch_mode: str = "dropless"  # or "capacity": fixed-size buffers, overflow dropped
    routing: str = "uniform"  # "uniform", "random" or "skewed": see routed_input
    repeats: int = 0  # timed forward + backward steps after one warm-up
    dtype: torch.dtype = torch.float32
    seed: int = 0
    timeout: float = 120.0  # seconds for the launch


def _dispatch_rank(rank: int, ep: int, run: DispatchRun) -> dict[str, Any]:
    torch.set_num_threads(1)
    torch.manual_seed(run.seed)
    moe, hidden, mode = run.moe, run.hidden, run.dispatch_mode
    block = MoEBlock(hidden, moe).to(run.dtype)
    if run.routing != "random":
        _fixed_gate(block)
    layer = apply_expert_parallel(block, dist.group.WORLD, dispatch_mode=mode, sync_grads=False)
    seen = observe_dispatch(layer)
    x = routed_input(
        run.tokens,
        hidden,
        moe.experts,
        moe.top_k,
        run.routing,
        seed=run.seed + rank,
        dtype=run.dtype,
    ).requires_grad_()
    el = x.element_size()
    times = []
    for i in range(run.repeats + 1):  # the first step warms up
        dist.barrier()
        start = time.perf_counter()
        with CommCounter() as cc:
            layer(x).sum().backward()
        dist.barrier()
        if i:
            times.append(time.perf_counter() - start)
    send, recv = seen.send_splits, seen.recv_splits
    away = lambda splits: sum(n for j, n in enumerate(splits) if j != rank)  # noqa: E731
    counts = collective_bytes("all_to_all", moe.experts * 8, ep) if mode == "dropless" else 0
    return {
        "dispatch_bytes": away(send) * hidden * el,  # forward dispatch, from the split sizes
        "combine_bytes": away(recv) * hidden * el,
        "step_bytes": 2 * (away(send) + away(recv)) * hidden * el,  # + backward's two
        "counter_bytes": cc.bytes_sent["all_to_all"] - counts,  # CommCounter, counts left out
        "calls": cc.calls["all_to_all"],
        "tokens_per_expert": layer.last_tokens_per_expert.tolist(),
        "dropped": int((~layer.last_keep).sum()),
        "seconds": sorted(times)[len(times) // 2] if times else float("nan"),
        "best_seconds": min(times) if times else float("nan"),
    }


def measure_dispatch(
    ep: int, run: DispatchRun | None = None, **options: Any
) -> list[dict[str, Any]]:
    """One MoE block (``run.moe``, default the tiny lab shape) expert-parallel over ``ep``
    ranks, ``run.tokens`` tokens per rank routed by ``run.routing`` (:func:`routed_input`);
    ``options`` replace fields of ``run`` (a :class:`DispatchRun`). Per rank: bytes it
    sent (``dispatch_bytes``, ``combine_bytes`` and ``step_bytes`` for the four all-to-alls,
    from the real split sizes; ``counter_bytes`` as CommCounter books them, the counts'
    exchange left out), ``calls``, ``tokens_per_expert`` (its choices), ``dropped``, the median
    ``seconds`` (and the fastest, ``best_seconds``) of ``repeats`` timed forward + backward
    steps, and the closed forms ``formula``
    (:func:`all_to_all_bytes`) and ``buffer_formula`` (:func:`capacity_buffer_bytes`, when a
    capacity factor is set)."""
    run = replace(run or DispatchRun(), **options)
    run = replace(run, moe=run.moe or TINY_MOE[1])
    moe, tokens, hidden, dtype = run.moe, run.tokens, run.hidden, run.dtype
    check_int("ep", ep)
    check_int("repeats", run.repeats, minimum=0)
    runs = launch(_dispatch_rank, ep, run, timeout=run.timeout)
    el = torch.empty((), dtype=dtype).element_size()
    for run in runs:
        if tokens * moe.top_k % ep == 0:
            run["formula"] = all_to_all_bytes(
                tokens=tokens, top_k=moe.top_k, hidden=hidden, ep=ep, bytes_per_element=el
            )
        if moe.capacity_factor is not None:
            run["buffer_formula"] = capacity_buffer_bytes(
                tokens=tokens,
                top_k=moe.top_k,
                hidden=hidden,
                ep=ep,
                experts=moe.experts,
                capacity_factor=moe.capacity_factor,
                bytes_per_element=el,
            )
    return runs
