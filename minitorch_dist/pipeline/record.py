"""What a pipeline run records, attached from outside the runtime's loop.

    run = run_schedule(schedule, stage, micro_batches, observers=[RunRecorder(tracker)])
    run.events, run.in_flight, run.memory, run.breakdown

The runtime (:func:`~minitorch_dist.pipeline.run_schedule`) executes actions; an observer is told
when each action's compute starts and when it has ended. :class:`RunRecorder` is the one the
runtime attaches when given none (and the one :mod:`~minitorch_dist.pipeline.measure` attaches):
each action's wall-clock span (seconds on the machine's monotonic clock, shared by forked ranks;
CUDA synchronised around each action), the chunk-micro-batches alive after it (``in_flight``)
and, with a :class:`~minitorch_dist.memory.MemoryTracker`, every category of the tracker's bytes
after it (``breakdown``) and its activation bytes (``memory``). ``observers=[]`` records none
of these (and adds no synchronisation).

:func:`logical_events` replays the actions the ranks executed on the simulator's logical clock:
a deterministic timeline of what ran, for figures that must not change between runs;
:func:`wall_events` gives every rank's wall-clock spans from the earliest start.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from minitorch_dist.pipeline.schedules import Action, Schedule
from minitorch_dist.pipeline.simulate import Event, simulate
from minitorch_dist.pipeline.stage import PipelineStage

__all__ = ["PipelineRun", "RunObserver", "RunRecorder", "logical_events", "wall_events"]


@dataclass
class PipelineRun:
    """What one rank ran: ``losses`` per micro-batch (already divided by m; only on the rank
    holding the last stage, else empty), ``executed`` actions in order, wall-clock ``events``
    ``(rank, action, start, end)``, ``in_flight`` after each action and, with a tracker,
    ``memory`` (activation bytes after each action) and ``breakdown`` (the tracker's bytes by
    category after each action: received and sent activations are ``activations``, gradients
    computed in backward ``other``)."""

    rank: int
    losses: list[float] = field(default_factory=list)
    executed: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)
    breakdown: list[dict[str, int]] = field(default_factory=list)

    @property
    def loss(self) -> float | None:
        """The step's loss (the mean over micro-batches), on the last stage's rank."""
        return sum(self.losses) if self.losses else None

    @property
    def peak_in_flight(self) -> int:
        """Most chunk-micro-batches whose activations this rank kept at once."""
        return max(self.in_flight, default=0)


class RunObserver:
    """Told, by :func:`run_schedule`, when each action's compute starts and when it has ended
    (its receive done before, its send posted after). Override either; both do nothing here."""

    def started(self, action: Action, stage: PipelineStage) -> None:
        """``action`` is about to compute on ``stage`` (its input received)."""

    def ended(self, action: Action, stage: PipelineStage, run: PipelineRun) -> None:
        """``action`` has computed; ``run`` holds what ran so far, ``action`` last."""


class RunRecorder(RunObserver):
    """Records into the run: ``events`` ``(rank, action, start, end)`` on the wall clock,
    ``in_flight`` after each action and, with ``tracker``, ``breakdown`` and ``memory``."""

    def __init__(self, tracker: Any = None) -> None:
        self.tracker = tracker
        self._start = 0.0

    def started(self, action: Action, stage: PipelineStage) -> None:
        self._start = _now(stage)

    def ended(self, action: Action, stage: PipelineStage, run: PipelineRun) -> None:
        run.events.append((stage.rank, action, self._start, _now(stage)))
        run.in_flight.append(stage.in_flight)
        if self.tracker is not None:
            run.breakdown.append(self.tracker.current())
            run.memory.append(run.breakdown[-1]["activations"])


def _now(stage: PipelineStage) -> float:
    device = stage.parameters()[0].device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.monotonic()


def logical_events(
    runs: Sequence[PipelineRun],
    schedule: Schedule,
    t_forward: float = 1.0,
    t_backward: float = 2.0,
    t_weight: float | None = None,
) -> list[Event]:
    """The actions the ranks executed (``runs`` in rank order), timed on the simulator's logical
    clock: deterministic, unlike the wall clock, and drawn from what ran, not from the plan."""
    executed = Schedule(
        schedule.kind,
        schedule.pp,
        schedule.micro_batches,
        schedule.virtual_stages,
        [list(r.executed) for r in runs],
    )
    return simulate(executed, t_forward, t_backward, t_weight).events


def wall_events(runs: Sequence[PipelineRun]) -> list[Event]:
    """Every rank's wall-clock events, in seconds from the earliest start."""
    events = [e for r in runs for e in r.events]
    t0 = min((e[2] for e in events), default=0.0)
    return [(rank, a, start - t0, end - t0) for rank, a, start, end in events]
