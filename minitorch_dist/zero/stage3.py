"""Stage 3 (P_os+g+p): parameters too are sharded, and gathered only while a unit computes.

Rajbhandari et al. 2020, section 5.3. Between uses a rank keeps only its shard of each unit's
parameters, gradients and optimizer states: 16 Psi / N bytes. The whole parameters of a unit exist
only while it runs, in its flat buffer ``full``, whose storage is allocated for the all-gather and
released right after with ``full.untyped_storage().resize_(0)`` (the model's parameters stay views
of it, so nothing else changes):

    forward,  unit u:  pre-hook   all-gather full (N*S,) from the shards (S,); prefetch unit u+1
                       post-hook  free full; hook u's outputs so that backward calls pre-backward
    backward, unit u:  pre-backward  all-gather full again; prefetch unit u-1
                       once u's grads are written: reduce-scatter them into grad_shard, free
                       grads and full (UnitwiseGradients._reduce_unit, shared with stage 2)
    step:              Adam on the shards; nothing to gather (the next forward does it)

Per unit and step: two all-gathers and one reduce-scatter of the unit, 3 Psi in all, 1.5 times
data parallelism (section 7.2.2). That is one resharding policy, FSDP2's default; with
``reshard_after_forward=False`` (FSDP2's name) the post-hook keeps ``full`` and backward's
gather finds it there: one all-gather per unit and micro-batch, 2 Psi, at the cost of every
unit's whole parameters held from its forward to its backward.

To hide the gathers, the next unit's all-gather is started before the current unit computes
(``prefetch``): a gather of 4 S_u N bytes takes as long as it takes, while the unit's compute
grows with the micro-batch, so small micro-batches leave the gathers exposed.
PyTorch FSDP does the same per wrapped module (Zhao et al. 2023, section 3).

Prefetching follows the order the units ran in during the previous forward pass (at the first,
the order of ``units``); a wrong guess costs only memory, never correctness. A forward pass
repeated inside backward (activation checkpointing) keeps the unit gathered until its gradients
are reduced. Lab 6, task lab06.3, asks for ``_gather``, ``_free`` and the four hooks.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from minitorch_dist.checks import check_bool
from minitorch_dist.comm import all_gather_into_tensor
from minitorch_dist.zero.base import ZeroOptimizer
from minitorch_dist.zero.compat import WholeModelStateDict
from minitorch_dist.zero.sharding import FlatUnit
from minitorch_dist.zero.stage2 import UnitwiseGradients

__all__ = ["ZeroStage3"]

FREE, GATHERING, GATHERED = "free", "gathering", "gathered"  # states of a unit's full buffer


class ZeroStage3(UnitwiseGradients, WholeModelStateDict, ZeroOptimizer):
    """ZeRO stage 3: parameters, gradients and optimizer states all sharded; ``prefetch=True``
    starts the next unit's all-gather before the current unit computes;
    ``reshard_after_forward=False`` keeps each unit gathered from its forward until its
    gradients are reduced (no second all-gather in backward; FSDP2's keyword).

    Between steps the model's parameters are views of empty buffers: read them (to save a
    checkpoint, to compare) inside ``with opt.gathered():``, or with ``opt.full_parameters()``;
    the model's ``state_dict()`` and ``load_state_dict()`` gather too (a load keeps this rank's
    shard of what it wrote). All are collectives, called by every rank."""

    stage = 3

    def __init__(
        self,
        model: nn.Module,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        *,
        prefetch: bool = True,
        reshard_after_forward: bool = True,
        **kwargs: Any,
    ) -> None:
        self.prefetch = check_bool("prefetch", prefetch)
        self.reshard_after_forward = check_bool("reshard_after_forward", reshard_after_forward)
        if not isinstance(model, nn.Module):
            raise ValueError("ZeRO-3's hooks gather a module's parameters: pass the model")
        super().__init__(model, optimizer_class, **kwargs)

    def _setup(self) -> None:
        self._accumulators, self._handles = [], []
        self._in_backward = False
        self._seen: list[FlatUnit] = []  # units in the order this forward pass ran them
        for u in self.units:
            u.full = u.flatten([p.detach() for p in u.params])  # (N*S,)
            u.view_params_on(u.full)
            lo, hi = u.shard_range(self.rank)
            u.shard = nn.Parameter(u.full[lo:hi].clone())  # (S,): its own memory, kept
            u.grad_shard = u.full.new_zeros(u.shard_numel)  # (S,)
            u.shard.grad = u.grad_shard
            u.work, u.state = None, GATHERED
            self._hook_gradients(u)  # reduce-scatter the unit's grads once written, as stage 2
            self._free(u)  # (after the hooks: on fake tensors, finding the node regrows storage)
            if u.module is not self.model:
                self._handles += [
                    u.module.register_forward_pre_hook(functools.partial(self._pre_forward, u)),
                    u.module.register_forward_hook(functools.partial(self._post_forward, u)),
                ]
        self._order = [u for u in self.units if u.module is not self.model]
        self._roots = [u for u in self.units if u.module is self.model]  # one per param group
        self._handles += [
            self.model.register_forward_pre_hook(self._model_pre_forward),
            self.model.register_forward_hook(self._model_post_forward),
        ]
        if self._whole_state_dict:  # the model's state_dict() gathers (compat)
            self._handles += self._hook_model_state_dict()

    # -- gathering and freeing the whole parameters of a unit --------------------------------
    def _gather(self, unit: FlatUnit, wait: bool = True) -> None:
        """Make ``unit.full`` hold the whole parameters: allocate its storage and start an
        all-gather of the shards (asynchronous); with ``wait``, also wait for it. Idempotent."""
        # BEGIN SOLUTION lab06.3: allocate full, all-gather the shards into it (async); wait if asked
        if unit.state == FREE:
            unit.full.untyped_storage().resize_(unit.padded_numel * unit.full.element_size())
            unit.work = all_gather_into_tensor(
                unit.full, unit.shard.detach(), group=self.group, async_op=True
            )  # (S,) per rank -> (N*S,)
            unit.state = GATHERING
        if wait and unit.state == GATHERING:
            unit.work.wait()
            unit.work, unit.state = None, GATHERED
        # END SOLUTION

    def _free(self, unit: FlatUnit) -> None:
        """Release the memory of ``unit.full`` (after any gather in flight has landed)."""
        # BEGIN SOLUTION lab06.3: wait for a gather in flight, then resize full's storage to 0
        if unit.state == GATHERING:
            unit.work.wait()
            unit.work = None
        unit.full.untyped_storage().resize_(0)
        unit.state = FREE
        # END SOLUTION

    def _neighbour(self, unit: FlatUnit, step: int) -> FlatUnit | None:
        """The unit that ran ``step`` places after ``unit`` in the last forward pass."""
        if unit not in self._order:
            return None
        i = self._order.index(unit) + step
        return self._order[i] if 0 <= i < len(self._order) else None

    # -- the hooks ---------------------------------------------------------------------------
    def _pre_forward(self, unit: FlatUnit, module: nn.Module, args: Any) -> None:
        """Forward pre-hook of ``unit``'s module: gather the unit (waiting for it), then start
        gathering the unit that ran after it in the last forward pass (``prefetch``)."""
        if not self._in_backward:
            self._seen.append(unit)
        # BEGIN SOLUTION lab06.3: gather this unit (wait), then start gathering the next one
        self._gather(unit)
        nxt = self._neighbour(unit, +1)
        if self.prefetch and nxt is not None and not self._in_backward:
            self._gather(nxt, wait=False)
        # END SOLUTION

    def _post_forward(self, unit: FlatUnit, module: nn.Module, args: Any, output: Any) -> None:
        """Forward hook: free the unit, and register ``_pre_backward`` on the outputs that
        require grad (``torch.autograd.graph.register_multi_grad_hook`` with ``mode="any"``
        calls it once, when the first of their gradients is computed)."""
        if self._in_backward:  # recomputed inside backward: its backward comes right after
            return
        # BEGIN SOLUTION lab06.3: free the unit; make backward call _pre_backward before its grads
        if self.reshard_after_forward or not torch.is_grad_enabled():
            self._free(unit)  # else kept for backward, whose gather then finds it gathered
        outs = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.requires_grad]
        if outs and torch.is_grad_enabled():
            hook = functools.partial(self._pre_backward, unit)
            torch.autograd.graph.register_multi_grad_hook(outs, hook, mode="any")
        # END SOLUTION

    def _pre_backward(self, unit: FlatUnit, grads: Any = None) -> None:
        """Before the unit's backward: gather it again (waiting), then start gathering the unit
        that ran before it in the forward pass (``prefetch``)."""
        if not self._in_backward:  # the first unit of this backward pass
            self._in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        # BEGIN SOLUTION lab06.3: gather this unit again (wait), start gathering the one before it
        self._gather(unit)
        previous = self._neighbour(unit, -1)
        if self.prefetch and previous is not None:
            self._gather(previous, wait=False)
        # END SOLUTION

    def _on_grad(self, unit: FlatUnit, param: torch.Tensor, *hook_args: Any) -> None:
        """A gradient of ``unit`` is written; after the last: reduce-scatter, then free."""
        super()._on_grad(unit, param, *hook_args)
        if not unit.ready:  # _reduce_unit ran: the whole parameters are not needed any more
            self._free(unit)

    def _end_backward(self) -> None:
        """Autograd's final callback: reduce units some of whose grads never came; free all."""
        for u in self.units:
            if u.ready:
                self._reduce_unit(u)
            self._free(u)
        self._in_backward = False

    def _model_pre_forward(self, module: nn.Module, args: Any) -> None:
        if not self._in_backward:
            self._seen = []
        for root in self._roots:
            self._pre_forward(root, module, args)

    def _model_post_forward(self, module: nn.Module, args: Any, output: Any) -> None:
        if not self._in_backward and self._seen:
            self._order = [u for u in self._seen if u not in self._roots]
        for root in self._roots:
            self._post_forward(root, module, args, output)

    # -- what this rank holds and sends ------------------------------------------------------
    def _kept_params(self) -> list[torch.Tensor]:
        """The shards; the whole flat buffers are kept too, but empty between uses."""
        return [u.full for u in self.units] + [u.shard for u in self.units]

    def comm_payloads(self) -> dict[str, int]:
        """A reduce-scatter of every unit and two all-gathers (forward and backward; one
        with ``reshard_after_forward=False``)."""
        gathers = 2 if self.reshard_after_forward else 1
        return {"reduce_scatter": self._unit_bytes(), "all_gather": gathers * self._unit_bytes()}

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        for u in self.units:
            self._gather(u)
        try:
            yield
        finally:
            for u in self.units:
                self._free(u)
