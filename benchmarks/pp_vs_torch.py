"""Our pipeline schedules against torch.distributed.pipelining (chapter 9, lab 9).

Prints, in one run on ``--world-size`` ranks (4 emulated gloo ranks by default), our 1F1B and
GPipe (``make_schedule`` + ``run_schedule``) against torch's ``Schedule1F1B`` and
``ScheduleGPipe`` on the same model cut into the same stages (``split_layers``), the same
micro-batches and the same loss (each micro-batch's mean divided by m: ``scale_grads=True`` on
torch's side):

1. median step time (forward, backward, SGD step), ours / torch (goal <= 1.15);
2. per-stage peak memory of one step, ours / torch (goal <= 1.0). CPU: the bytes of tensors alive
   at the step's peak above those alive before it, by ``MemoryTracker``; GPU:
   ``torch.cuda.max_memory_allocated`` minus the memory allocated before the step;
3. point-to-point bytes each rank sent in one step, counted by ``CommCounter``, / the formula
   ``neighbours * m * b s h * bytes_per_element`` (activations forward, gradients backward);
4. the bubble's share of the step measured from each action's timestamps (1 - busy / span,
   averaged over ranks) next to ``(p - 1) / (m + p - 1)``. Two CPU cores shared by four ranks
   stretch every action, so on CPU this column says more about the machine than the schedule.

The losses of all four runs must agree (same model, same batch).

``torch.distributed.pipelining`` changes between releases (torch 2.15 frees each stage's output
once it is sent, where 2.13 kept it until the backward), so the comparison is made on more than
one torch: ``--torch-venvs`` runs the same measurement under each virtual environment's Python
(the pinned torch in ``.venv``, the newest in a second one) and prints one table per torch; with
``--out`` the file holds all of them, each under a heading naming its torch version.

    python benchmarks/pp_vs_torch.py                                   # 8-layer tiny Llama
    python benchmarks/pp_vs_torch.py --hidden 256 --ffn 688 --micro-batches 16
    python benchmarks/pp_vs_torch.py --device cuda --world-size 4      # runs itself under torchrun
    python benchmarks/pp_vs_torch.py --torch-venvs .venv .venv-newest \
        --out benchmarks/results/cpu-2core_pp_vs_torch.md              # pinned and newest torch
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from common import add_model_args, config_from_args, emit

from minitorch_dist.comm import CommCounter
from minitorch_dist.launching.launcher import launch, torchrun, under_torchrun
from minitorch_dist.memory import format_bytes
from minitorch_dist.memory.track import MemoryTracker
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy, split_model
from minitorch_dist.pipeline import (
    PipelineStage,
    bubble_share,
    make_schedule,
    micro_batch_list,
    run_schedule,
    split_layers,
)
from minitorch_dist.reference import make_batches

GOAL_TIME, GOAL_MEMORY = 1.15, 1.0
VARIANTS = ("ours 1f1b", "torch 1f1b", "ours gpipe", "torch gpipe")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--world-size", type=int, default=4, help="pipeline stages, one per rank")
    add_model_args(p, seq_len=64, micro_batch=2)
    p.set_defaults(layers=8)  # the tiny preset has 2 blocks: too few for 4 stages
    p.add_argument("--micro-batches", type=int, default=8, help="m, micro-batches per step")
    p.add_argument("--steps", type=int, default=3, help="steps per timed turn")
    p.add_argument("--repeats", type=int, default=5, help="turns per variant (median reported)")
    p.add_argument("--out", help="also write the table as markdown to this path")
    p.add_argument(
        "--torch-venvs",
        nargs="+",
        metavar="VENV",
        help="run under each virtual environment's python (e.g. .venv and one with "
        "the newest torch) and report every torch's table",
    )
    p.add_argument("--json", help=argparse.SUPPRESS)  # --torch-venvs: where a run leaves its report
    return p.parse_args()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _TorchRunner:
    """torch.distributed.pipelining on one rank, its stage's F and B timestamped."""

    def __init__(self, chunk, rank, pp, kind, m, device, events):  # noqa: ANN001
        from torch.distributed.pipelining import PipelineStage as TorchStage
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

        self.stage = TorchStage(chunk, rank, pp, device)
        cls = {"1f1b": Schedule1F1B, "gpipe": ScheduleGPipe}[kind]
        self.schedule = cls(self.stage, m, loss_fn=cross_entropy, scale_grads=True)
        self.rank, self.pp = rank, pp
        for name, op in (("forward_one_chunk", "F"), ("backward_one_chunk", "B")):
            setattr(self.stage, name, _timed(getattr(self.stage, name), op, events, device))

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float | None:
        losses: list[torch.Tensor] = []
        if self.rank == 0:
            self.schedule.step(inputs)
        elif self.rank == self.pp - 1:
            self.schedule.step(target=targets, losses=losses)
        else:
            self.schedule.step()
        return float(sum(loss.item() for loss in losses)) / len(losses) if losses else None


def _timed(method, op, events, device):  # noqa: ANN001, ANN202
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _sync(device)
        start = time.monotonic()
        out = method(*args, **kwargs)
        _sync(device)
        events.append((op, start, time.monotonic()))
        return out

    return wrapper


class _OurRunner:
    def __init__(self, chunk, rank, pp, kind, m, device, events):  # noqa: ANN001
        self.stage = PipelineStage([chunk], rank, pp)
        self.schedule = make_schedule(kind, pp, m)
        self.m, self.events = m, events

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float | None:
        run = run_schedule(self.schedule, self.stage, micro_batch_list((inputs, targets), self.m))
        self.events += [(a.op, start, end) for _, a, start, end in run.events]
        return run.loss


def compare(
    rank: int, world_size: int, config: LlamaConfig, args: argparse.Namespace
) -> dict[str, Any]:
    """One rank: build each variant on the same weights, then time turns in rotation."""
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    m = args.micro_batches
    batch = make_batches(config.vocab_size, m * args.micro_batch, args.seq_len, 1)[0]
    inputs, targets = (t.to(device) for t in batch)
    runners, opts, chunks, events = {}, {}, {}, {}
    for variant in VARIANTS:
        torch.manual_seed(0)
        chunk = split_model(Llama(config), split_layers(config.layers, world_size))[rank]
        chunks[variant] = chunk.to(device)
        events[variant] = []
        who, kind = variant.split()
        runner = _OurRunner if who == "ours" else _TorchRunner
        runners[variant] = runner(chunk, rank, world_size, kind, m, device, events[variant])
        opts[variant] = torch.optim.SGD(chunk.parameters(), lr=1e-3)

    def step(variant: str) -> float | None:
        opts[variant].zero_grad(set_to_none=True)
        loss = runners[variant].step(inputs, targets)
        opts[variant].step()
        return loss

    out: dict[str, Any] = {v: {} for v in VARIANTS}
    for variant in VARIANTS:  # warm-up (torch infers shapes on its first step), then measure
        out[variant]["loss"] = step(variant)
        dist.barrier()
        events[variant].clear()
        out[variant]["peak"] = _peak_of_one_step(
            lambda v=variant: step(v), chunks[variant], device, (inputs, targets)
        )
        dist.barrier()
        out[variant]["events"] = list(events[variant])
        events[variant].clear()
        with CommCounter() as counter:
            step(variant)
            dist.barrier()
        out[variant]["sent"] = counter.bytes_sent["send"]
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(args.repeats):
        for variant in VARIANTS:
            dist.barrier()
            _sync(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                step(variant)
            _sync(device)
            dist.barrier()
            times[variant].append((time.perf_counter() - start) / args.steps)
    for variant in VARIANTS:
        out[variant]["seconds"] = statistics.median(times[variant])
    return out


def _peak_of_one_step(step, chunk, device, batch) -> int:  # noqa: ANN001
    """Peak bytes above what was alive before the step (the parameters, the batch)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with MemoryTracker(chunk) as tracker:
        # The batch exists before the step on every rank. The tracker only learns of a storage
        # when an operator touches it; told now, the micro-batches cut from it (views, no new
        # memory) are not mistaken for memory the step allocated.
        for t in batch:
            tracker.track(t, "other")
        before = sum(tracker.current().values())
        step()
    return tracker.peak_total - before


def measured_bubble(per_rank_events: list[list[tuple[str, float, float]]]) -> float:
    """1 - busy / span per rank, averaged; span from the first start to the last end anywhere."""
    start = min(s for evs in per_rank_events for _, s, _ in evs)
    end = max(e for evs in per_rank_events for _, _, e in evs)
    span = end - start
    return sum(1 - sum(e - s for _, s, e in evs) / span for evs in per_rank_events) / len(
        per_rank_events
    )


def ratios(results: list[dict]) -> dict[str, Any]:
    """Ours / torch per schedule: step time, peak memory per stage; the losses' spread."""
    seconds = {v: results[0][v]["seconds"] for v in VARIANTS}
    losses = [r[v]["loss"] for r in results for v in VARIANTS if r[v]["loss"] is not None]
    out: dict[str, Any] = {"torch": torch.__version__, "loss spread": max(losses) - min(losses)}
    for kind in ("1f1b", "gpipe"):
        out[kind] = {
            "time": seconds[f"ours {kind}"] / seconds[f"torch {kind}"],
            "memory": [r[f"ours {kind}"]["peak"] / r[f"torch {kind}"]["peak"] for r in results],
        }
    return out


def report(args: argparse.Namespace, config: LlamaConfig, results: list[dict]) -> str:
    p, m = args.world_size, args.micro_batches
    bytes_per_element = 4  # fp32
    message = args.micro_batch * args.seq_len * config.hidden * bytes_per_element
    formula = [m * message * (1 if r in (0, p - 1) else 2) for r in range(p)]
    seconds = {v: results[0][v]["seconds"] for v in VARIANTS}
    losses = {v: next(r[v]["loss"] for r in results if r[v]["loss"] is not None) for v in VARIANTS}
    lines = [
        f"<!-- {platform.platform()}, torch {torch.__version__}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, device {args.device} -->",
        f"# Pipeline parallelism: ours vs torch.distributed.pipelining {torch.__version__}, "
        f"{p} stages on {args.device}",
        "",
        f"{config.num_params():,} parameters ({config.name}, hidden {config.hidden}, "
        f"{config.layers} layers split {split_layers(config.layers, p)}), m = {m} micro-batches "
        f"of {args.micro_batch} x {args.seq_len} tokens, fp32, SGD; median of {args.repeats} "
        f"turns of {args.steps} steps.",
        "",
        "| variant | step time (ms) | loss | peak per stage | bytes sent per rank "
        "| sent / formula | bubble share, measured |",
        "|---|---:|---:|---|---|---|---:|",
    ]
    for v in VARIANTS:
        peaks = ", ".join(format_bytes(r[v]["peak"]) for r in results)
        sent = ", ".join(f"{r[v]['sent']:,}" for r in results)
        share = ", ".join(f"{r[v]['sent'] / f:.3f}" for r, f in zip(results, formula))
        bubble = measured_bubble([r[v]["events"] for r in results])
        lines.append(
            f"| {v} | {1e3 * seconds[v]:.1f} | {losses[v]:.5f} | {peaks} | {sent} | "
            f"{share} | {bubble:.1%} |"
        )
    lines.append("")
    measured = ratios(results)
    for kind in ("1f1b", "gpipe"):
        ratio, mem = measured[kind]["time"], measured[kind]["memory"]
        lines += [
            f"- {kind}: ours / torch step time **{ratio:.2f}** (goal <= {GOAL_TIME}: "
            f"{'met' if ratio <= GOAL_TIME else 'NOT met'}); peak memory per stage "
            f"**{', '.join(f'{x:.3f}' for x in mem)}** (goal <= {GOAL_MEMORY}: "
            f"{'met' if max(mem) <= GOAL_MEMORY else 'NOT met'})",
        ]
    spread = max(losses.values()) - min(losses.values())
    lines += [
        f"- bubble share, formula (p - 1) / (m + p - 1) = {bubble_share(p, m):.1%}",
        f"- formula for bytes sent: neighbours x m x b s h x 4 = "
        f"{', '.join(f'{f:,}' for f in formula)} per rank",
        f"- losses agree to {spread:.1e}",
    ]
    return "\n".join(lines)


def under_each_torch(args: argparse.Namespace) -> None:
    """Run this script under each of ``args.torch_venvs``' Python; print (and with ``--out``
    write) a summary per torch and every run's report, each under its torch's heading."""
    passed: list[str] = []  # this run's flags, less --torch-venvs and --out
    skip = False
    for token in sys.argv[1:]:
        if token.startswith("--torch-venvs") or token.startswith("--out"):
            skip = "=" not in token
            continue
        if skip and not token.startswith("--"):
            continue
        skip = False
        passed.append(token)
    load = os.getloadavg()[0]  # other work on the machine stretches the step times
    runs = []
    for venv in args.torch_venvs:
        python = Path(venv) / "bin" / "python"
        if not python.is_file():
            raise SystemExit(f"--torch-venvs: {python} does not exist (make the venv first)")
        with tempfile.TemporaryDirectory() as tmp:
            found = Path(tmp) / "run.json"
            subprocess.run(
                [str(python), os.path.abspath(__file__), *passed, "--json", str(found)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            runs.append(json.loads(found.read_text()))
    versions = " and ".join(r["ratios"]["torch"] for r in runs)
    lines = [
        f"# Pipeline parallelism: ours vs torch.distributed.pipelining on torch {versions}",
        "",
        f"The same measurement under each torch (goals: step time <= {GOAL_TIME}, peak memory "
        f"per stage <= {GOAL_MEMORY} of torch's, losses equal); each run's report follows. "
        f"Memory is counted exactly; step times vary with the machine's load (load average "
        f"{load:.1f} at the start, on {os.cpu_count()} CPUs).",
        "",
        "| torch | 1F1B step time | 1F1B peak memory per stage | GPipe step time "
        "| GPipe peak memory per stage | losses agree to |",
        "|---|---:|---|---:|---|---:|",
    ]
    for run in runs:
        r = run["ratios"]
        cells = [
            f"{r[k]['time']:.2f} | {', '.join(f'{x:.3f}' for x in r[k]['memory'])}"
            for k in ("1f1b", "gpipe")
        ]
        lines.append(f"| {r['torch']} | {cells[0]} | {cells[1]} | {r['loss spread']:.1e} |")
    for run in runs:  # each report's title becomes a section of this file
        lines += ["", run["report"].replace("\n# ", "\n## ", 1)]
    emit("\n".join(lines), args.out)


def main() -> None:
    args = parse_args()
    if args.torch_venvs:
        under_each_torch(args)
        return
    if args.device == "cuda" and not under_torchrun():
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda needs a GPU")
        torchrun(os.path.abspath(__file__), args.world_size, *sys.argv[1:], timeout=1200)
        return
    config = config_from_args(args)
    results = launch(compare, args.world_size, config, args, timeout=1200)
    if under_torchrun() and int(os.environ["RANK"]) != 0:
        return
    text = report(args, config, results)
    emit(text, args.out)
    if args.json:
        Path(args.json).write_text(json.dumps({"ratios": ratios(results), "report": text}))


if __name__ == "__main__":
    main()
