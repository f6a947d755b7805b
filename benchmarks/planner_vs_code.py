"""The planner's predicted peak bytes per rank against the package's own parallel code, at scale.

For each layout (a preset, a :class:`~minitorch_dist.planner.ParallelConfig`, a sequence length)
one process plays one rank -- rank 0 of the pipeline's first stage and, with pp > 1, rank 0 of
its last -- of the package's own parallel program for one training step, on fake tensors
(``FakeTensorMode``: shapes, no storage) and torch's fake process group (collectives and
point-to-point messages return at once; sub-groups work). The package's
:class:`~minitorch_dist.memory.MemoryTracker` counts every live storage; its peak is the
measurement. Nothing here calls the planner's formulas to measure: the code runs.

What runs (the chapter's composition, :func:`minitorch_dist.parallel3d.build_3d`):

- the model built in bf16 (``torch.set_default_dtype``), cut into its pipeline stage(s), tensor
  (+ sequence) parallel over the tp group, ring attention over the cp group, ZeRO-1 over dp x cp
  with a mixed-precision Adam inside (:class:`~minitorch_dist.precision.MixedPrecisionOptimizer`:
  fp32 master, m, v of this rank's shard); recomputation by
  :func:`~minitorch_dist.models.checkpointing.apply_torch_checkpointing`;
- the schedule's own runtime (:func:`~minitorch_dist.pipeline.run_schedule`: 1F1B, or the
  interleaved schedule over ``v`` chunks per rank), with its in-flight micro-batches;
- ZeRO-3: :func:`~minitorch_dist.zero.apply_zero3` with bf16 compute over an fp32 model, Adam over
  the shards;

Not measured: expert parallelism. :func:`~minitorch_dist.models.moe.use_moe` moves each new
block with ``.to(device, dtype)``, which fails on fake modules ("Couldn't swap Linear.weight"),
and the dropless dispatch reads its split sizes from the routing (``.tolist()``), which fake
tensors do not have.

One warm-up step runs first (untracked), so the optimizer states exist; the second step is
measured, gradients accumulating into the buffers of the first (``zero_grad(set_to_none=False)``,
as Megatron-LM's ``main_grad`` buffers do).

Substitute, because fake tensors carry no values: a loss's value (``loss.item()``, which the
pipeline runtime logs) reads 0.0.

Layer counts are reduced where the per-layer pattern is exact (every layer stores the same bytes,
a pipeline stage holds ``L / p`` of them): the table gives the layers run. The planner is asked
about the same reduced model, with ``activations="exact"`` (what it ranks with) and
``"korthikanti"`` (the textbook count), and the last line is the bound the exact count holds:

    python benchmarks/planner_vs_code.py --quick        # a subset covering every axis
    python benchmarks/planner_vs_code.py --out benchmarks/results/cpu-2core_planner_vs_code.md
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from minitorch_dist.grid import GridLayout, ProcessGrid
from minitorch_dist.memory import MemoryTracker, format_bytes
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.models.moe_configs import MOE_PRESETS
from minitorch_dist.planner import ParallelConfig, as_model, rank_memory
from minitorch_dist.precision import MixedPrecisionOptimizer


@dataclass(frozen=True)
class Layout:
    """One row of the table: a preset cut by ``config`` at ``seq_len``; ``layers`` run."""

    preset: str
    config: ParallelConfig
    seq_len: int
    layers: int  # layers of the model run (the preset's, or fewer: the per-layer pattern is exact)
    micro_batches: int  # per pipeline per step (>= pp: the schedule's in-flight peak is reached)
    quick: bool = False


LAYOUTS = [
    # tensor + sequence parallelism, ZeRO-1, selective recomputation (Llama 3's 8B recipe)
    Layout(
        "llama-3-8b",
        ParallelConfig(dp=8, tp=8, sp=True, zero=1, recompute="selective"),
        8192,
        2,
        1,
        quick=True,
    ),
    # tp without sp, no recomputation
    Layout("llama-3-8b", ParallelConfig(dp=8, tp=8, zero=1, recompute="none"), 8192, 2, 1),
    # full recomputation
    Layout(
        "llama-3-70b",
        ParallelConfig(dp=4, tp=8, sp=True, zero=1, recompute="full"),
        8192,
        2,
        1,
        quick=True,
    ),
    # 1F1B pipeline: first and last stage (Llama 3 70B: tp 8, pp 4)
    Layout(
        "llama-3-70b",
        ParallelConfig(dp=2, tp=8, pp=4, sp=True, zero=1, recompute="selective"),
        8192,
        8,
        4,
        quick=True,
    ),
    # interleaved 1F1B, v = 2
    Layout(
        "llama-3-70b",
        ParallelConfig(dp=2, tp=8, pp=4, v=2, sp=True, zero=1, recompute="selective"),
        8192,
        16,
        4,
    ),
    # context parallelism (ring attention), tp 8 with sp
    Layout(
        "llama-3-8b",
        ParallelConfig(dp=2, tp=8, cp=2, sp=True, zero=1, recompute="none"),
        8192,
        2,
        1,
        quick=True,
    ),
    # ZeRO-3 over 8 data-parallel ranks
    Layout("llama-3-8b", ParallelConfig(dp=8, zero=3, recompute="full"), 8192, 2, 1, quick=True),
]


def reduced(preset: str, layers: int) -> LlamaConfig | tuple:
    """The preset with ``layers`` layers (MoE presets: the pair, its Llama cut)."""
    if preset in MOE_PRESETS:
        llama, moe = MOE_PRESETS[preset]
        return dataclasses.replace(llama, layers=layers), moe
    return dataclasses.replace(LlamaConfig.from_preset(preset), layers=layers)


class MixedAdam(MixedPrecisionOptimizer):
    """Mixed-precision Adam (fp32 master, m, v) taking param groups, as ZeRO hands them over."""

    def __init__(self, groups: list, **kwargs: object) -> None:
        params = [p for g in groups for p in (g["params"] if isinstance(g, dict) else [g])]
        hyper = {k: v for g in groups if isinstance(g, dict) for k, v in g.items()
                 if k in ("lr", "betas", "eps", "weight_decay")}  # fmt: skip
        super().__init__(params, torch.optim.Adam, **{**hyper, **kwargs})
        self.defaults = dict(self.optimizer.defaults)


class RealIntegers(TorchDispatchMode):
    """Run for real the operators whose tensor inputs are all real (the routing's integers), and
    integer factories; everything else goes on to the fake mode below."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and isinstance(args[0], FakeTensor):
            return 0.0  # a fake loss's value (the runtime logs it): there is none
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        real = bool(tensors) and not any(isinstance(t, FakeTensor) for t in tensors)
        if not tensors:
            dtype = kwargs.get("dtype")
            real = (dtype is not None and not dtype.is_floating_point) or (
                func is torch.ops.aten.arange.default and dtype is None
                and all(isinstance(a, int) for a in args)
            )  # fmt: skip
        if real:
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def _tokens(micro_batch: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq = torch.zeros(micro_batch, tokens, dtype=torch.long)
    return seq, seq.clone()


def _run_grid(lay: Layout, cfg: LlamaConfig, pp_index: int, world: int) -> dict:
    """build_3d's composition (pipeline stage(s), tp/sp, ring attention, ZeRO-1) for one rank."""
    from minitorch_dist.context_parallel import ContextParallelCore
    from minitorch_dist.models import split_layers
    from minitorch_dist.parallel3d.clip import ClippedZeroStage1, tp_replicated
    from minitorch_dist.parallel3d.recipe import GridStage
    from minitorch_dist.pipeline import PipelineStage, make_schedule, run_schedule
    from minitorch_dist.tensor_parallel import (
        VocabParallelEmbedding,
        parallelize_block,
        sequence_parallel_norms,
        tp_loss_fn,
        vocab_parallel_head,
    )  # fmt: skip

    c = lay.config
    grid = ProcessGrid(dp=c.dp, pp=c.pp, cp=c.cp, tp=c.tp)
    tp_group, cp_group = grid.group("tp"), grid.group("cp")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = Llama(cfg)
    finally:
        torch.set_default_dtype(previous)
    # the same steps as build_3d (lab11.1), for v chunks per rank (build_3d makes one)
    bounds = [0]
    for n in split_layers(cfg.layers, c.pp * c.v):
        bounds.append(bounds[-1] + n)
    chunks = []
    for k in range(pp_index, c.pp * c.v, c.pp):
        stage = GridStage(model, bounds[k], bounds[k + 1], seq_len=lay.seq_len,
                          cp_group=cp_group, layout="zigzag")  # fmt: skip
        if c.sp:
            sequence_parallel_norms(stage, tp_group)
        for block in stage.layers:
            parallelize_block(block, tp_group, sp=c.sp)
        if stage.embed is not None:
            stage.embed = VocabParallelEmbedding.from_embedding(stage.embed, tp_group, sp=c.sp)
        if stage.head is not None:
            stage.head = vocab_parallel_head(stage.head, tp_group, sp=c.sp)
        apply_torch_checkpointing(stage, c.recompute)  # before cp: selective wraps the core
        if c.cp > 1:
            for block in stage.layers:
                block.attn.core = ContextParallelCore(cp_group, "zigzag")
        chunks.append(stage)
    del model
    named = {}
    for chunk in chunks:
        named.update(chunk.model_named_parameters())
    replicated = {}
    for chunk in chunks:
        replicated.update(tp_replicated(chunk, tp_group))
    opt = ClippedZeroStage1(list(named.values()), MixedAdam, grid=grid,
                            group=grid.group("dp_cp"), replicated=replicated, lr=1e-4)  # fmt: skip
    pipe = PipelineStage(chunks, pp_index, c.pp, grid.group("pp"))
    kind = "1f1b" if c.v == 1 else "interleaved"
    schedule = make_schedule(kind, c.pp, lay.micro_batches, c.v)
    loss_fn = tp_loss_fn(tp_group, cfg.vocab_size)
    tokens = lay.seq_len // c.cp
    shape = (c.micro_batch, tokens // (c.tp if c.sp else 1), cfg.hidden)
    batches = [_tokens(c.micro_batch, tokens) for _ in range(lay.micro_batches)]

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        run_schedule(schedule, pipe, batches, loss_fn=loss_fn, activation_shape=lambda _: shape)
        opt.step()

    class Stages(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.chunks = torch.nn.ModuleList(chunks)

    return _measure(step, Stages(), opt, zero=True)


def _run_zero3(lay: Layout, cfg: LlamaConfig) -> dict:
    from minitorch_dist.zero import MixedPrecision, apply_zero3

    model = Llama(cfg)  # fp32 master shards; bf16 compute
    apply_torch_checkpointing(model, lay.config.recompute)
    apply_zero3(model, mp_policy=MixedPrecision(param_dtype=torch.bfloat16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = _tokens(lay.config.micro_batch, lay.seq_len)

    def step() -> None:
        opt.zero_grad(set_to_none=False)
        cross_entropy(model(batch[0]), batch[1]).backward()
        opt.step()

    return _measure(step, model, opt, zero=False)


def _measure(step, model: torch.nn.Module, opt: object, *, zero: bool) -> dict:  # noqa: ANN001
    """One warm-up step (the optimizer's states appear), then one measured step."""
    step()
    with MemoryTracker(model, opt) as tracker:
        if zero:
            for category, tensors in opt.state_tensors().items():
                for t in tensors:
                    tracker.track(t, category)
        inner = getattr(opt, "optimizer", None)  # ZeRO's MixedAdam, or MixedAdam itself
        for o in (opt, inner, getattr(inner, "optimizer", None)):
            for t in tree_leaves(list(getattr(o, "state", {}).values())):
                if isinstance(t, torch.Tensor):  # masters, Adam's m and v
                    tracker.track(t, "optimizer")
        step()
    return {"peak": tracker.peak_total, "parts": tracker.peak()}


def measure(lay: Layout, pp_index: int) -> dict:
    """Rank 0 of pipeline stage ``pp_index`` of ``lay``, one step on fake tensors: peak bytes."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

    c = lay.config
    world = c.dp * c.tp * c.pp * c.cp
    model = reduced(lay.preset, lay.layers)
    rank = GridLayout(dp=c.dp, pp=c.pp, cp=c.cp, tp=c.tp).rank_of(dp=0, pp=pp_index, cp=0,
                                                                      ep=0, tp=0)  # fmt: skip
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    start = time.perf_counter()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), RealIntegers():
            if c.zero == 3:
                out = _run_zero3(lay, model)
            else:
                out = _run_grid(lay, model, pp_index, world)
    finally:
        dist.destroy_process_group()
    out["seconds"] = time.perf_counter() - start
    return out


def predict(lay: Layout, stage: int, activations: str) -> int:
    model = as_model(reduced(lay.preset, lay.layers))
    gb = lay.micro_batches * lay.config.dp * lay.config.micro_batch
    kw = {"seq_len": lay.seq_len, "global_batch": gb, "activations": activations}
    return rank_memory(model, lay.config, stage=stage, **kw)["total"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the subset covering every axis")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    layouts = [lay for lay in LAYOUTS if lay.quick or not args.quick]
    print("| model | layout | seq | layers run | stage | measured | exact | ratio | Korthikanti "
          "| ratio | time |")  # fmt: skip
    rows, worst, n = [], 0.0, 0
    start = time.perf_counter()
    for lay in layouts:
        stages = [0] if lay.config.pp == 1 else [0, lay.config.pp - 1]
        for stage in stages:
            got = measure(lay, stage)
            exact = predict(lay, stage, "exact")
            textbook = predict(lay, stage, "korthikanti")
            ratio = got["peak"] / exact
            worst, n = max(worst, abs(ratio - 1)), n + 1
            preset_layers = as_model(lay.preset).llama.layers
            rows.append(
                f"| {lay.preset} | {lay.config.label()} | {lay.seq_len} | "
                f"{lay.layers} of {preset_layers} | {stage} | {format_bytes(got['peak'])} | "
                f"{format_bytes(exact)} | {ratio:.3f} | {format_bytes(textbook)} | "
                f"{got['peak'] / textbook:.3f} | {got['seconds']:.0f} s |"
            )
            print(rows[-1], flush=True)
    lines = [
        f"<!-- 2-core CPU, torch {torch.__version__}; benchmarks/planner_vs_code.py"
        f"{' --quick' if args.quick else ''}; {time.perf_counter() - start:.0f} s. -->",
        "# Planner vs the code it plans: peak bytes of one rank, fake tensors, fake peers",
        "",
        "| model | layout | seq | layers run | stage | measured peak | planner (exact) | "
        "measured / exact | planner (Korthikanti) | measured / Korthikanti | time |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"max |measured/predicted - 1| = {worst:.4f} over {n} layouts",
    ]
    text = "\n".join(lines)
    print(lines[-1])
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
