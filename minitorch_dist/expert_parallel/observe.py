"""What an expert-parallel layer's dispatch sent, watched from outside the layer (chapter 10,
lab 10): the split sizes of its all-to-all, per rank. The layer computes; this module, which
:mod:`minitorch_dist.expert_parallel.measure` uses (and re-exports), observes.

    seen = observe_dispatch(layer)       # hooks on the layer's forward and on dispatch()
    layer(x)
    seen.send_splits, seen.recv_splits   # rows sent to / received from each rank
    seen.remove()
"""

from __future__ import annotations

import torch

from minitorch_dist.comm.groups import Group
from minitorch_dist.expert_parallel.dispatch import register_dispatch_hook
from minitorch_dist.expert_parallel.layer import ExpertParallelMoE

__all__ = ["DispatchObserver", "observe_dispatch"]


class DispatchObserver:
    """The split sizes of an :class:`ExpertParallelMoE`'s last dispatch, watched from outside:
    forward hooks on the layer mark its forward, a dispatch hook
    (:func:`~minitorch_dist.expert_parallel.dispatch.register_dispatch_hook`) records the splits
    of the dispatch it runs. ``send_splits[j]``: rows sent to rank j; ``recv_splits[j]``: rows
    received from it (empty before a forward). :meth:`remove` detaches it."""

    def __init__(self, layer: ExpertParallelMoE) -> None:
        self.layer = layer
        self.send_splits: list[int] = []
        self.recv_splits: list[int] = []
        self._inside = False
        self._handles = [
            layer.register_forward_pre_hook(lambda *_: self._mark(True)),
            layer.register_forward_hook(lambda *_: self._mark(False)),
            register_dispatch_hook(self._record),
        ]

    def _mark(self, inside: bool) -> None:
        self._inside = inside

    def _record(self, send: list[int], recv: list[int], group: Group) -> None:
        if self._inside:  # another layer's dispatch is not ours
            self.send_splits, self.recv_splits = send, recv

    @property
    def tokens_per_expert(self) -> torch.Tensor | None:
        """(E,) this rank's choices per expert in the layer's last forward."""
        return self.layer.last_tokens_per_expert

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def observe_dispatch(layer: ExpertParallelMoE) -> DispatchObserver:
    """Attach a :class:`DispatchObserver` to ``layer`` (call ``.remove()`` to detach it)."""
    if not isinstance(layer, ExpertParallelMoE):
        raise ValueError(f"observe_dispatch needs an ExpertParallelMoE, got {type(layer).__name__}")
    return DispatchObserver(layer)
