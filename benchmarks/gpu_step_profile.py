"""One training step on a GPU, profiled: a torch.profiler trace and a memory snapshot (chapter 5).

Chapter 5's profiling section traces an emulated-rank DDP step on the CPU. This script records
what the same tools show on a GPU, for one step of a Llama in bf16 with Adam (after two warm-up
steps, so the optimizer states exist):

1. ``torch.profiler`` with CPU and CUDA activity -> ``<tag>_gpu_step_trace.json.gz`` (open it in
   https://ui.perfetto.dev or chrome://tracing), and the ten CUDA kernels that took the most time;
2. ``torch.cuda.memory._record_memory_history`` -> ``<tag>_gpu_step_snapshot.pickle`` (drop it on
   https://pytorch.org/memory_viz) and a picture of allocated bytes over the step drawn from the
   snapshot's allocation events, with the step's phases marked;
3. the allocator's peak next to the package's steady-state prediction (model states +
   activations at the end of the forward pass: a lower bound of the peak, see chapter 1).

    python benchmarks/gpu_step_profile.py --out benchmarks/results          # needs CUDA
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import shutil
from pathlib import Path

import torch
from common import add_model_args, config_from_args, device_tag

from minitorch_dist.memory import llama_activation_bytes
from minitorch_dist.models import Llama, cross_entropy
from minitorch_dist.models.data import synthetic_batch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(p, seq_len=1024, micro_batch=4)
    p.add_argument("--out", required=True, help="folder for the trace, snapshot, picture, table")
    return p.parse_args()


def main() -> None:
    args = parse()
    if not torch.cuda.is_available():
        raise SystemExit("this script needs a CUDA device")
    config = config_from_args(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name, tag = device_tag("cuda")
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    model = Llama(config).cuda()
    torch.set_default_dtype(previous)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    inputs, targets = synthetic_batch(config.vocab_size, args.micro_batch, args.seq_len)
    inputs, targets = inputs.cuda(), targets.cuda()

    def step() -> None:
        with torch.profiler.record_function("forward"):
            loss = cross_entropy(model(inputs), targets)
        with torch.profiler.record_function("backward"):
            loss.backward()
        with torch.profiler.record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        step()
        torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated()

    raw = out / f"{tag}_gpu_step_trace.json"
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(str(raw) + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    with (out / f"{tag}_gpu_step_snapshot.pickle").open("wb") as f:
        pickle.dump(snapshot, f)

    # allocated bytes after each allocator event of the recorded step
    level, xs, ys = base, [], []
    for trace in snapshot["device_traces"]:
        for event in trace:
            if event["action"] == "alloc":
                level += event["size"]
            elif event["action"] == "free_completed":
                level -= event["size"]
            else:
                continue
            xs.append(len(xs))
            ys.append(level / 2**30)
    from minitorch_dist.figures import BookFigure  # its PNG records its smallest text

    fig = BookFigure(figsize=(7, 3))
    ax = fig.subplots()
    ax.plot(xs, ys, lw=1)
    ax.set_xlabel("allocator event")
    ax.set_ylabel("allocated (GiB)")
    ax.set_title(f"One training step on {name}: allocated memory")
    fig.tight_layout()
    fig.savefig(out / f"{tag}_gpu_step_memory.png", dpi=120)

    kernels = sorted(
        (
            e
            for e in prof.key_averages()
            if e.device_time_total > 0
            and not e.key.startswith(("forward", "backward", "optimizer", "ProfilerStep"))
        ),
        key=lambda e: e.device_time_total,
        reverse=True,
    )[:10]
    n = config.num_params()
    states = n * (2 + 2 + 4)  # bf16 params and grads, bf16 Adam moments: 2 + 2 + 2 * 2
    acts = llama_activation_bytes(config, seq_len=args.seq_len, micro_batch=args.micro_batch)
    lines = [
        f"<!-- Device: one {name}, torch {torch.__version__}; one bf16 Adam step after two warm-up "
        "steps, profiled. -->",
        f"# One training step profiled on {name}",
        "",
        f"{config.name}-style Llama, {n:,} parameters, s = {args.seq_len}, b = {args.micro_batch}, "
        f"bf16 params, grads and Adam states; torch {torch.__version__}",
        "",
        "| | bytes |",
        "|---|---:|",
        f"| allocated before the step (params + Adam states + batch) | {base:,} |",
        f"| predicted model states (2 + 2 + 4 bytes/param) | {states:,} |",
        f"| predicted activations at the end of the forward pass | {acts:,} |",
        f"| allocator peak of the step | **{peak:,}** |",
        f"| peak / (states + activations) | **{peak / (states + acts):.3f}** |",
        "",
        "### The ten operators and kernels with the most CUDA time (nested: an operator includes its kernels)",
        "",
        "| operator or kernel | calls | CUDA time (ms) |",
        "|---|---:|---:|",
        *(f"| `{e.key[:80]}` | {e.count} | {e.device_time_total / 1e3:.2f} |" for e in kernels),
        "",
        f"Files: `{tag}_gpu_step_trace.json.gz` (Perfetto / chrome://tracing), "
        f"`{tag}_gpu_step_snapshot.pickle` (pytorch.org/memory_viz), `{tag}_gpu_step_memory.png`.",
        "",
    ]
    text = "\n".join(lines)
    (out / f"{tag}_gpu_step_profile.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
