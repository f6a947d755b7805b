"""Our ZeRO-3 against PyTorch FSDP2 (``fully_shard``), and the estimator against the tracker (ch. 6).

Prints, in one run on ``--world`` ranks (4 emulated CPU ranks on gloo by default; one GPU per
rank under torchrun with ``--device cuda``):

1. per-rank peak memory of one training step, our ``ZeroStage3`` / FSDP2 on the same model
   (each Block a unit / an FSDP module, the rest in the root), the same batch (goal <= 1.0);
   on GPUs (or with ``--all-stages``) also stages 0-2 and offload, whose losses must agree too.
   CPU: both measured with PyTorch's own ``torch.distributed._tools.mem_tracker.MemTracker``
   (FSDP2-aware: it sees through DTensor), so neither is measured by our tracker; GPU:
   ``torch.cuda.max_memory_allocated`` minus the memory allocated before the step;
2. the median step time, ours / FSDP2, and the losses of both runs (they must agree);
3. predicted (``model_state_bytes``, recipe ``fp32``) / measured (our ``MemoryTracker``) per
   category for ZeRO stages 0-3 (and stage 2 with offload) on the same ranks (goal: within 3 %),
   and the bytes sent per step against ZeRO's 2 Psi / 3 Psi with the ring factor.

    python benchmarks/zero_vs_fsdp.py                                   # tiny Llama, 4 CPU ranks
    python benchmarks/zero_vs_fsdp.py --hidden 256 --layers 4 --ffn 704 --seq-len 128
    torchrun --nproc_per_node=4 benchmarks/zero_vs_fsdp.py --device cuda --hidden 2048 \\
        --layers 8 --heads 16 --kv-heads 8 --ffn 5632 --seq-len 1024 --micro-batch 4
    python benchmarks/zero_vs_fsdp.py --out benchmarks/results/<machine>_zero_vs_fsdp.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import torch
from common import add_model_args, config_from_args, emit

from minitorch_dist import launch
from minitorch_dist.memory import format_bytes
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.progress import progress
from minitorch_dist.reference import make_batches, rank_batch
from minitorch_dist.zero import zero_optimizer
from minitorch_dist.zero.measure import zero_table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--world", type=int, default=4, help="ranks (torchrun: its nproc)")
    add_model_args(parser, seq_len=64, micro_batch=2)
    parser.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up")
    parser.add_argument(
        "--all-stages",
        action="store_true",
        help="also run stages 0-2 and offload (always on with --device cuda)",
    )
    parser.add_argument(
        "--no-prefetch",
        action="store_true",
        help="ZeRO-3 without prefetching (on one H100 its peak then equals FSDP2's)",
    )
    parser.add_argument("--out", help="also write the tables as markdown to this path")
    return parser.parse_args()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _run(rank: int, world: int, which: str, config: LlamaConfig, args: Any) -> dict[str, Any]:
    """One warm-up step, one measured step, ``steps`` timed steps of ``which`` on this rank."""
    from torch.distributed.fsdp import fully_shard

    device = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else None
    device = device or torch.device("cpu")
    torch.manual_seed(0)
    model = Llama(config).to(device)
    if which == "fsdp2":
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        opt: Any = torch.optim.Adam(model.parameters(), lr=1e-3)
        inner = opt
    else:  # "zeroK" or "zeroK+offload"; each Block a unit, the rest in the root: as FSDP2's
        stage = int(which[4])
        extra = {"prefetch": False} if stage == 3 and args.no_prefetch else {}
        opt = zero_optimizer(
            model,
            stage,
            lr=1e-3,
            units=lambda m: list(m.layers),
            offload=which.endswith("+offload"),
            **extra,
        )
        inner = opt.optimizer.optimizer if opt.offload else opt.optimizer  # a torch Adam
    batches = make_batches(
        config.vocab_size, args.micro_batch * world, args.seq_len, args.steps + 2
    )
    batches = [tuple(t.to(device) for t in rank_batch(b, rank, world)) for b in batches]

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> float:
        loss = cross_entropy(model(batch[0]), batch[1])
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    losses = [step(batches[0])]  # warm-up: Adam's states exist from here on
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        losses.append(step(batches[1]))
        peak = torch.cuda.max_memory_allocated() - before
    else:
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
        tracker.track_external(model, inner)
        with tracker:
            losses.append(step(batches[1]))
        peak = tracker.get_tracker_snapshot("peak")[device]["Total"]
    times = []
    for batch in batches[2:]:
        _sync(device)
        start = time.perf_counter()
        losses.append(step(batch))
        _sync(device)
        times.append(time.perf_counter() - start)
    return {"peak": peak, "time": statistics.median(times), "losses": losses}


def main() -> None:
    args = parse_args()
    config = config_from_args(args)
    lines = [
        f"<!-- {platform.node() or 'machine'}: torch {torch.__version__}, "
        f"{args.device}, world {args.world} -->",
        f"# ZeRO-3 vs FSDP2: {config.name}, {config.num_params():,} parameters, "
        f"s={args.seq_len}, b={args.micro_batch} per rank, {args.world} ranks, fp32"
        f"{', ZeRO-3 without prefetch' if args.no_prefetch else ''}",
        "",
    ]
    # On GPUs (or with --all-stages) every stage and offload too: a check of the NCCL and
    # pinned-memory paths, whose losses must agree with FSDP2's as well.
    others = ("zero0", "zero1", "zero2", "zero2+offload", "zero3+offload")
    variants = ("zero3", "fsdp2") + (others if args.device == "cuda" or args.all_stages else ())
    results = {
        w: launch(_run, args.world, w, config, args, timeout=600)
        for w in progress(variants, desc="variants")
    }
    peak = {w: max(r["peak"] for r in rs) for w, rs in results.items()}  # the worst rank
    step = {w: max(r["time"] for r in rs) for w, rs in results.items()}
    gap = max(
        abs(a - b) for a, b in zip(results["zero3"][0]["losses"], results["fsdp2"][0]["losses"])
    )
    lines += [
        "| | ZeRO-3 (ours) | FSDP2 | ours / FSDP2 |",
        "|---|---:|---:|---:|",
        f"| peak per rank (max over ranks) | {peak['zero3']:,} B ({format_bytes(peak['zero3'])}) | "
        f"{peak['fsdp2']:,} B ({format_bytes(peak['fsdp2'])}) | {peak['zero3'] / peak['fsdp2']:.4f} |",
        f"| median step time | {step['zero3'] * 1e3:.1f} ms | {step['fsdp2'] * 1e3:.1f} ms | "
        f"{step['zero3'] / step['fsdp2']:.2f} |",
        "",
        f"Losses of the two runs agree to {gap:.1e} over {args.steps + 2} steps.",
        "",
    ]
    if len(results) > 2:  # on CPU ranks, offloaded states count in the peak (one RAM)
        lines += [
            "| variant | peak per rank | median step time | loss gap to FSDP2 |",
            "|---|---:|---:|---:|",
        ]
        for w in others:
            loss_gap = max(
                abs(a - b) for a, b in zip(results[w][0]["losses"], results["fsdp2"][0]["losses"])
            )
            lines.append(
                f"| {w} | {format_bytes(peak[w])} | {step[w] * 1e3:.1f} ms | {loss_gap:.1e} |"
            )
        lines.append("")
    if args.device == "cpu":  # the tracker measures CPU tensors; on GPUs see memory_predict.py
        rows = zero_table(
            config, world_sizes=(args.world,), micro_batch=args.micro_batch, seq_len=args.seq_len
        )
        rows += zero_table(
            config,
            stages=(2,),
            world_sizes=(args.world,),
            offload=True,
            micro_batch=args.micro_batch,
            seq_len=args.seq_len,
        )
        lines += [
            "## Predicted / measured per category (model states after the step)",
            "",
            "| stage | params | grads | optimizer | total | offloaded | bytes sent / "
            "ring formula | measured bytes sent |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            p, m = row["predicted"], row["states"]
            ratio = [
                f"{p[k] / m[k]:.4f}" if m[k] else "-"
                for k in ("params", "grads", "optimizer", "total", "offloaded")
            ]
            label = f"{row['stage']}{' + offload' if p['offloaded'] else ''}"
            lines.append(
                f"| {label} | {' | '.join(ratio)} | "
                f"{row['comm']['total'] / row['formula_comm']:.4f} | "
                f"{row['comm']['total']:,.0f} |"
            )
        lines += [
            "",
            "Offloaded: the estimator's fp32 recipe counts m and v (8 B/element); the "
            "CPU also keeps the fp32 master copy it updates (12 B/element).",
        ]
    text = "\n".join(lines)
    if os.environ.get("RANK", "0") != "0":  # under torchrun, rank 0 reports
        return
    emit(text, args.out)


if __name__ == "__main__":
    main()
