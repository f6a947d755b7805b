"""Our activation checkpointing against PyTorch's (chapter 3, lab 3): memory and time ratios.

For each recompute policy (``selective``: every ``attn.core``; ``full``: every ``Block``) and each
implementation -- ours (``CheckpointFunction``, reentrant style), ``torch.utils.checkpoint`` in
its default non-reentrant form, and the same with ``use_reentrant=True`` -- one training step is
measured with the ``MemoryTracker``:

- **stored**: bytes the forward pass leaves alive (``stored_activations``);
- **peak**: the step's peak of live tensor bytes (on a GPU also ``max_memory_allocated`` growth);
- **time**: the fastest forward + backward over ``--repeats`` rounds, the models taking turns.

Ratios are ours / torch (same policy) and time / no recomputation. Prints everything in one run:

    python benchmarks/recompute_vs_torch.py                       # tiny Llama, CPU, fp32
    python benchmarks/recompute_vs_torch.py --device cuda --dtype bfloat16 --hidden 1024 \\
        --layers 8 --heads 16 --kv-heads 8 --ffn 2816 --vocab 32000 --seq-len 2048 --micro-batch 4
    python benchmarks/recompute_vs_torch.py --out benchmarks/results/<machine>_recompute_vs_torch.md
"""

from __future__ import annotations

import argparse
import platform
import time

import torch
from common import add_model_args, config_from_args, emit
from torch import nn

from minitorch_dist.memory import format_bytes, measure_step
from minitorch_dist.models import LlamaConfig, cross_entropy, synthetic_batch
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.progress import progress
from minitorch_dist.recompute import build_model, stored_activations, time_steps

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
IMPLS = ("ours", "torch", "torch-reentrant")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    add_model_args(parser, seq_len=256, micro_batch=4)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", help="also write the table as markdown to this path")
    return parser.parse_args()


def make(config: LlamaConfig, policy: str, impl: str, device: str, dtype: torch.dtype) -> nn.Module:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        if impl == "torch-reentrant":
            model = build_model(config, device=device)
            return apply_torch_checkpointing(model, policy, use_reentrant=True)
        return build_model(config, policy=policy, impl=impl, device=device)
    finally:
        torch.set_default_dtype(previous)


def measure(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, int]:
    """Stored bytes and peak of one step (SGD: no optimizer state), warmed up on a GPU."""
    if batch[0].device.type == "cuda":  # cuBLAS allocates its workspace on the first product
        cross_entropy(model(batch[0]), batch[1]).backward()
        model.zero_grad(set_to_none=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    step = measure_step(model, opt, lambda: tuple(t.clone() for t in batch), cross_entropy)
    model.zero_grad(set_to_none=True)
    out = {"stored": stored_activations(step), "peak": step["peak_total"]}
    if step["cuda"]:
        out["cuda_peak"] = step["cuda"]["max_allocated"] - step["cuda"]["allocated_at_enter"]
    return out


def main() -> None:
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device on this machine")
    torch.set_num_threads(1) if args.device == "cpu" else None
    config, dtype = config_from_args(args), DTYPES[args.dtype]
    x, y = synthetic_batch(config.vocab_size, args.micro_batch, args.seq_len)
    batch = (x.to(args.device), y.to(args.device))
    runs = [("none", "none")] + [(p, i) for p in ("selective", "full") for i in IMPLS]
    models = {
        run: make(config, run[0], "ours" if run[1] == "none" else run[1], args.device, dtype)
        for run in runs
    }
    memory = {
        run: measure(model, batch) for run, model in progress(models.items(), len(models), "memory")
    }
    seconds = time_steps(models, batch, repeats=args.repeats)

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    lines = [
        f"# Activation checkpointing: ours vs torch.utils.checkpoint, {config.name}",
        "",
        f"{args.device} ({gpu}), torch {torch.__version__}, {platform.python_version()}, "
        f"{args.dtype}, s = {args.seq_len}, b = {args.micro_batch}, {config.layers} layers, "
        f"best of {args.repeats} rounds",
        "",
        "| policy | implementation | stored | stored / torch | peak | peak / torch | time | "
        "time / none | time / torch |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, impl in runs:
        m, t = memory[(policy, impl)], seconds[(policy, impl)]
        ref = (policy, "torch") if policy != "none" else ("none", "none")
        peak = m.get("cuda_peak", m["peak"])
        ref_peak = memory[ref].get("cuda_peak", memory[ref]["peak"])
        lines.append(
            f"| {policy} | {impl} | {format_bytes(m['stored'])} | "
            f"{m['stored'] / memory[ref]['stored']:.3f} | {format_bytes(peak)} | "
            f"{peak / ref_peak:.3f} | {t * 1e3:.1f} ms | {t / seconds[('none', 'none')]:.2f} | "
            f"{t / seconds[ref]:.2f} |"
        )
    lines += [
        "",
        "Peaks are tracked tensor bytes"
        + (" (GPU: growth of max_memory_allocated)." if args.device == "cuda" else "."),
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
