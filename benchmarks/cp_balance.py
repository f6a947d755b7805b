"""Causal context parallelism: how long each rank's attention takes, contiguous vs zig-zag (ch. 8).

Chapter 8 counts the causal work per rank in half-chunk blocks: with a contiguous split rank r
computes 4r + 2 of them (max / mean 1.875 at cp = 8), with the zig-zag split every rank computes
2 cp. Emulated CPU ranks share two cores, so there the chapter counts blocks instead of timing
them. This script times them on one real device: for each rank of a ``--cp``-way ring it runs
the attention blocks that rank computes over the whole ring -- every (query half-chunk, key
half-chunk) pair it holds a query for and that the causal mask does not empty, the diagonal
pairs causal -- forward and backward through ``scaled_dot_product_attention`` (flash attention
on a GPU), one rank after another on the same device. No communication is timed: what is
compared is the compute each rank must do between the ring's steps, the part the layout changes.

Prints per rank: blocks (full-block equivalents, a causal diagonal block counts 1/2), time
(median of ``--repeats``), and time / blocks; then the slowest rank over the mean for both
layouts, measured and counted.

    python benchmarks/cp_balance.py --device cuda --out benchmarks/results   # ~1 min on an H100
    python benchmarks/cp_balance.py --device cpu --seq 2048 --heads 4 --head-dim 32  # smoke test
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from common import device_tag, write_result

from minitorch_dist.context_parallel.layout import chunk_ids
from minitorch_dist.progress import progress

LAYOUTS = ("contiguous", "zigzag")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--cp", type=int, default=8)
    p.add_argument("--seq", type=int, default=65536, help="whole sequence, tokens")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", help="folder: writes <device>_cp_balance.md there")
    return p.parse_args()


def pairs(rank: int, cp: int, layout: str) -> list[tuple[int, int]]:
    """(query half-chunk, key half-chunk) pairs rank ``rank`` computes: key <= query."""
    return [(i, j) for i in chunk_ids(rank, cp, layout=layout) for j in range(2 * cp) if j <= i]


def blocks(rank: int, cp: int, layout: str) -> float:
    """Full-block equivalents: a diagonal (causal) block is half a block."""
    return sum(0.5 if i == j else 1.0 for i, j in pairs(rank, cp, layout))


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_rank(q, k, v, rank: int, cp: int, layout: str, device: str) -> float:  # noqa: ANN001
    """Seconds for this rank's blocks, forward + backward, one pass."""
    half = q.shape[2] // (2 * cp)
    sync(device)
    start = time.perf_counter()
    for i, j in pairs(rank, cp, layout):
        qi = q[:, :, i * half : (i + 1) * half].detach().requires_grad_()
        kj = k[:, :, j * half : (j + 1) * half].detach().requires_grad_()
        vj = v[:, :, j * half : (j + 1) * half].detach().requires_grad_()
        out = F.scaled_dot_product_attention(qi, kj, vj, is_causal=(i == j))
        out.backward(torch.ones_like(out))
    sync(device)
    return time.perf_counter() - start


def main() -> None:
    args = parse()
    if args.seq % (2 * args.cp):
        raise ValueError(f"seq={args.seq} is not divisible by 2*cp={2 * args.cp}")
    device, dtype = args.device, getattr(torch, args.dtype)
    torch.manual_seed(0)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    for rank in range(args.cp):  # warm-up: kernels chosen, allocator filled
        time_rank(q, k, v, rank, args.cp, "zigzag", device)
    rows, summary = [], {}
    for layout in progress(LAYOUTS, desc="layouts"):
        times = []
        for rank in range(args.cp):
            t = statistics.median(
                time_rank(q, k, v, rank, args.cp, layout, device) for _ in range(args.repeats)
            )
            n = blocks(rank, args.cp, layout)
            times.append(t)
            rows.append(f"| {layout} | {rank} | {n:g} | {t * 1e3:.2f} | {t * 1e3 / n:.3f} |")
        counted = [blocks(r, args.cp, layout) for r in range(args.cp)]
        summary[layout] = (
            max(times) / statistics.mean(times),
            max(counted) / statistics.mean(counted),
        )
    name, tag = device_tag(device)
    lines = [
        f"<!-- Device: one {name}, torch {torch.__version__}; one process times every rank's "
        f"blocks in turn (no communication). -->",
        f"# Causal context parallelism: per-rank attention time, cp = {args.cp}",
        "",
        f"{device} ({name}), torch {torch.__version__}, {args.dtype}, "
        f"s = {args.seq}, b = {args.batch}, heads = {args.heads}, head_dim = {args.head_dim}, "
        f"forward + backward, median of {args.repeats}",
        "",
        "| layout | rank | blocks | time (ms) | ms / block |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        "### Slowest rank / mean",
        "",
        "| layout | measured | counted |",
        "|---|---:|---:|",
        *(f"| {lay} | **{m:.3f}** | {c:.3f} |" for lay, (m, c) in summary.items()),
        "",
    ]
    write_result("\n".join(lines), args.out, f"{tag}_cp_balance.md")


if __name__ == "__main__":
    main()
