"""When a rank may wait for one of its sends: as soon as the schedule proves the peer is ready.

    ledger = SendLedger(schedule)
    ledger.heard([message])      # a receive from ``message.peer`` has completed
    ledger.received(message)     # True once the peer has surely posted this send's receive

A send's buffer must stay alive until the send is waited for. On gloo a send completes only
once the peer has posted the matching receive, and only when waited for (``is_completed`` stays
False until then). Waiting too early can deadlock: the peer may first need a message that this
rank only sends later. Waiting at the end of the step, as the first version of the runtime did,
keeps every sent activation and gradient of the step alive: ``m`` of them per direction, where
one rank's 1F1B otherwise keeps at most ``p - r`` micro-batches.

The schedule tells exactly when waiting is safe. Rank ``q`` posts the receive of its ``j``-th
action together with the sends of its ``(j - 1)``-th (one ``batch_isend_irecv`` before each
action, see :mod:`~minitorch_dist.pipeline.runtime`). So once a message that ``q`` produced in
its ``l``-th action has arrived here, ``q`` has posted the receives of all its actions up to the
``(l + 1)``-th: every send of ours that one of those actions consumes has been received, or is
being received, and waiting for it returns at once. In 1F1B's steady state that is the very next
message from the peer: rank ``r``'s activation for micro-batch ``i`` is waited for when the
gradient that rank ``r + 1`` sent just before its forward of ``i`` arrives, one action later,
as ``torch.distributed.pipelining.Schedule1F1B`` does. Sends that no later message vouches for
(the last ones of a step) are waited for at its end.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitorch_dist.pipeline.schedules import Schedule
from minitorch_dist.pipeline.stage import Message

__all__ = ["SendLedger"]


class SendLedger:
    """One rank's knowledge, during a step, of how far each peer has posted its receives."""

    def __init__(self, schedule: Schedule) -> None:
        self.pp = schedule.pp
        # position of each (op, micro-batch, chunk) in its rank's list
        self._index = [
            {(a.op, a.micro_batch, a.chunk): i for i, a in enumerate(actions)}
            for actions in schedule.actions
        ]
        self._heard: dict[int, int] = {}  # peer -> latest of its actions whose message arrived

    def _position(self, rank: int, op: str, micro_batch: int, stage: int) -> int:
        return self._index[rank][(op, micro_batch, stage // self.pp)]

    def heard(self, messages: Sequence[Message]) -> None:
        """Receives completed: each message (for our ``message.stage``) came from
        ``message.peer``, made by its forward of the stage before or backward of the one after.
        (Only their places in the schedule are kept, not the messages and their tensors.)"""
        for m in messages:
            forward = m.what == "activation"
            sender = m.stage - 1 if forward else m.stage + 1
            at = self._position(m.peer, "F" if forward else "B", m.micro_batch, sender)
            self._heard[m.peer] = max(self._heard.get(m.peer, -1), at)

    def received(self, message: Message) -> bool:
        """Has ``message.peer`` surely posted the receive of ``message``, one of our sends? It
        is consumed by the peer's forward (an activation) or backward (a gradient) of
        ``message.stage``; the peer posted that receive before the action, together with the
        sends of the action before, so any later message from it proves it."""
        op = "F" if message.what == "activation" else "B"
        needed_by = self._position(message.peer, op, message.micro_batch, message.stage)
        return needed_by <= self._heard.get(message.peer, -2) + 1
