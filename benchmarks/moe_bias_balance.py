"""DeepSeek-V3's bias balancing against the auxiliary loss on a skewed routing problem (chapter 10).

For each method of :func:`minitorch_dist.expert_parallel.bias_balance.balance_run` (no
balancing, the top-k auxiliary loss at two weights, the selection bias, the bias with the small
sequence-wise loss) and ``--seeds`` seeds, one MoE block is trained ``--steps`` steps from a
router that sends nearly every token to 2 of its 8 experts. Reports, averaged over the seeds and
the second half of the steps: the load imbalance max/mean tokens per expert, the share of the
choices a capacity factor of 1.25 would have dropped, and the task loss (the regression error
alone, without any balancing term).

    python benchmarks/moe_bias_balance.py --out benchmarks/results/<machine>_moe_bias_balance.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from statistics import mean

import torch
from common import emit

from minitorch_dist.expert_parallel.bias_balance import balance_run

METHODS = (
    ("none", {}),
    ("aux", {"aux_alpha": 0.01}),
    ("aux", {"aux_alpha": 0.1}),
    ("bias", {}),
    ("bias+seq", {}),
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--speed", type=float, default=0.01, help="bias update speed gamma")
    p.add_argument("--out", help="also write the report as markdown to this path")
    return p.parse_args()


def label(method: str, kw: dict, speed: float) -> str:
    if method == "aux":
        return f"aux loss, alpha = {kw['aux_alpha']}"
    if method == "bias":
        return f"bias, gamma = {speed}"
    if method == "bias+seq":
        return f"bias, gamma = {speed}, + sequence loss alpha = 1e-4"
    return "no balancing"


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    h = args.steps // 2
    lines = [
        f"<!-- {platform.platform()}, torch {torch.__version__}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, device cpu -->",
        "# Bias balancing vs the auxiliary loss, one MoE block on cpu",
        "",
        f"Device: a 2-core CPU without a GPU, one process, fp32. One MoE block (8 experts of "
        f"width 16, top-2, hidden 16, dropless) learns y = sin(x A) from 8 sequences of 64 "
        f"tokens per step, AdamW lr 0.01, {args.steps} steps; its router starts with 2 experts "
        f"preferred by nearly every token (`balance_run` defaults). Means over {args.seeds} "
        f"seeds and the last {args.steps - h} steps; 1.00 is perfect balance, 4.00 every token "
        f"on the same 2 experts.",
        "",
        "| method | max/mean load | worst step | share dropped at cf = 1.25 | task loss |",
        "|---|---:|---:|---:|---:|",
    ]
    for method, kw in METHODS:
        runs = [
            balance_run(method, steps=args.steps, speed=args.speed, seed=s, **kw)
            for s in range(args.seeds)
        ]
        imb = mean(mean(r["imbalance"][h:]) for r in runs)
        worst = max(max(r["imbalance"][h:]) for r in runs)
        drop = mean(mean(r["dropped"][h:]) for r in runs)
        loss = mean(mean(r["loss"][h:]) for r in runs)
        lines.append(
            f"| {label(method, kw, args.speed)} | {imb:.2f} | {worst:.2f} | "
            f"{drop:.1%} | {loss:.4f} |"
        )
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
