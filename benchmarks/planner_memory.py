"""The planner's predicted peak bytes per rank against the allocator, for one configuration.

One process is one rank of ``dp = tp = pp = 1``: a Llama of about 0.9B parameters (hidden 2048,
16 layers, GQA 16:8, SwiGLU 5632, vocabulary 32000) in bf16 with an fp32 master copy and fp32
Adam states (16 bytes per parameter, the planner's recipe), one micro-batch of ``--micro-batch``
sequences of ``--seq-len`` tokens. Two steps run; the second step's forward and backward are
measured (the optimizer states exist by then): ``torch.cuda.max_memory_allocated`` on a GPU, the
package's ``MemoryTracker`` (live tensor storages) on the CPU, where a tiny model stands in.

Printed beside the measurement: the planner's prediction
(:func:`minitorch_dist.planner.rank_memory`, Korthikanti's per-layer activations with
``recompute="selective"``, which is what fused attention stores: no s x s matrix) and the
Llama-aware activation count of chapter 1 (:func:`minitorch_dist.memory.llama_activation_bytes`).

    python benchmarks/planner_memory.py --device cuda --out DIR     # writes DIR/<gpu>_planner_memory.md
    python benchmarks/planner_memory.py --device cpu                # tiny model, this machine

No network, no extra dependencies; on an H100 it runs in well under a minute.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import device_tag, write_result

from minitorch_dist.memory import MemoryTracker, format_bytes, llama_activation_bytes
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.models.data import synthetic_batch
from minitorch_dist.planner import ParallelConfig, as_model, rank_memory

GPU_MODEL = LlamaConfig("planner-0.9b", 32000, 2048, 16, 16, 8, 5632, 4096, 1e-5, 10000.0)
CPU_MODEL = LlamaConfig.from_preset("tiny")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seq-len", type=int, help="default 2048 on cuda, 64 on cpu")
    parser.add_argument("--micro-batch", type=int, help="default 4")
    parser.add_argument("--out", help="directory for <device>_planner_memory.md")
    return parser.parse_args()


def train_two_steps(config: LlamaConfig, seq_len: int, micro_batch: int, device: str) -> dict:
    """Two mixed-precision Adam steps; the peak bytes of the second forward + backward."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):  # built where it runs: no 4-byte copy of a 0.9B model on the host
        model = Llama(config).to(dtype)
    params = list(model.parameters())
    master = [p.detach().float().clone() for p in params]  # fp32 master copy (4 B/param)
    opt = torch.optim.Adam(master, lr=1e-4, foreach=False)  # m, v: 8 B/param
    inputs, targets = synthetic_batch(config.vocab_size, micro_batch, seq_len, seed=0)
    inputs, targets = inputs.to(device), targets.to(device)

    def forward_backward() -> None:
        loss = cross_entropy(model(inputs), targets)
        loss.backward()

    def step() -> None:
        for p, m in zip(params, master):
            m.grad = p.grad.float()
        opt.step()
        for p, m in zip(params, master):
            p.data.copy_(m)
            m.grad = None
        # keep the 16-bit gradients allocated, as a real step's gradient buffers are

    forward_backward()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        forward_backward()
        torch.cuda.synchronize()
        return {"peak": torch.cuda.max_memory_allocated(), "before": before}
    with MemoryTracker(model, opt) as tracker:
        forward_backward()
    return {"peak": tracker.peak_total, "before": None}


def main() -> None:
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but torch.cuda.is_available() is False")
    config = GPU_MODEL if args.device == "cuda" else CPU_MODEL
    seq_len = args.seq_len or (2048 if args.device == "cuda" else 64)
    micro_batch = args.micro_batch or 4
    model = as_model(config)
    layout = ParallelConfig(
        dp=1, tp=1, pp=1, zero=0, recompute="selective", micro_batch=micro_batch
    )
    predicted = rank_memory(model, layout, seq_len=seq_len, global_batch=micro_batch)
    if args.device == "cpu":  # fp32 model: params and grads are 4 bytes, not 2
        predicted = {
            **predicted,
            "params": 2 * predicted["params"],
            "grads": 2 * predicted["grads"],
        }
        predicted["activations"] *= 2  # Korthikanti counts 2-byte activations
        predicted["total"] = sum(
            predicted[k] for k in ("params", "grads", "optimizer", "activations", "logits")
        )
    llama_acts = llama_activation_bytes(
        config,
        seq_len=seq_len,
        micro_batch=micro_batch,
        dtype_bytes=2 if args.device == "cuda" else 4,
        recompute="selective",
    )
    start = time.perf_counter()
    got = train_two_steps(config, seq_len, micro_batch, args.device)
    seconds = time.perf_counter() - start
    name, tag = device_tag(args.device)
    name = name if args.device == "cuda" else f"cpu ({name})"
    states = predicted["params"] + predicted["grads"] + predicted["optimizer"]
    lines = [
        f"<!-- Device: one {name}, torch {torch.__version__}; benchmarks/planner_memory.py. -->",
        f"# Planner: predicted vs measured peak memory, one rank ({name})",
        "",
        f"{config.name}: {config.num_params():,} parameters, seq_len {seq_len}, micro-batch "
        f"{micro_batch}, dp = tp = pp = 1, bf16 params/grads + fp32 master and Adam"
        + (" (CPU: fp32 model)" if args.device == "cpu" else "")
        + f"; ran in {seconds:.1f} s.",
        "",
        "| part | bytes | |",
        "|---|---:|---|",
        f"| planner: model states | {states:,} | {format_bytes(states)} |",
        f"| planner: activations (Korthikanti, selective) | {predicted['activations']:,} | {format_bytes(predicted['activations'])} |",
        f"| planner: log-probabilities (fp32) | {predicted['logits']:,} | {format_bytes(predicted['logits'])} |",
        f"| **planner: predicted peak** | {predicted['total']:,} | {format_bytes(predicted['total'])} |",
        f"| Llama-aware activations (chapter 1), for reference | {llama_acts:,} | {format_bytes(llama_acts)} |",
        *(
            [
                f"| allocated when the measured step starts | {got['before']:,} | {format_bytes(got['before'])} |"
            ]
            if got["before"] is not None
            else []
        ),
        f"| **measured peak** ({'max_memory_allocated' if args.device == 'cuda' else 'MemoryTracker'}) | {got['peak']:,} | {format_bytes(got['peak'])} |",
        "",
        f"measured / predicted = {got['peak'] / predicted['total']:.3f}",
    ]
    write_result("\n".join(lines) + "\n", args.out, f"{tag}_planner_memory.md")


if __name__ == "__main__":
    main()
