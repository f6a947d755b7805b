"""Expert-parallel dispatch, dropless against a dense capacity buffer, and the load imbalance over
training with and without the auxiliary loss (chapter 10, lab 10).

Prints, in one run, on ``--world-size`` emulated gloo ranks (4 by default):

1. for one MoE block (``--experts`` experts of width ``--expert-ffn``, top ``--top-k``,
   ``--tokens`` tokens per rank, hidden ``--hidden``, fp32) under three routings -- exactly
   uniform, a random router, and skewed (every token to the experts of rank 0) -- the bytes one
   rank sends per forward + backward, counted from the real split sizes, and the median step
   time, for dropless dispatch and for a capacity buffer (``--capacity-factor``). Under uniform
   routing the dropless bytes must equal 4 x ``all_to_all_bytes`` and the buffer's
   4 x ``capacity_buffer_bytes`` (ratio cf), whatever the routing;
2. the load imbalance (max / mean tokens per expert over the whole global batch, mean over MoE
   layers) while the tiny Llama with MoE blocks trains expert-parallel for ``--steps`` steps,
   without and with ``--aux-alpha`` times the "topk" load-balancing loss; with ``--figure``
   the curves are saved as a PNG.

    python benchmarks/moe_dispatch.py
    python benchmarks/moe_dispatch.py --out benchmarks/results/<machine>_moe_dispatch.md \
        --figure benchmarks/results/<machine>_moe_imbalance.png
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import torch
from common import emit

from minitorch_dist.expert_parallel import all_to_all_bytes, capacity_buffer_bytes, ep_step_bytes
from minitorch_dist.expert_parallel.measure import TINY_MOE, measure_dispatch
from minitorch_dist.expert_parallel.train import train_with_aux_loss
from minitorch_dist.models.moe import MoEConfig
from minitorch_dist.progress import progress

ROUTINGS = ("uniform", "random", "skewed")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world-size", type=int, default=4)
    p.add_argument("--tokens", type=int, default=512, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--expert-ffn", type=int, default=256)
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.add_argument("--repeats", type=int, default=15, help="timed steps (fastest reported)")
    p.add_argument("--steps", type=int, default=80, help="training steps for the imbalance")
    p.add_argument("--aux-alpha", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-2)
    p.add_argument("--out", help="also write the report as markdown to this path")
    p.add_argument("--figure", help="save the imbalance curves as a PNG here")
    return p.parse_args()


def dispatch_rows(args: argparse.Namespace) -> list[dict]:
    free = MoEConfig(experts=args.experts, top_k=args.top_k, expert_ffn=args.expert_ffn)
    capped = MoEConfig(
        experts=args.experts,
        top_k=args.top_k,
        expert_ffn=args.expert_ffn,
        capacity_factor=args.capacity_factor,
    )
    rows = []
    for routing in progress(ROUTINGS, desc="routings"):
        for mode, moe in (("dropless", free), ("capacity", capped)):
            runs = measure_dispatch(
                args.world_size,
                tokens=args.tokens,
                hidden=args.hidden,
                moe=moe,
                dispatch_mode=mode,
                routing=routing,
                repeats=args.repeats,
                timeout=600,
            )
            counts = [sum(c) for c in zip(*(r["tokens_per_expert"] for r in runs))]
            rows.append(
                {
                    "routing": routing,
                    "mode": mode,
                    "bytes": max(r["step_bytes"] for r in runs),
                    "rank0_bytes": runs[0]["step_bytes"],
                    "seconds": max(r["best_seconds"] for r in runs),
                    "imbalance": max(counts) / (sum(counts) / len(counts)),
                    "dropped": sum(r["dropped"] for r in runs),
                }
            )
    return rows


def imbalance_runs(args: argparse.Namespace) -> dict[float, dict]:
    config = TINY_MOE[0]
    moe = MoEConfig(experts=args.experts, top_k=args.top_k, expert_ffn=32)
    return {
        alpha: train_with_aux_loss(
            args.world_size,
            steps=args.steps,
            aux_alpha=alpha,
            moe=moe,
            config=config,
            lr=args.lr,
            timeout=1200,
        )
        for alpha in (0.0, args.aux_alpha)
    }


def report(args: argparse.Namespace, rows: list[dict], runs: dict[float, dict]) -> str:
    el, ep, k = 4, args.world_size, args.top_k
    formula = all_to_all_bytes(
        tokens=args.tokens, top_k=k, hidden=args.hidden, ep=ep, bytes_per_element=el
    )
    buffer = capacity_buffer_bytes(
        tokens=args.tokens,
        top_k=k,
        hidden=args.hidden,
        ep=ep,
        experts=args.experts,
        capacity_factor=args.capacity_factor,
        bytes_per_element=el,
    )
    get = {(r["routing"], r["mode"]): r for r in rows}
    lines = [
        f"<!-- {platform.platform()}, torch {torch.__version__}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, device cpu -->",
        f"# MoE dispatch: dropless vs capacity buffer, {ep} ranks on cpu",
        "",
        f"Device: a 2-core CPU without a GPU ({ep} emulated gloo ranks). One MoE block, "
        f"{args.experts} experts of width {args.expert_ffn}, top-{k}, hidden {args.hidden}, "
        f"{args.tokens} tokens per rank, fp32; capacity factor {args.capacity_factor}; "
        f"step = forward + backward of the block, fastest of {args.repeats}, slowest rank "
        f"(4 ranks share 2 cores: step times move by tens of percent between runs; the bytes "
        f"are exact). "
        f"Bytes: the most any rank sent per step (4 all-to-alls), from the real split sizes.",
        "",
        "| routing | dispatch | bytes per step | step time (ms) | max/mean tokens per expert "
        "| choices dropped |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['routing']} | {r['mode']} | {r['bytes']:,} | {r['seconds'] * 1e3:.1f} "
            f"| {r['imbalance']:.2f} | {r['dropped']} |"
        )
    uni_free, uni_cap = get["uniform", "dropless"], get["uniform", "capacity"]
    assert uni_free["bytes"] == ep_step_bytes(formula), "dropless bytes differ from the formula"
    assert all(r["bytes"] == ep_step_bytes(buffer) for r in rows if r["mode"] == "capacity")
    h = len(runs[0.0]["imbalance"]) // 2
    late = {a: sum(r["imbalance"][h:]) / len(r["imbalance"][h:]) for a, r in runs.items()}
    alpha = args.aux_alpha
    lines += [
        "",
        f"- dropless bytes counted / formula (4 x T k h (ep-1)/ep x 4 B = "
        f"{ep_step_bytes(formula):,}), uniform routing: **{uni_free['bytes'] / ep_step_bytes(formula):.2f}**",
        f"- capacity-buffer / dropless bytes per step, uniform routing: "
        f"**{uni_cap['bytes'] / uni_free['bytes']:.2f}** (cf = {args.capacity_factor})",
        f"- capacity-buffer / dropless bytes per step, skewed routing: "
        f"**{get['skewed', 'capacity']['bytes'] / get['skewed', 'dropless']['bytes']:.2f}**",
    ]
    for routing in ROUTINGS:
        ratio = get[routing, "capacity"]["seconds"] / get[routing, "dropless"]["seconds"]
        lines.append(f"- capacity-buffer / dropless step time, {routing} routing: **{ratio:.2f}**")
    lines += [
        "",
        f"Load imbalance while the tiny Llama (hidden 64, 2 layers) with {args.experts} experts "
        f"of width 32, top-{k}, trains on {ep} ranks: {args.steps} AdamW steps, lr {args.lr}, "
        f"8 sequences of 32 tokens per step; mean over the last {len(runs[0.0]['imbalance']) - h} "
        f"steps (1.00 is perfect balance, {args.experts / k:.2f} is every token on the same "
        f"{k} experts).",
        "",
        f"- load imbalance without the auxiliary loss: **{late[0.0]:.2f}**",
        f"- load imbalance with {alpha} x aux loss (topk): **{late[alpha]:.2f}**",
        f"- load imbalance without / with the auxiliary loss: **{late[0.0] / late[alpha]:.2f}**",
        f"- final loss without / with the auxiliary loss (cross-entropy + aux): "
        f"**{runs[0.0]['losses'][-1] / runs[alpha]['losses'][-1]:.2f}**",
    ]
    if args.figure:
        lines.append(f"\nFigure: `{os.path.basename(args.figure)}` (the imbalance per step).")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    rows = dispatch_rows(args)
    runs = imbalance_runs(args)
    emit(report(args, rows, runs), args.out)
    if args.figure:
        from minitorch_dist.expert_parallel.plots import plot_imbalance

        fig = plot_imbalance(
            {
                "no auxiliary loss": runs[0.0]["imbalance"],
                f"{args.aux_alpha} x aux loss (topk)": runs[args.aux_alpha]["imbalance"],
            },
            title=f"Tiny Llama, {args.experts} experts, top-{args.top_k}, "
            f"ep={args.world_size}: load imbalance per step",
        )
        fig.savefig(args.figure, dpi=100)  # the column width: shown at its size or a little less
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
