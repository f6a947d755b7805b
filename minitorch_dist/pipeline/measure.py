"""Check a pipeline against one process, and count what it sends.

    comparisons = compare_with_reference(4, "1f1b", 8)     # one Comparison per rank; raises if off
    counts = count_pp_bytes(2, "gpipe", 4)                 # p2p bytes per rank and peer

Each emulated rank builds the whole model after the same seed (it is tiny), cuts it into
``p v`` chunks with ``models.split_model``, keeps chunks ``r, r + p, ...`` and trains through
:func:`run_schedule`. The reference is :func:`minitorch_dist.reference.reference_run` with
``grad_acc = m``: one process, the same micro-batches in turn, each loss divided by ``m``. A rank
holds whole parameters of its stage, so no :class:`~minitorch_dist.reference.Shard` is needed: its
gradients are compared with the reference's of the same names (the model's names, which
:func:`stage_parameters` recovers from a chunk's ``start``), and together the ranks cover every
parameter exactly once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from minitorch_dist.comm.counting import CommCounter
from minitorch_dist.launching.launcher import launch
from minitorch_dist.models import Llama, LlamaConfig

# the building blocks live in the pipeline's core now; their old home keeps the names
from minitorch_dist.pipeline.build import build_stage, micro_batch_list, stage_parameters
from minitorch_dist.pipeline.record import RunRecorder
from minitorch_dist.pipeline.runtime import run_schedule
from minitorch_dist.pipeline.schedules import Schedule, make_schedule
from minitorch_dist.reference import (
    EXACT,
    TIGHT,
    Batch,
    Comparison,
    Holding,
    Run,
    compare,
    compare_runs,
    make_batches,
    reference_run,
)

__all__ = [
    "DEEP",
    "PPRun",
    "TINY",
    "build_stage",
    "compare_with_reference",
    "count_pp_bytes",
    "micro_batch_list",
    "pipeline_rank",
    "run_pipeline",
    "stage_parameters",
]

TINY = LlamaConfig.from_preset("tiny")  # 2 layers: pp = 2 without interleaving
# 8 narrow layers: pp = 4, or pp = 2 and 4 with two chunks per rank (the "deep" width
# halved so that the tests stay fast on two cores)
DEEP = LlamaConfig("deep", 256, 32, 8, 4, 2, 64, 64, 1e-5, 1e4)


@dataclass(frozen=True)
class PPRun:
    """What :func:`run_pipeline` trains (its keyword arguments besides the schedule)."""

    virtual_stages: int = 1  # chunks per rank (interleaved schedules)
    dtype: torch.dtype = torch.float64  # fp64: only the order of additions differs
    steps: int = 1  # SGD steps
    config: LlamaConfig | None = None  # the model (None: TINY if deep enough, else DEEP)
    micro_batch_size: int = 1  # sequences per micro-batch
    seq_len: int = 16
    lr: float = 0.1
    count: bool = False  # count the first step's point-to-point bytes per peer
    timeout: float = 120.0  # seconds for the launch


def pipeline_rank(
    rank: int, world_size: int, schedule: Schedule, run: PPRun, batches: Sequence[Batch]
) -> dict[str, Any]:
    """One rank's training run (``launch``'s function): per step zero the grads, run the
    schedule, record, step SGD. Returns grads of the first step, weights after the last, the
    losses (last stage), the first step's :class:`PipelineRun`, and with ``run.count`` the p2p
    bytes per peer."""
    torch.manual_seed(0)
    model = Llama(run.config).to(run.dtype)
    stage = build_stage(model, rank, world_size, schedule.virtual_stages)
    named = stage_parameters(stage)
    opt = torch.optim.SGD(list(named.values()), lr=run.lr)
    out: dict[str, Any] = {"losses": [], "grads": {}, "run": None}
    for step, batch in enumerate(batches):
        opt.zero_grad()
        counter = CommCounter() if run.count and step == 0 else None
        batches_of_step = micro_batch_list(batch, schedule.micro_batches)
        recorder = RunRecorder()  # the wall clock and the micro-batches in flight
        with counter if counter is not None else contextlib.nullcontext():
            result = run_schedule(schedule, stage, batches_of_step, observers=[recorder])
        if counter is not None:
            out["sent_to"] = dict(counter.bytes_sent_to)
            out["received_from"] = dict(counter.bytes_received_from)
        if step == 0:
            out["run"] = result
            out["grads"] = {n: p.grad.detach().clone() for n, p in named.items()}
        out["losses"].append(result.loss)
        opt.step()
    out["weights"] = {n: p.detach().clone() for n, p in named.items()}
    return out


def _schedule_and_run(
    pp: int, kind: str | Schedule, micro_batches: int, run: PPRun
) -> tuple[Schedule, PPRun]:
    """The schedule (``kind`` names one, or is one) and ``run`` with its model chosen."""
    schedule = (
        kind
        if isinstance(kind, Schedule)
        else make_schedule(kind, pp, micro_batches, run.virtual_stages)
    )
    if run.config is None:
        deep_enough = TINY.layers >= pp * schedule.virtual_stages
        run = replace(run, config=TINY if deep_enough else DEEP)
    return schedule, run


def run_pipeline(
    pp: int, kind: str | Schedule, micro_batches: int, run: PPRun | None = None, **options: Any
) -> tuple[list[dict[str, Any]], list[Batch]]:
    """Train ``run.steps`` steps on ``pp`` emulated ranks: (per-rank results, the batches).
    ``kind`` is a schedule kind or a :class:`Schedule`; ``options`` replace fields of ``run``
    (a :class:`PPRun`). ``run.config`` defaults to the tiny Llama when it has enough layers,
    else :data:`DEEP`."""
    schedule, run = _schedule_and_run(pp, kind, micro_batches, replace(run or PPRun(), **options))
    rows = run.micro_batch_size * micro_batches
    batches = make_batches(run.config.vocab_size, rows, run.seq_len, run.steps)
    results = launch(pipeline_rank, pp, schedule, run, batches, timeout=run.timeout)
    return results, batches


def compare_with_reference(
    pp: int,
    kind: str | Schedule,
    micro_batches: int,
    run: PPRun | None = None,
    *,
    tolerance: dict[str, float] | None = None,
    **options: Any,
) -> list[Comparison]:
    """Run the pipeline and the single-process reference with the same ``m`` (``grad_acc``);
    ``options`` replace fields of ``run`` (a :class:`PPRun`). Per rank, a :class:`Comparison`
    of the loss (the last stage's rank), every gradient of the first step and every weight
    after the last step, keyed ``"loss"``, ``"grad <name>"`` and ``"weight <name>"``. Raises
    an AssertionError naming the rank and tensor beyond ``tolerance`` (default :data:`EXACT`
    in fp64, :data:`TIGHT` otherwise), or if the ranks do not hold every parameter exactly
    once."""
    schedule, run = _schedule_and_run(pp, kind, micro_batches, replace(run or PPRun(), **options))
    config, dtype = run.config, run.dtype
    results, batches = run_pipeline(pp, schedule, micro_batches, run)
    ref = reference_run(
        lambda: Llama(config),
        lambda ps: torch.optim.SGD(ps, lr=run.lr),
        batches,
        grad_acc=micro_batches,
        dtype=dtype,
    )
    tol = tolerance if tolerance is not None else (EXACT if dtype == torch.float64 else TIGHT)
    held = [n for r in results for n in r["grads"]]
    if sorted(held) != sorted(ref.grads):
        raise AssertionError(f"the ranks hold {sorted(held)}, the model {sorted(ref.grads)}")
    # a rank holds whole parameters of its stages; only the last stage's rank has the loss
    runs = [Run(grads=r["grads"], weights=r["weights"]) for r in results]
    comparisons = compare_runs(
        runs,
        ref,
        holding=Holding(losses="none", names="some"),
        check=("grads", "weights"),
        tolerance=tol,
    )
    for rank, (r, comparison) in enumerate(zip(results, comparisons)):
        if r["losses"][0] is not None:
            ours = torch.tensor(r["losses"], dtype=torch.float64)
            want = torch.tensor(ref.losses, dtype=torch.float64)
            label = f"rank {rank}, "
            loss = compare({"loss": ours}, {"loss": want}, tolerance=TIGHT, label=label)
            comparison.errors |= loss.errors  # the largest over the steps
    return comparisons


def count_pp_bytes(
    pp: int, kind: str | Schedule, micro_batches: int, *, virtual_stages: int = 1, **options: Any
) -> list[dict[str, Any]]:
    """Point-to-point bytes each rank sent and received in one step, per peer rank, counted by
    :class:`~minitorch_dist.comm.CommCounter`; plus the run (``"run"``) of that rank."""
    results, _ = run_pipeline(
        pp, kind, micro_batches, virtual_stages=virtual_stages, count=True, **options
    )
    return [
        {"sent_to": r["sent_to"], "received_from": r["received_from"], "run": r["run"]}
        for r in results
    ]
