"""What a pipeline stage keeps, measured by the memory tracker against the schedule's count.

One micro-batch's stored activations on each stage are measured in one process (forward of one
micro-batch, its output dropped as after its send: what the backward needs). On four emulated
ranks the runtime then records, after every action, the tracker's bytes above the step's
start; the simulator gives the micro-batches alive at once (``peak_in_flight``). A stage must
hold exactly that many micro-batches' activations plus, at most, one boundary tensor per
micro-batch (a sent output or gradient whose send the peer has not yet been seen to receive);
in 1F1B's steady state, exactly the one tensor it is about to send. The first runtime's policy
(``keep_sends=True``: every send waited for at the end of the step) breaks the second bound,
which shows that the test catches sent tensors kept alive.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.memory.track import MemoryTracker
from minitorch_dist.models import Llama
from minitorch_dist.models.llama import cross_entropy
from minitorch_dist.pipeline import (
    DEEP,
    build_stage,
    make_schedule,
    micro_batch_list,
    run_schedule,
    simulate,
)
from minitorch_dist.reference import make_batches

P, M, B, S = 4, 6, 1, 32
BOUNDARY = B * S * DEEP.hidden * 4  # one activation (or its gradient) across a boundary, fp32


def _counted(tracker: MemoryTracker, base: dict[str, int]) -> int:
    """Bytes above ``base`` that are neither parameters nor their gradients."""
    now = tracker.current()
    return sum(now[c] - base[c] for c in ("activations", "other"))


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    return make_batches(DEEP.vocab_size, M * B, S, 1)[0]


def stored_per_micro_batch(rank: int) -> int:
    """What stage ``rank`` keeps for one micro-batch's backward: its forward's activations,
    the received input included (allocated here, as the runtime's receive buffer is), the
    output excluded (it is dropped once sent)."""
    torch.manual_seed(0)
    stage = build_stage(Llama(DEEP), rank, P)
    batch = _batch()
    inputs, targets = micro_batch_list(batch, M)[0]
    received = torch.randn(B, S, DEEP.hidden)
    with MemoryTracker(stage.chunks[0]) as tracker:
        for t in (*batch, received):  # existed before: views of them are not new memory
            tracker.track(t, "other")
        base = tracker.current()
        x = inputs if rank == 0 else torch.empty_like(received).copy_(received)
        out = stage.forward(0, 0, x, target=targets, loss_fn=cross_entropy, micro_batches=M)
        kept = _counted(tracker, base)
        if rank < P - 1:
            kept -= out.untyped_storage().nbytes()  # the output: freed after its send
    return kept


def _step(rank: int, world_size: int, kind: str, keep_sends: bool) -> list[tuple[str, int, int]]:
    """One step under the tracker: (action, micro-batches in flight, bytes) after each action."""
    torch.manual_seed(0)
    stage = build_stage(Llama(DEEP), rank, world_size)
    batch = _batch()
    with MemoryTracker(stage.chunks[0]) as tracker:
        for t in batch:
            tracker.track(t, "other")
        base = tracker.current()
        run = run_schedule(
            make_schedule(kind, world_size, M),
            stage,
            micro_batch_list(batch, M),
            tracker=tracker,
            keep_sends=keep_sends,
        )
    return [
        (repr(a), n, sum(b[c] - base[c] for c in ("activations", "other")))
        for a, n, b in zip(run.executed, run.in_flight, run.breakdown)
    ]


@pytest.fixture(scope="module")
def stored() -> list[int]:
    return [stored_per_micro_batch(r) for r in range(P)]


@pytest.fixture(scope="module")
def steps() -> dict[tuple[str, bool], list]:
    runs = [("1f1b", False), ("gpipe", False), ("1f1b", True)]
    return {run: launch(_step, P, *run, timeout=300) for run in runs}


@pytest.mark.parametrize("kind", ["1f1b", "gpipe"])
def test_peak_is_the_schedules_micro_batches_in_flight(kind, stored, steps):
    """Catches a stage that keeps an extra micro-batch (or a whole output, received buffer or
    graph of one) alive: the peak after any action is ``peak_in_flight`` (the simulator's)
    times one micro-batch's stored bytes, plus at most one boundary tensor per micro-batch."""
    peak_in_flight = simulate(make_schedule(kind, P, M)).peak_in_flight
    for rank, timeline in enumerate(steps[(kind, False)]):
        assert max(n for _, n, _ in timeline) == peak_in_flight[rank]
        peak = max(counted for _, _, counted in timeline)
        floor = peak_in_flight[rank] * stored[rank]
        extra = (peak - floor) / BOUNDARY
        assert 0 <= extra <= peak_in_flight[rank] + 0.25, (
            f"{kind}, rank {rank}: peak {peak:,} B = {peak_in_flight[rank]} micro-batches of "
            f"{stored[rank]:,} B + {extra:.2f} boundary tensors of {BOUNDARY:,} B (at most "
            f"{peak_in_flight[rank]}: one per micro-batch in flight)"
        )


def _steady_state_excess(timeline: list, stored: int, rank: int) -> list[str]:
    """The 1F1B actions between the warm-up and the cool-down after which the stage holds
    more than its micro-batches in flight and the one tensor this action is about to send."""
    ops = [a[0] for a, _, _ in timeline]
    first_b, last_f = ops.index("B"), len(ops) - 1 - ops[::-1].index("F")
    wrong = []
    for action, n, counted in timeline[first_b : last_f + 1]:
        sends = (action[0] == "F" and rank < P - 1) or (action[0] == "B" and rank > 0)
        extra = (counted - n * stored) / BOUNDARY
        if abs(extra - sends) > 0.25:
            wrong.append(f"{action}: {n} in flight + {extra:.2f} boundary tensors")
    return wrong


def test_steady_state_keeps_only_what_it_is_about_to_send(stored, steps):
    """Catches sent outputs kept until their backward (torch 2.13's pipelining did) and sent
    gradients kept until the end of the step: in 1F1B's steady state, a stage holds its
    micro-batches in flight and the one tensor its last action is about to send, nothing more.
    The first runtime's policy (every send waited for at the end of the step) fails this."""
    for rank, timeline in enumerate(steps[("1f1b", False)]):
        wrong = _steady_state_excess(timeline, stored[rank], rank)
        assert not wrong, f"rank {rank} holds more than it needs: {'; '.join(wrong)}"
    kept = [_steady_state_excess(t, stored[r], r) for r, t in enumerate(steps[("1f1b", True)])]
    assert all(kept), "keep_sends=True no longer keeps the sent tensors: the test is blind"
