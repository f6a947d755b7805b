"""Our data parallelism against torch's DistributedDataParallel (chapter 5, lab 5).

Prints, in one run, on ``--world-size`` ranks (4 emulated gloo ranks by default):

1. step time of our bucketed DDP / torch's DDP (goal: <= 1.15), and naive / bucketed;
2. bytes each variant sent in one step, counted by ``CommCounter``, / the ring formula
   ``2 (n - 1) / n * S`` for the whole gradient (goal: exactly 1). For torch's DDP this also
   answers whether ``CommCounter`` sees the all-reduce its C++ reducer launches from autograd
   (a bytes ratio of 0 would mean it does not).

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
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--steps", type=int, default=3, help="steps per timed turn")
    p.add_argument("--repeats", type=int, default=7, help="turns per variant (median reported)")
    p.add_argument("--out", help="also write the table as markdown to this path")
    return p.parse_args()


def report(args: argparse.Namespace, config: LlamaConfig, result: dict) -> str:
    sec, sent, n = result["seconds"], result["bytes"], args.world_size
    formula = collective_bytes("all_reduce", result["grad_bytes"], n)
    ratio = sec["bucketed"] / sec["torch_ddp"]
    lines = [
        f"<!-- {platform.platform()}, torch {torch.__version__}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, device {args.device} -->",
        f"# Data parallelism: ours vs torch DDP, {n} ranks on {args.device}",
        "",
        f"{config.num_params():,} parameters ({args.preset}, hidden {config.hidden}, "
        f"{config.layers} layers), micro-batch {args.micro_batch} x {args.seq_len} tokens per "
        f"rank, fp32, SGD, bucket_cap_mb {args.bucket_cap_mb:g}; median of {args.repeats} turns "
        f"of {args.steps} steps.",
        "",
        "| variant | step time (ms) | bytes sent per step | bytes / formula |",
        "|---|---:|---:|---:|",
    ]
    for v in VARIANTS:
        share = f"{sent[v] / formula:.4f}" if formula else "-"
        lines.append(f"| {v} | {1e3 * sec[v]:.1f} | {sent[v]:,.0f} | {share} |")
    lines += [
        "",
        f"- bucketed / torch DDP step time: **{ratio:.2f}** (goal <= {GOAL}: "
        f"{'met' if ratio <= GOAL else 'NOT met'})",
        f"- naive / bucketed step time: **{sec['naive'] / sec['bucketed']:.2f}**",
        f"- formula: 2 (n - 1) / n * S = {formula:,} bytes for S = {result['grad_bytes']:,}",
    ]
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
    results = launch(work, args.world_size, config, timeout=1200)
    if under_torchrun() and int(os.environ["RANK"]) != 0:
        return
    text = report(args, config, results[0])
    emit(text, args.out)


if __name__ == "__main__":
    main()
