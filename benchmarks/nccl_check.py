"""Check the GPU path of the launcher and the comm counter on NCCL (run on a machine with GPUs).

    python benchmarks/nccl_check.py [--out benchmarks/results/<machine>_nccl_check.md]

runs ``work`` as a script under ``torchrun`` (NCCL, one process per GPU: the path a user takes
on a cluster), where ``launch`` runs it once per process, all-reduces, reduce-scatters and
all-gathers on the GPU, books the bytes with ``CommCounter`` and prints them against
``collective_bytes``.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
import textwrap

import torch
import torch.distributed as dist
from common import emit

from minitorch_dist.comm import (
    CommCounter,
    all_gather_into_tensor,
    collective_bytes,
    reduce_scatter_tensor,
)
from minitorch_dist.launching.launcher import torchrun


def work(rank: int, world_size: int, numel: int) -> dict:
    device = torch.device("cuda", torch.cuda.current_device())
    x = torch.full((numel,), float(rank + 1), device=device)
    shard = torch.empty(numel // world_size, device=device)
    with CommCounter() as cc:
        dist.all_reduce(x)
        reduce_scatter_tensor(shard, x)
        all_gather_into_tensor(x, shard)
    torch.cuda.synchronize()
    return {
        "backend": dist.get_backend(),
        "value": x[0].item(),
        "want": world_size * sum(range(1, world_size + 1)),
        "sent": dict(cc.bytes_sent),
        "device": torch.cuda.get_device_name(device),
    }


SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from nccl_check import work
from minitorch_dist import launch
import os
res = launch(work, int(os.environ["WORLD_SIZE"]), {numel})
if os.environ["RANK"] == "0":
    print("RESULT", repr(res))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--numel", type=int, default=2**20)
    parser.add_argument("--out")
    args = parser.parse_args()
    n = torch.cuda.device_count()
    if n == 0:
        sys.exit("no GPU: this check needs at least one")
    lines = [f"# NCCL check: {n} GPU(s), torch {torch.__version__}", ""]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(
            textwrap.dedent(
                SCRIPT.format(here=os.path.dirname(os.path.abspath(__file__)), numel=args.numel)
            )
        )
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    out = torchrun(f.name, n, echo=False)
    results = ast.literal_eval(next(x for x in out.splitlines() if x.startswith("RESULT"))[7:])
    lines.append(f"torchrun ranks: {results}")
    nbytes = args.numel * 4
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        counted = results[0]["sent"].get(op, 0)
        lines.append(f"{op}: counted {counted} formula {collective_bytes(op, nbytes, n)}")
    assert all(r["value"] == r["want"] and r["backend"] == "nccl" for r in results), results
    text = "\n".join(lines)
    emit(text, args.out)


if __name__ == "__main__":
    main()
