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
- expert parallelism: :func:`~minitorch_dist.expert_parallel.apply_expert_parallel` (dropless
  all-to-all dispatch) on Mixtral 8x7B, a mixed-precision Adam over every parameter (ZeRO-0).

One warm-up step runs first (untracked), so the optimizer states exist; the second step is
measured, gradients accumulating into the buffers of the first (``zero_grad(set_to_none=False)``,
as Megatron-LM's ``main_grad`` buffers do; :func:`~minitorch_dist.parallel3d.train_step` zeroes
with ``set_to_none=True``, so its backward allocates every gradient again beside ZeRO's flat
buffer, 2 bytes per parameter by the end of backward that a real framework does not hold).

Substitutes, because fake tensors carry no values:

- a loss's value (``loss.item()``, which the pipeline runtime logs) reads 0.0;
- expert routing: the router runs, but its expert indices are replaced by a round-robin choice
  made of real integers (a balanced router, the planner's assumption), and operators whose
  inputs are all real run for real (:class:`~minitorch_dist.planner.fake_run.RealIntegers`), so the dispatch's split sizes exist;
  the count exchange returns what a peer routing like this rank sends. The token rows go
  through the package's all-to-all dispatch and combine.

Layer counts are reduced where the per-layer pattern is exact (every layer stores the same bytes,
a pipeline stage holds ``L / p`` of them): the table gives the layers run. The planner is asked
about the same reduced model, with ``activations="exact"`` (what the package's code stores) and
``"korthikanti"`` (the textbook count, what it ranks with by default), and the last line is the
bound the exact count holds:

    python benchmarks/planner_vs_code.py --quick        # a subset covering every axis
    python benchmarks/planner_vs_code.py --out benchmarks/results/cpu-2core_planner_vs_code.md
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from minitorch_dist.memory import format_bytes
from minitorch_dist.planner import ParallelConfig, as_model
from minitorch_dist.planner.vs_code import Layout, measure, predict


def _layout(
    preset: str, seq_len: int, layers: int, micro_batches: int, quick: bool, **config: object
) -> Layout:
    return Layout(preset, ParallelConfig(**config), seq_len, layers, micro_batches, quick)


# A table: one layout a row (the formatter would spread the longest call over 13 lines).
# fmt: off
LAYOUTS = [
    # the whole 8B model, tp 8 + sp, ZeRO-1, selective: the per-layer pattern the others rely on
    _layout("llama-3-8b", 8192, 32, 1, False, dp=8, tp=8, sp=True, zero=1, recompute="selective"),
    # the same on 2 layers
    _layout("llama-3-8b", 8192, 2, 1, True, dp=8, tp=8, sp=True, zero=1, recompute="selective"),
    # tp without sp, no recomputation
    _layout("llama-3-8b", 8192, 2, 1, False, dp=8, tp=8, zero=1, recompute="none"),
    # full recomputation
    _layout("llama-3-70b", 8192, 2, 1, True, dp=4, tp=8, sp=True, zero=1, recompute="full"),
    # 1F1B pipeline, first and last stage (Llama 3 70B: tp 8, pp 4), 4 micro-batches in flight
    _layout("llama-3-70b", 8192, 8, 4, True, dp=2, tp=8, pp=4, sp=True, zero=1,
            recompute="selective"),
    # interleaved 1F1B, v = 2
    _layout("llama-3-70b", 8192, 16, 4, False, dp=2, tp=8, pp=4, v=2, sp=True, zero=1,
            recompute="selective"),
    # context parallelism (ring attention), tp 8 with sp
    _layout("llama-3-8b", 8192, 2, 1, True, dp=2, tp=8, cp=2, sp=True, zero=1, recompute="none"),
    # ZeRO-3 over 8 data-parallel ranks
    _layout("llama-3-8b", 8192, 2, 1, True, dp=8, zero=3, recompute="full"),
    # expert parallelism (Mixtral 8x7B at its 32k context, 8 experts over 8 ranks)
    _layout("mixtral-8x7b", 32768, 2, 1, True, dp=8, ep=8, zero=0, recompute="selective"),
]
# fmt: on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the subset covering every axis")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    layouts = [lay for lay in LAYOUTS if lay.quick or not args.quick]
    print(
        "| model | layout | seq | layers run | stage | measured | exact | ratio | Korthikanti "
        "| ratio | time |"
    )
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
