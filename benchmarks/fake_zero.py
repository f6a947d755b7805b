"""Chapter 6's fake-rank runs: rank 0 of 64 for Llama-2-7B and Llama-3-70B in fp32, under ZeRO
stages 0 to 3 and stage 2 with the optimizer offloaded (``fake_zero_bytes``): ten runs, about half
a minute of one CPU core.

The chapter reads the table back (``minitorch_dist.results.table_rows``) instead of running the
ten at every build, holds every row against the closed form ``model_state_bytes``, and runs one
of them again on the page, which must equal its row to the byte; so a change of the code or of
torch that moves a byte fails the build until this script is run again:

    python benchmarks/fake_zero.py --out benchmarks/results/cpu-2core_fake_zero.md
"""

from __future__ import annotations

import argparse
import os
import platform

import torch
from common import emit, markdown_table

from minitorch_dist.models import LlamaConfig
from minitorch_dist.progress import progress
from minitorch_dist.zero.measure import fake_zero_bytes

MODELS = ("llama-2-7b", "llama-3-70b")
RUNS = ((0, False), (1, False), (2, False), (3, False), (2, True))  # (stage, offload)
DP = 64
BYTES = ("params", "grads", "optimizer", "offloaded", "total")
HEADING = "ZeRO on 64 fake ranks, fp32, rank 0"


def runs() -> list[dict[str, object]]:
    """The ten measured runs, one dict per (model, stage, offload)."""
    todo = [(m, s, o) for m in MODELS for s, o in RUNS]
    out = []
    for name, stage, offload in progress(todo, desc="fake ZeRO ranks"):
        got = fake_zero_bytes(LlamaConfig.from_preset(name), stage, DP, offload=offload)
        row = {"model": name, "stage": stage, "offload": offload}
        out.append({**row, **{k: got["states"][k] for k in BYTES}, "seconds": got["seconds"]})
    return out


def markdown(rows: list[dict[str, object]]) -> str:
    columns = ["model", "stage", "offload", *BYTES, "seconds"]
    lines = [
        "# ZeRO's model states of Llama-2-7B and Llama-3-70B on fake ranks (chapter 6)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores visible, Python "
        f"{platform.python_version()}, torch {torch.__version__}. Bytes on the device as the "
        "MemoryTracker counts them after one optimizer step (`fake_zero_bytes`); `offloaded`: "
        "the optimizer's bytes in CPU memory; seconds of wall time per run.",
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
