"""How long the planner takes to enumerate and rank every configuration of a 70B model on 1,024
GPUs (the issue's bound: 5 s on 2 CPU cores). Imports are not timed; each run starts from empty
caches (the memoised closed forms are cleared), and the best and median of ``--repeat`` runs are
printed.

    python benchmarks/planner_speed.py --out benchmarks/results/cpu-2core_planner_speed.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from minitorch_dist.planner import Cluster, as_model, memo, plan
from minitorch_dist.progress import progress


def clear_caches() -> None:
    for name in memo.__all__:
        getattr(memo, name).cache_clear()
    Cluster.link.cache_clear()
    as_model("llama-3-70b").params_per_rank.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama-3-70b")
    parser.add_argument("--cluster", default="dgx-h100")
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1024)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="write the result as markdown here")
    args = parser.parse_args()
    cluster = Cluster.from_preset(args.cluster, args.gpus)
    times = []
    for _ in progress(range(args.repeat), desc="planner runs"):
        clear_caches()
        start = time.perf_counter()
        result = plan(args.model, cluster, global_batch=args.global_batch, seq_len=args.seq_len)
        times.append(time.perf_counter() - start)
    best = result.fitting[0]
    lines = [
        f"# Planner speed: {args.model} on {args.gpus} GPUs ({args.cluster})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores visible, Python "
        f"{platform.python_version()}. Global batch {args.global_batch} x {args.seq_len} tokens.",
        "",
        f"- configurations listed: {len(result.rows):,} ({len(result.fitting):,} fit, "
        f"{len(result.rejected):,} rejected with their reason)",
        f"- enumerate + evaluate + rank: best {min(times):.2f} s, median "
        f"{statistics.median(times):.2f} s over {args.repeat} runs (bound: 5 s)",
        f"- best: {best.config.label()}, predicted step {best.time.total:.2f} s, "
        f"MFU {best.time.mfu:.1%}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
