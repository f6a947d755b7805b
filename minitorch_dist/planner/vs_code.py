"""The planner against the code it plans: one rank of a layout, run on fake tensors and peers.

For a :class:`Layout` (a preset, a :class:`~minitorch_dist.planner.ParallelConfig`, a sequence
length, the layers to run), :func:`measure` makes this process rank 0 of one pipeline stage of
the package's own parallel program, in torch's fake process group, and runs one training step on
fake tensors under the memory tracker (:mod:`.fake_run`); :func:`predict` asks the planner
(:func:`~minitorch_dist.planner.rank_memory`) about the same rank. What runs, and the
substitutes fake tensors need, are in ``benchmarks/planner_vs_code.py``'s docstring and
chapter 12.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode

from minitorch_dist.grid import GridLayout, ProcessGrid
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.models.moe_configs import MOE_PRESETS

from .config import ParallelConfig
from .fake_run import MixedAdam, RealIntegers, measure_step, tokens, uniform_routing
from .fit import rank_memory
from .model import as_model

__all__ = ["Layout", "measure", "predict", "reduced"]


@dataclass(frozen=True)
class Layout:
    """One row of the table: a preset cut by ``config`` at ``seq_len``; ``layers`` run."""

    preset: str
    config: ParallelConfig
    seq_len: int
    layers: int  # layers of the model run (the preset's, or fewer: the per-layer pattern is exact)
    micro_batches: int  # per pipeline per step (>= pp: the schedule's in-flight peak is reached)
    quick: bool = False


def reduced(preset: str, layers: int) -> LlamaConfig | tuple:
    """The preset with ``layers`` layers (MoE presets: the pair, its Llama cut)."""
    if preset in MOE_PRESETS:
        llama, moe = MOE_PRESETS[preset]
        return dataclasses.replace(llama, layers=layers), moe
    return dataclasses.replace(LlamaConfig.from_preset(preset), layers=layers)


def _run_grid(lay: Layout, cfg: LlamaConfig, pp_index: int) -> dict:
    """One rank of the 3D grid, built by the chapters' transforms -- the pipeline's cut into
    ``v`` chunks per rank, tensor (+ sequence) parallelism and ring attention on each chunk --
    and chapter 11's ZeRO-1 with the grid's norm (lab 11.1's ``grid_grad_norm``, called)."""
    from minitorch_dist.context_parallel import apply_context_parallel
    from minitorch_dist.parallel3d.clip import ClippedZeroStage1, tp_replicated
    from minitorch_dist.pipeline import apply_pipeline_parallel, run_schedule
    from minitorch_dist.tensor_parallel import apply_tensor_parallel, tp_loss_fn

    c = lay.config
    grid = ProcessGrid(dp=c.dp, pp=c.pp, cp=c.cp, tp=c.tp)
    tp_group = grid.group("tp")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = Llama(cfg)
    finally:
        torch.set_default_dtype(previous)
    kind = "1f1b" if c.v == 1 else "interleaved"
    pipeline = apply_pipeline_parallel(
        model, grid, schedule=kind, micro_batches=lay.micro_batches, virtual_stages=c.v
    )
    del model  # this rank's chunks hold its layers
    if pipeline.stage.rank != pp_index:  # measure() joined the fake group as this stage's rank
        raise ValueError(f"this process is pipeline rank {pipeline.stage.rank}, not {pp_index}")
    replicated: dict[int, bool] = {}
    for chunk in pipeline.chunks:
        apply_tensor_parallel(chunk, tp_group, sp=c.sp)
        # recomputation after tp, before cp (the order measured since the table was made):
        # selective's checkpoint on the attention core goes with the core when cp swaps in ring
        # attention, which is no AttentionCore -- under cp, selective recomputes nothing
        apply_torch_checkpointing(chunk, c.recompute)
        if c.cp > 1:
            apply_context_parallel(
                chunk, grid.group("cp"), layout="zigzag", seq_len=lay.seq_len, sync_grads=False
            )
        replicated.update(tp_replicated(chunk, tp_group))
    params = list(pipeline.named_parameters().values())  # the model's order, chunk by chunk
    opt = ClippedZeroStage1(
        params, MixedAdam, grid=grid, group=grid.group("dp_cp"), replicated=replicated, lr=1e-4
    )
    loss_fn = tp_loss_fn(tp_group, cfg.vocab_size)
    local = lay.seq_len // c.cp  # this cp rank's tokens
    shape = (c.micro_batch, local // (c.tp if c.sp else 1), cfg.hidden)
    batches = [tokens(c.micro_batch, local) for _ in range(lay.micro_batches)]

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        run_schedule(
            pipeline.schedule,
            pipeline.stage,
            batches,
            loss_fn=loss_fn,
            activation_shape=lambda _: shape,
        )
        opt.step()

    class Stages(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.chunks = torch.nn.ModuleList(pipeline.chunks)

    return measure_step(step, Stages(), opt, zero=True)


def _run_zero3(lay: Layout, cfg: LlamaConfig) -> dict:
    from minitorch_dist.zero import MixedPrecision, apply_zero3

    model = Llama(cfg)  # fp32 master shards; bf16 compute
    apply_torch_checkpointing(model, lay.config.recompute)
    apply_zero3(model, mp_policy=MixedPrecision(param_dtype=torch.bfloat16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = tokens(lay.config.micro_batch, lay.seq_len)

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        cross_entropy(model(batch[0]), batch[1]).backward()
        opt.step()

    return measure_step(step, model, opt, zero=False)


def _run_ep(lay: Layout, cfg: LlamaConfig, moe: object) -> dict:
    """A MoE Llama whose MoE blocks are expert-parallel over the ep ranks (dropless)."""
    from minitorch_dist.expert_parallel import apply_expert_parallel
    from minitorch_dist.models.moe import use_moe

    c = lay.config
    grid = ProcessGrid(dp=c.dp // c.ep, ep=c.ep)  # ep ranks taken from the dp ones
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = use_moe(Llama(cfg), moe)
    finally:
        torch.set_default_dtype(previous)
    apply_torch_checkpointing(model, c.recompute)
    apply_expert_parallel(model, grid.group("ep"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = MixedAdam([{"params": trainable, "lr": 1e-4}])
    batch = tokens(c.micro_batch, lay.seq_len)

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        cross_entropy(model(batch[0]), batch[1]).backward()
        opt.step()

    with uniform_routing(model):
        return measure_step(step, model, opt, zero=False)


def measure(lay: Layout, pp_index: int) -> dict:
    """Rank 0 of pipeline stage ``pp_index`` of ``lay``, one step on fake tensors: ``peak``
    (bytes), ``parts`` (the tracker's categories at the peak) and ``seconds``. This process
    joins torch's fake process group as that rank for the call (ValueError if one exists)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

    if dist.is_initialized():
        raise ValueError("a process group is already initialised in this process")
    c = lay.config
    if not 0 <= pp_index < c.pp:
        raise ValueError(f"pp_index must be in [0, {c.pp}), got {pp_index}")
    world = c.dp * c.tp * c.pp * c.cp
    model = reduced(lay.preset, lay.layers)
    dp = c.dp // c.ep  # ep ranks taken from the dp ones (the grid's ep axis)
    rank = GridLayout(dp=dp, pp=c.pp, cp=c.cp, ep=c.ep, tp=c.tp).rank_of(
        dp=0, pp=pp_index, cp=0, ep=0, tp=0
    )
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    start = time.perf_counter()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), RealIntegers():
            if c.ep > 1:
                out = _run_ep(lay, *model)
            elif c.zero == 3:
                out = _run_zero3(lay, model)
            else:
                out = _run_grid(lay, model, pp_index)
    finally:
        dist.destroy_process_group()
    out["seconds"] = time.perf_counter() - start
    return out


def predict(lay: Layout, stage: int, activations: str) -> int:
    """The planner's bytes for the rank :func:`measure` runs: ``rank_memory(...)["total"]`` of
    the same (reduced) model, ``global_batch`` = the micro-batches run on every replica."""
    model = as_model(reduced(lay.preset, lay.layers))
    gb = lay.micro_batches * lay.config.dp * lay.config.micro_batch
    kw = {"seq_len": lay.seq_len, "global_batch": gb, "activations": activations}
    return rank_memory(model, lay.config, stage=stage, **kw)["total"]
