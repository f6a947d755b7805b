"""Our data parallelism against torch's DistributedDataParallel (chapter 5, lab 5).

Prints, in one run, on ``--world-size`` ranks (4 emulated gloo ranks by default):

1. step time of our bucketed DDP / torch's DDP (goal: <= 1.15), and naive / bucketed, once per
   run (``--runs``: the whole range run to run), both wrappers with the same buckets (each
   one's defaults, 25 MiB and a 1 MiB first bucket, unless ``--bucket-cap-mb`` sets one cap);
2. the payload bytes each variant all-reduced in one step, as ``CommCounter`` books them (the
   ring formula ``2 (n - 1) / n`` applied to each call's payload), / the same formula for the
   whole gradient (goal: exactly 1). This is a count of payloads, not of wire bytes; for
   torch's DDP it answers whether ``CommCounter`` sees the all-reduces its C++ reducer
   launches from autograd (a ratio of 0 would mean it does not).

    python benchmarks/ddp_vs_torch.py                           # tiny Llama, 4 gloo ranks
    python benchmarks/ddp_vs_torch.py --hidden 256 --layers 4   # a larger model
    python benchmarks/ddp_vs_torch.py --device cuda --world-size 8   # runs itself under torchrun
    python benchmarks/ddp_vs_torch.py --out benchmarks/results/<machine>_ddp_vs_torch.md
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys

import torch
from common import add_model_args, config_from_args, emit

from minitorch_dist.comm import collective_bytes
from minitorch_dist.data_parallel.speed import VARIANTS, compare_variants
from minitorch_dist.launching.launcher import launch, torchrun, under_torchrun
from minitorch_dist.models import LlamaConfig

GOAL = 1.15  # bucketed / torch DDP step time


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--world-size", type=int, default=4)
    add_model_args(p, seq_len=64, micro_batch=2)
    p.add_argument(
        "--bucket-cap-mb",
        type=float,
        default=None,
        help="one cap for both wrappers (default: their defaults, 25 MiB, first bucket 1 MiB)",
    )
    p.add_argument("--runs", type=int, default=1, help="whole comparisons, one ratio line each")
    p.add_argument("--steps", type=int, default=3, help="steps per timed turn")
    p.add_argument("--repeats", type=int, default=7, help="turns per variant (median reported)")
    p.add_argument("--out", help="also write the table as markdown to this path")
    return p.parse_args()


def report(args: argparse.Namespace, config: LlamaConfig, results: list[dict]) -> str:
    result = results[-1]
    sec, sent, n = result["seconds"], result["bytes"], args.world_size
    formula = collective_bytes("all_reduce", result["grad_bytes"], n)
    if args.bucket_cap_mb is None:
        buckets = "both wrappers' default buckets (25 MiB, first bucket 1 MiB)"
    else:
        buckets = f"bucket_cap_mb {args.bucket_cap_mb:g} for both wrappers (no small first bucket)"
    lines = [
        f"<!-- {platform.platform()}, torch {torch.__version__}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, device {args.device} -->",
        f"# Data parallelism: ours vs torch DDP, {n} ranks on {args.device}",
        "",
        f"{config.num_params():,} parameters ({args.preset}, hidden {config.hidden}, "
        f"{config.layers} layers), micro-batch {args.micro_batch} x {args.seq_len} tokens per "
        f"rank, fp32, SGD, {buckets}; median of {args.repeats} turns of {args.steps} steps; "
        f"{len(results)} run(s), the table from the last.",
        "",
        "| variant | step time (ms) | payload bytes booked per step | bytes / formula |",
        "|---|---:|---:|---:|",
    ]
    for v in VARIANTS:
        share = f"{sent[v] / formula:.4f}" if formula else "-"
        lines.append(f"| {v} | {1e3 * sec[v]:.1f} | {sent[v]:,.0f} | {share} |")
    lines.append("")
    for k, r in enumerate(results, 1):
        ratio = r["seconds"]["bucketed"] / r["seconds"]["torch_ddp"]
        lines.append(
            f"- bucketed / torch DDP step time: **{ratio:.2f}** (run {k} of {len(results)}; "
            f"goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})"
        )
    for k, r in enumerate(results, 1):
        naive = r["seconds"]["naive"] / r["seconds"]["bucketed"]
        lines.append(f"- naive / bucketed step time: **{naive:.2f}** (run {k})")
    lines.append(
        f"- formula: 2 (n - 1) / n * S = {formula:,} bytes for S = {result['grad_bytes']:,}"
    )
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.device == "cuda" and not under_torchrun():
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda needs a GPU")
        torchrun(os.path.abspath(__file__), args.world_size, *sys.argv[1:], timeout=1200)
        return
    config = config_from_args(args)
    work = functools.partial(
        compare_variants,
        micro_batch=args.micro_batch,
        seq_len=args.seq_len,
        steps=args.steps,
        repeats=args.repeats,
        bucket_cap_mb=args.bucket_cap_mb,
        device=args.device,
    )
    runs = [launch(work, args.world_size, config, timeout=1200)[0] for _ in range(args.runs)]
    if under_torchrun() and int(os.environ["RANK"]) != 0:
        return
    text = report(args, config, runs)
    emit(text, args.out)


if __name__ == "__main__":
    main()
