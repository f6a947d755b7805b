"""Predicted vs measured memory of one training step (chapter 1).

Prints, in one run:

1. the tiny Llama on CPU: bytes per category predicted by ``minitorch_dist.memory.estimate``
   (fp32 + Adam model states; the Llama-aware activation count for each recompute policy) against
   the bytes the ``MemoryTracker`` measured (goal: model states within 3 %, activations within 5 %);
2. with ``--device cuda`` (and a GPU): the same for the config the flags describe, on the GPU,
   plus the growth of the tracker's total to its peak against that of
   ``torch.cuda.max_memory_allocated`` (the CPU table then shows the tiny model at s=64, b=4);
3. the wall time of a fake-tensor measurement of Llama-2-7B (``--fake-preset``, ``--no-fake``).

    python benchmarks/memory_predict.py                      # tiny, CPU, + 7B on fake tensors
    python benchmarks/memory_predict.py --device cuda --preset tiny --hidden 1024 --layers 8 \\
        --heads 16 --kv-heads 8 --ffn 2816 --seq-len 1024 --micro-batch 4 --dtype bfloat16
    python benchmarks/memory_predict.py --out benchmarks/results/memory_predict_<machine>.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from typing import Any

import torch
from common import add_model_args, config_from_args

from minitorch_dist.memory import (
    format_bytes,
    llama_activation_bytes,
    measure_step,
    measure_step_fake,
    model_state_bytes,
)
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.models.data import synthetic_batch
from minitorch_dist.progress import progress

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
RECIPE_OF = {"float32": "fp32"}  # pure bf16 + Adam has no closed-form recipe name: 2 + 2 + 4


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    add_model_args(parser, seq_len=64, micro_batch=4)
    parser.add_argument(
        "--dtype",
        choices=sorted(DTYPES),
        default="float32",
        help="params, grads, Adam states and activations (on the GPU run)",
    )
    parser.add_argument("--fake-preset", default="llama-2-7b")
    parser.add_argument("--fake-seq-len", type=int, default=1024)
    parser.add_argument("--no-fake", action="store_true", help="skip the fake-tensor run")
    parser.add_argument("--out", help="write results: PATH.md as markdown, anything else as JSON")
    return parser.parse_args()


def row(what: str, predicted: int, measured: int) -> dict[str, Any]:
    ratio = measured / predicted if predicted else float("nan")
    return {"what": what, "predicted": predicted, "measured": measured, "ratio": round(ratio, 5)}


def measure(
    config: LlamaConfig, seq_len: int, micro_batch: int, device: str, dtype: str
) -> list[dict]:
    """One step per recompute policy on a real model; rows of predicted vs measured bytes."""
    rows, p = [], torch.finfo(DTYPES[dtype]).bits // 8
    n = config.num_params()
    for recompute in progress(("none", "selective", "full"), desc=f"steps on {device}"):
        torch.manual_seed(0)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(DTYPES[dtype])
        try:
            model = apply_torch_checkpointing(Llama(config).to(device), recompute)
        finally:
            torch.set_default_dtype(previous)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def batch() -> tuple[torch.Tensor, torch.Tensor]:
            x, y = synthetic_batch(config.vocab_size, micro_batch, seq_len)
            return x.to(device), y.to(device)

        if device == "cuda":  # warm-up: cuBLAS allocates its workspace on the first product
            cross_entropy(model(batch()[0]), batch()[1]).backward()
            model.zero_grad(set_to_none=True)
        got = measure_step(model, opt, batch)
        acts = llama_activation_bytes(
            config, seq_len=seq_len, micro_batch=micro_batch, dtype_bytes=p, recompute=recompute
        )
        if recompute == "none":
            if dtype in RECIPE_OF:
                states = model_state_bytes(n, recipe=RECIPE_OF[dtype])
            else:  # pure 16-bit: params p, grads p, Adam m and v 2p
                states = {"params": p * n, "grads": p * n, "optimizer": 2 * p * n}
            for key in ("params", "grads", "optimizer"):
                rows.append(row(f"{key} after step", states[key], got["optimizer"][key]))
        rows.append(row(f"activations ({recompute})", acts, got["forward"]["activations"]))
        if device == "cuda":  # growth to the peak: tracker ("predicted" column) vs allocator
            cuda = got["cuda"]
            tracked = got["peak_total"] - cuda["tracked_at_enter"]
            allocator = cuda["max_allocated"] - cuda["allocated_at_enter"]
            rows.append(row(f"peak growth ({recompute}): tracker vs allocator", tracked, allocator))
        del model, opt
    return rows


def fake_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    config = LlamaConfig.from_preset(args.fake_preset)
    runs = []
    recipes = (
        (torch.float32, None, 4),
        (torch.float32, torch.bfloat16, None),
        (torch.bfloat16, None, 2),
    )
    for dtype, autocast, p in progress(recipes, desc=f"fake-tensor steps of {config.name}"):
        got = measure_step_fake(
            config, seq_len=args.fake_seq_len, micro_batch=1, dtype=dtype, autocast_dtype=autocast
        )
        runs.append(
            {
                "preset": config.name,
                "seq_len": args.fake_seq_len,
                "micro_batch": 1,
                "params_dtype": str(dtype).removeprefix("torch."),
                "autocast": str(autocast).removeprefix("torch.") if autocast else None,
                "bytes_per_param": round(got["bytes_per_param"], 4),
                "activations": got["activations"],
                "activations_predicted": None
                if p is None
                else llama_activation_bytes(
                    config, seq_len=args.fake_seq_len, micro_batch=1, dtype_bytes=p
                ),
                "peak_total": got["peak_total"],
                "seconds": round(got["seconds"], 2),
            }
        )
    return runs


def print_table(title: str, rows: list[dict]) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| | predicted | measured | measured / predicted |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['what']} | {format_bytes(r['predicted'])} ({r['predicted']:,}) | "
            f"{format_bytes(r['measured'])} ({r['measured']:,}) | {r['ratio']:.5f} |"
        )
    print("\n".join(lines) + "\n")
    return lines + [""]


def main() -> None:
    args = parse_args()
    config = config_from_args(args)
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": torch.get_num_threads(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        },
        "config": dataclasses.asdict(config),
        "seq_len": args.seq_len,
        "micro_batch": args.micro_batch,
    }
    md = [
        f"# Predicted vs measured memory: {config.name}, s={args.seq_len}, b={args.micro_batch}",
        "",
    ]
    if args.device == "cpu":
        results["cpu"] = measure(config, args.seq_len, args.micro_batch, "cpu", "float32")
        md += print_table(f"CPU, fp32, {config.name} (tracker)", results["cpu"])
    else:  # the model flags size the GPU run; the CPU table stays the tiny lab setting
        results["cpu"] = measure(LlamaConfig.from_preset("tiny"), 64, 4, "cpu", "float32")
        md += print_table("CPU, fp32, tiny, s=64, b=4 (tracker)", results["cpu"])
        if torch.cuda.is_available():
            results["cuda"] = measure(config, args.seq_len, args.micro_batch, "cuda", args.dtype)
            md += print_table(f"CUDA, {args.dtype}, {config.name}", results["cuda"])
        else:
            print("no CUDA device: skipped the GPU comparison\n")
    if not args.no_fake:
        results["fake"] = fake_runs(args)
        md += [
            "### Fake tensors (one Adam step, nothing allocated)",
            "",
            "| model | params | autocast | B/param | activations | predicted | peak | wall |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in results["fake"]:
            pred = r["activations_predicted"]
            md.append(
                f"| {r['preset']} s={r['seq_len']} | {r['params_dtype']} | {r['autocast']} | "
                f"{r['bytes_per_param']} | {format_bytes(r['activations'])} | "
                f"{format_bytes(pred) if pred else '-'} | {format_bytes(r['peak_total'])} | "
                f"{r['seconds']} s |"
            )
        print("\n".join(md[md.index("### Fake tensors (one Adam step, nothing allocated)") :]))
    if args.out:
        with open(args.out, "w") as f:
            if args.out.endswith(".md"):
                f.write("\n".join(md) + "\n")
            else:
                json.dump(results, f, indent=2)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
