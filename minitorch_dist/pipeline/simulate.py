"""Run a schedule's action lists on a logical clock: when each action starts and ends.

    result = simulate(make_schedule("1f1b", 4, 8))
    result.makespan        # 33.0 = (m + p - 1) (t_F + t_B) with t_F = 1, t_B = 2
    result.peak_in_flight  # [4, 3, 2, 1]

The rules are the dependencies of the model and nothing else (communication is free):

* ``F`` of micro-batch ``i`` on global stage ``s`` starts after ``F`` of ``i`` on stage ``s - 1``
  ended (the activation arrived);
* ``B`` of ``i`` on stage ``s`` starts after ``B`` of ``i`` on stage ``s + 1`` ended (the gradient
  arrived); on the last stage, after its own ``F`` of ``i``;
* ``W`` of ``i`` on stage ``s`` after ``B`` of ``i`` on the same stage;
* a rank runs one action at a time, in its list's order, as early as these allow.

``t_forward`` and ``t_backward`` are one micro-batch through a rank's whole share of layers; a
chunk of an interleaved schedule takes ``1 / v`` of that. With W passes (zero-bubble schedules)
the backward is split: B takes ``t_backward - t_weight`` and W ``t_weight`` (default: half each).
A schedule whose lists wait on each other forever raises :class:`ScheduleDeadlock`.
"""

from __future__ import annotations

from dataclasses import dataclass

from minitorch_dist.checks import check_positive
from minitorch_dist.pipeline.schedules import Action, Schedule

__all__ = ["Event", "ScheduleDeadlock", "SimResult", "simulate"]

Event = tuple[int, Action, float, float]  # (rank, action, start, end)


class ScheduleDeadlock(ValueError):
    """Every rank waits for an action that another rank will never run first."""


@dataclass
class SimResult:
    """What the logical clock gives: ``events`` as ``(rank, action, start, end)`` in the order
    they were placed, the ``makespan`` (end of the last action), per rank ``peak_in_flight``
    (micro-batches -- chunk-micro-batches when interleaved -- whose activations are alive at
    once: from the end of F to the end of B, or of W when there is one) and ``busy`` (time each
    rank computed)."""

    events: list[Event]
    makespan: float
    peak_in_flight: list[int]
    busy: list[float]

    @property
    def bubble(self) -> float:
        """Measured idle share of the step, averaged over ranks: 1 - busy / makespan."""
        return sum(1 - b / self.makespan for b in self.busy) / len(self.busy)

    @property
    def idle_over_ideal(self) -> float:
        """Measured idle time over the busy time, averaged over ranks (the bubble fraction)."""
        return sum((self.makespan - b) / b for b in self.busy) / len(self.busy)


def simulate(
    schedule: Schedule,
    t_forward: float = 1.0,
    t_backward: float = 2.0,
    t_weight: float | None = None,
) -> SimResult:
    """Time ``schedule``'s action lists on a logical clock (see the module's docstring)."""
    check_positive("t_forward", t_forward)
    check_positive("t_backward", t_backward)
    if t_weight is not None and not 0 < t_weight < t_backward:
        raise ValueError(f"t_weight must be in (0, t_backward={t_backward}), got {t_weight}")
    # BEGIN SOLUTION lab09.3: place each rank's next action once its input is there; count live ones
    v, p = schedule.virtual_stages, schedule.pp
    split = any(a.op == "W" for acts in schedule.actions for a in acts)
    t_w = (t_backward / 2 if t_weight is None else t_weight) if split else 0.0
    cost = {"F": t_forward / v, "B": (t_backward - t_w) / v, "W": t_w / v}
    last = schedule.num_stages - 1
    done: dict[tuple[str, int, int], float] = {}  # (op, micro-batch, global stage) -> end time
    nxt, free = [0] * p, [0.0] * p
    live, peak, busy = [0] * p, [0] * p, [0.0] * p
    events: list[Event] = []
    remaining = sum(len(a) for a in schedule.actions)
    while remaining:
        progressed = False
        for rank in range(p):
            while nxt[rank] < len(schedule.actions[rank]):
                a = schedule.actions[rank][nxt[rank]]
                s = schedule.stage(rank, a.chunk)
                need = {
                    "F": ("F", s - 1) if s > 0 else None,
                    "B": ("B", s + 1) if s < last else ("F", s),
                    "W": ("B", s),
                }[a.op]
                if need is not None and (need[0], a.micro_batch, need[1]) not in done:
                    break  # its input has not arrived: let the other ranks move
                start = max(free[rank], done[(need[0], a.micro_batch, need[1])] if need else 0.0)
                end = start + cost[a.op]
                done[(a.op, a.micro_batch, s)] = free[rank] = end
                events.append((rank, a, start, end))
                busy[rank] += cost[a.op]
                frees = "W" if split else "B"
                live[rank] += 1 if a.op == "F" else -1 if a.op == frees else 0
                peak[rank] = max(peak[rank], live[rank])
                nxt[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            waiting = ", ".join(
                f"rank {r} at {schedule.actions[r][nxt[r]]}"
                for r in range(p)
                if nxt[r] < len(schedule.actions[r])
            )
            raise ScheduleDeadlock(f"the schedule deadlocks: {waiting} wait for each other")
    makespan = max(end for _, _, _, end in events)
    return SimResult(events, makespan, peak, busy)
    # END SOLUTION
