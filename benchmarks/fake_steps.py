"""Chapter 3's "who dominates" runs: one training step of Llama-3-8B and of Llama-3-70B on fake
tensors (``measure_step_fake``), bfloat16 throughout, one sequence (b = 1), at s = 2048 and 8192,
under each recompute policy: twelve steps, about two and a half minutes of one CPU core.

The chapter reads the table back (``minitorch_dist.results.table_rows``) instead of running the
twelve steps at every build, checks every row against the closed form, and measures one of them
again on the page, which must equal its row to the byte; so a change of the code or of torch
that moves a byte fails the build until this script is run again:

    python benchmarks/fake_steps.py --out benchmarks/results/cpu-2core_fake_steps.md
"""

from __future__ import annotations

import argparse
import os
import platform

import torch
from common import emit, markdown_table

from minitorch_dist.memory import measure_step_fake
from minitorch_dist.memory.estimate import RECOMPUTE
from minitorch_dist.models import LlamaConfig
from minitorch_dist.progress import progress

MODELS = ("llama-3-8b", "llama-3-70b")
SEQ_LENS = (2048, 8192)
BYTES = ("params", "grads", "optimizer", "activations", "activations_peak", "peak_total")
HEADING = "Fake-tensor steps, bfloat16, b = 1"


def runs() -> list[dict[str, object]]:
    """The twelve measured steps, one dict per (model, seq_len, recompute)."""
    todo = [(m, s, p) for m in MODELS for s in SEQ_LENS for p in RECOMPUTE]
    out = []
    for name, seq, policy in progress(todo, desc="fake steps"):
        got = measure_step_fake(
            LlamaConfig.from_preset(name),
            seq_len=seq,
            micro_batch=1,
            dtype=torch.bfloat16,
            recompute=policy,
        )
        out.append({"model": name, "seq_len": seq, "recompute": policy, **got})
    return out


def markdown(rows: list[dict[str, object]]) -> str:
    columns = ["model", "seq_len", "recompute", *BYTES, "seconds"]
    lines = [
        "# Fake-tensor training steps of Llama-3-8B and Llama-3-70B (chapter 3)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores visible, Python "
        f"{platform.python_version()}, torch {torch.__version__}. Bytes as the MemoryTracker "
        "counts them (`measure_step_fake`); seconds of wall time per step.",
        "",
        f"## {HEADING}",
        "",
    ]
    cells = [[str(r[c]) for c in columns[:-1]] + [f"{r['seconds']:.1f}"] for r in rows]
    return "\n".join(lines + markdown_table(columns, cells)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the table as Markdown here")
    args = parser.parse_args()
    emit(markdown(runs()).removesuffix("\n"), args.out)


if __name__ == "__main__":
    main()
