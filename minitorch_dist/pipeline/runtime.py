"""One runtime for every schedule: execute a rank's action list, sending and receiving what each
action needs, and record what ran.

    run = run_schedule(schedule, stage, micro_batches, loss_fn=cross_entropy)
    run.losses, run.peak_in_flight, run.events      # on every rank

Before each action the runtime posts, in one batch, the sends of the action that just ended and
the receive the next one needs (Megatron-LM's ``send_forward_recv_backward`` and friends), then
waits for that receive only. A send is therefore never held up by a wait, and the ranks
progress exactly as the simulator's dependencies allow: a schedule the simulator runs without
deadlock runs here without deadlock. A send is waited for (and its tensor dropped) as soon as a
message from its peer proves that the peer has posted the receive
(:class:`~minitorch_dist.pipeline.sends.SendLedger`), the rest at the end of the step.

:func:`run_schedule` reads as these steps, a short function each: :func:`_check` (the schedule
fits the stage), then per action :func:`_receive` (post the last sends and this action's
receive), :func:`_forward`, :func:`_backward` or :func:`_backward_weights` (which queue the
action's sends), and at the end :func:`_finish` (the last sends, every wait).

What it returns, per rank: the losses and the actions in the order they ran (``executed``).
Measurements are observers (:mod:`~minitorch_dist.pipeline.record`), told when each action
starts and ends; without ``observers`` the runtime attaches a
:class:`~minitorch_dist.pipeline.record.RunRecorder`, which fills the run's wall-clock
``events``, the chunk-micro-batches alive after each action (``in_flight``) and, with a
:class:`~minitorch_dist.memory.MemoryTracker` (``tracker``), the bytes after each action
(``memory``, ``breakdown``); :func:`~minitorch_dist.pipeline.record.logical_events` replays
the executed lists on the simulator's logical clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from minitorch_dist.models.llama import cross_entropy
from minitorch_dist.pipeline.record import PipelineRun, RunObserver, RunRecorder
from minitorch_dist.pipeline.schedules import Action, Schedule
from minitorch_dist.pipeline.sends import SendLedger
from minitorch_dist.pipeline.stage import Message, PipelineStage

__all__ = ["PipelineRun", "run_schedule"]

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class _Step:
    """What one rank's step carries from action to action."""

    schedule: Schedule
    stage: PipelineStage
    micro_batches: Sequence[Batch]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    activation_shape: Callable[[torch.Tensor], tuple[int, ...]]
    keep_sends: bool
    split: bool  # zero-bubble: B computes the input's gradient only, W the weights'
    ledger: SendLedger  # which sends the peers have surely posted receives for
    dtype: torch.dtype  # of what crosses a boundary: the parameters'
    device: torch.device
    held: dict[tuple[int, int], torch.Tensor | None] = field(default_factory=dict)  # B -> W
    pending: list[Message] = field(default_factory=list)  # the last action's sends
    losses: dict[int, float] = field(default_factory=dict)  # micro-batch -> its loss / m


def run_schedule(
    schedule: Schedule,
    stage: PipelineStage,
    micro_batches: Sequence[Batch],
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = cross_entropy,
    activation_shape: Callable[[torch.Tensor], tuple[int, ...]] | None = None,
    tracker: Any = None,
    keep_sends: bool = False,
    observers: Sequence[RunObserver] | None = None,
) -> PipelineRun:
    """Run ``stage.rank``'s list of ``schedule`` on ``micro_batches`` (every rank gets the same
    list of ``(inputs, targets)``: the first stage reads the inputs, the last the targets, the
    others their shapes). ``activation_shape(inputs)`` gives the shape of what crosses a
    boundary (default: ``(*inputs.shape, hidden)`` with the chunk's ``config.hidden``).
    Gradients accumulate into the chunks' parameters; call ``zero_grad`` before a step.
    ``keep_sends=True`` waits for every send only at the end of the step, as the runtime's
    first version did, so that every sent tensor stays alive until then (for comparison).
    ``observers`` are told when each action starts and ends (default: one
    :class:`~minitorch_dist.pipeline.record.RunRecorder` of ``tracker``; ``[]``: none)."""
    if observers is None:
        observers = [RunRecorder(tracker)]
    elif tracker is not None:
        raise ValueError("give the tracker to an observer (RunRecorder(tracker)), not both")
    _check(schedule, stage, micro_batches)
    if activation_shape is None:
        hidden = stage.chunks[0].config.hidden
        activation_shape = lambda inputs: (*inputs.shape, hidden)  # noqa: E731
    actions = schedule.actions[stage.rank]
    step = _Step(
        schedule,
        stage,
        micro_batches,
        loss_fn,
        activation_shape,
        keep_sends,
        split=any(a.op == "W" for a in actions),
        ledger=SendLedger(schedule),
        dtype=stage.parameters()[0].dtype,
        device=stage.parameters()[0].device,
    )
    run = PipelineRun(stage.rank)
    for action in actions:
        buf = _receive(step, action)  # post the last action's sends and this one's receive
        for observer in observers:
            observer.started(action, stage)
        if action.op == "F":
            _forward(step, action, buf)
        elif action.op == "B":
            _backward(step, action, buf)
        else:
            _backward_weights(step, action)
        # drop the received tensor now: left to the next action's assignment, it would still be
        # alive when that action's receive buffer is allocated and its forward or backward runs
        buf = None
        run.executed.append(action)
        for observer in observers:
            observer.ended(action, stage, run)
    _finish(step)
    run.losses = [step.losses[i] for i in sorted(step.losses)]
    return run


def _check(schedule: Schedule, stage: PipelineStage, micro_batches: Sequence[Batch]) -> None:
    """ValueError unless the schedule, the stage and the micro-batches fit together."""
    m = schedule.micro_batches
    if len(micro_batches) != m:
        raise ValueError(f"{len(micro_batches)} micro-batches given, the schedule has {m}")
    if schedule.layout != "loop":
        raise ValueError(
            f"{schedule.kind!r} places chunks in a V (rank r holds stages r and "
            "2p - 1 - r); the runtime's stages loop through the ranks: simulate it"
        )
    if (schedule.pp, schedule.virtual_stages) != (stage.pp, stage.virtual_stages):
        raise ValueError(
            f"the schedule is for pp={schedule.pp}, v={schedule.virtual_stages}; "
            f"the stage for pp={stage.pp}, v={stage.virtual_stages}"
        )


def _receive(step: _Step, action: Action) -> torch.Tensor | None:
    """Post the last action's sends with the receive this action needs (an F's activation from
    the previous stage, a B's gradient from the next), wait for that receive, and wait for the
    sends the peers have surely posted receives for. Returns the received tensor (or None)."""
    stage, mb, c = step.stage, action.micro_batch, action.chunk
    forward = action.op == "F"
    buf, recvs = None, []
    if (forward and not stage.is_first(c)) or (action.op == "B" and not stage.is_last(c)):
        # allocated just before its receive (not for all m micro-batches up front)
        inputs = step.micro_batches[mb][0]
        buf = torch.empty(step.activation_shape(inputs), dtype=step.dtype, device=step.device)
        peer = stage.prev_rank if forward else stage.next_rank
        kind = "activation" if forward else "gradient"
        recvs = [Message(buf, peer, mb, stage.stage(c), kind)]
    stage.exchange(step.pending, recvs)
    step.pending = []  # the stage holds each send now, until it is waited for
    step.ledger.heard(recvs)
    # the sends the peers have posted receives for: their tensors can go now, sent outputs
    # keep only their gradient edge
    if not step.keep_sends:
        stage.wait_sends(step.ledger.received)
    return buf


def _forward(step: _Step, action: Action, received: torch.Tensor | None) -> None:
    """F: the chunk's forward on the micro-batch (the first stage) or the received activation;
    the last stage keeps the loss, the others queue their output for the next stage."""
    stage, mb, c = step.stage, action.micro_batch, action.chunk
    inputs, targets = step.micro_batches[mb]
    x = inputs.to(step.device) if stage.is_first(c) else received
    out = stage.forward(
        mb,
        c,
        x,
        target=targets.to(step.device),
        loss_fn=step.loss_fn,
        micro_batches=step.schedule.micro_batches,
    )
    if stage.is_last(c):
        step.losses[mb] = out.item()
    else:
        step.pending = [
            Message(out.contiguous(), stage.next_rank, mb, stage.stage(c) + 1, "activation")
        ]


def _backward(step: _Step, action: Action, grad: torch.Tensor | None) -> None:
    """B: the chunk's backward from the received gradient (the last stage: from its loss);
    queue the input's gradient for the previous stage. Zero-bubble schedules leave the weights'
    gradient to W and keep ``grad`` for it."""
    stage, mb, c = step.stage, action.micro_batch, action.chunk
    s = stage.stage(c)
    dx = stage.backward(mb, c, grad, weights=not step.split)
    if dx is None and not stage.is_first(c):
        raise RuntimeError(
            f"stage {s} (rank {stage.rank}): the backward of micro-batch {mb} gave no gradient "
            "for its input, so there is none to send back: the activation received from "
            "the previous stage must be made a leaf that requires grad "
            "(x.detach().requires_grad_()) before the forward, and its .grad returned"
        )
    if step.split:
        step.held[(mb, c)] = grad
    if not stage.is_first(c):
        step.pending = [Message(dx.contiguous(), stage.prev_rank, mb, s - 1, "gradient")]


def _backward_weights(step: _Step, action: Action) -> None:
    """W (zero-bubble): the weights' gradient, from the output gradient B kept."""
    key = (action.micro_batch, action.chunk)
    step.stage.backward_weights(*key, step.held.pop(key))


def _finish(step: _Step) -> None:
    """Post the last action's sends and wait for every send still open."""
    step.stage.exchange(step.pending, [])
    step.pending = []
    step.stage.wait_sends()
