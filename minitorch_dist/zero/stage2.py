"""Stage 2 (P_os+g): the gradients are reduce-scattered into shards during the backward pass.

Rajbhandari et al. 2020, section 5.2. After the optimizer step, a rank needs only its shard of
the averaged gradient, so there is no reason to keep the whole gradient. As soon as the backward
pass has produced every gradient of a unit, the unit's gradients are laid into a padded flat
buffer, reduce-scattered (each rank receives the sum of its shard), averaged, added to the
rank's gradient shard, and the whole gradients are freed. Only one unit's whole gradients are
alive at a time; what stays is 4 Psi + (4 + 8) Psi / N bytes in fp32 (2 Psi + 14 Psi / N mixed).

    backward produces unit u's grads   -> flatten (N*S,) -> reduce-scatter -> grad_shard (S,) += / N
    step: Adam on the shards, then all-gather the parameters (as in stage 1)

The collectives are those of stage 1 -- a reduce-scatter and an all-gather per unit and step --
so the bytes are too: 2 Psi (section 7.2.1). DeepSpeed does the same in buckets of
``reduce_bucket_size`` elements; a unit here plays the bucket's part.

To notice that a unit's gradients are complete we hook each parameter's AccumulateGrad node, the
autograd node that writes ``p.grad``: its post-hooks run after ``p.grad`` is final (and after any
``register_post_accumulate_grad_hook`` on the tensor, such as the memory tracker's).

Stage 3 reduces its gradients the same way, so this part lives in :class:`UnitwiseGradients`,
which both stages are built from. Lab 6, task lab06.2, asks for its ``_reduce_unit``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from minitorch_dist.comm import reduce_scatter_tensor
from minitorch_dist.zero.sharding import FlatUnit
from minitorch_dist.zero.stage1 import ZeroStage1

__all__ = ["UnitwiseGradients", "ZeroStage2", "grad_accumulator"]


def grad_accumulator(param: torch.Tensor) -> Any:
    """The AccumulateGrad node of a leaf tensor (keep a reference, or autograd makes a new one)."""
    get_edge = getattr(torch.autograd.graph, "get_gradient_edge", None)
    if get_edge is not None:
        return get_edge(param).node
    return param.view_as(param).grad_fn.next_functions[0][0]  # torch < 2.2


class UnitwiseGradients:
    """What stages 2 and 3 share: each unit's gradients are reduce-scattered into this rank's
    gradient shard during the backward pass, as soon as the last of them is written.

    A stage built on it gives each unit a ``grad_shard`` of S elements (``unit.shard.grad``) and
    calls :meth:`_hook_gradients` on the unit in ``_setup``. The step's ``_reduce_gradients``
    then only reduces the units still waiting (some of whose parameters got no gradient), and
    ``_zero_grad`` zeroes the shards. Stage 3 extends :meth:`_on_grad` to free the unit after.
    """

    units: list[FlatUnit]
    group: Any
    world_size: int
    _accumulators: list
    _handles: list

    def _hook_gradients(self, unit: FlatUnit) -> None:
        """Call :meth:`_on_grad` each time autograd has written one of ``unit``'s gradients."""
        unit.ready = set()  # ids of the unit's parameters whose gradient is complete
        for p in unit.params:
            node = grad_accumulator(p)
            self._accumulators.append(node)
            self._handles.append(node.register_hook(functools.partial(self._on_grad, unit, p)))

    def _on_grad(self, unit: FlatUnit, param: torch.Tensor, *hook_args: Any) -> None:
        """AccumulateGrad post-hook: once the unit's last gradient is written, reduce it."""
        unit.ready.add(id(param))
        if len(unit.ready) == len(unit.params):
            self._reduce_unit(unit)

    @torch.no_grad()
    def _reduce_unit(self, unit: FlatUnit) -> None:
        """Add the rank-averaged gradient of this rank's shard to ``unit.grad_shard`` and free
        the unit's whole gradients (``p.grad = None``). A missing ``p.grad`` counts as zero."""
        # BEGIN SOLUTION lab06.2: flatten the grads, reduce-scatter, average into grad_shard, free them
        flat = unit.grad_shard.new_zeros(unit.padded_numel)  # (N*S,) in the reduce dtype
        for p, view in zip(unit.params, unit.views(flat)):
            if p.grad is not None:
                view.copy_(p.grad)
                p.grad = None  # freed once copied: one unit's gradient is never alive twice
        summed = torch.empty_like(unit.grad_shard)  # (S,)
        reduce_scatter_tensor(summed, flat, group=self.group)  # rank r: chunk r summed over ranks
        unit.grad_shard.add_(summed.div_(self.world_size))  # += : micro-batches accumulate
        # END SOLUTION
        unit.ready.clear()

    def _reduce_gradients(self) -> None:
        for u in self.units:
            if u.ready:
                self._reduce_unit(u)

    def _zero_grad(self, set_to_none: bool) -> None:
        for u in self.units:  # whole gradients are never kept: p.grad is None either way
            u.grad_shard.zero_()
            for p in u.params:
                p.grad = None

    def _kept_grads(self) -> list[torch.Tensor]:
        """Only the gradient shards stay between steps."""
        return [u.grad_shard for u in self.units]


class ZeroStage2(UnitwiseGradients, ZeroStage1):
    """ZeRO stage 2: optimizer states and gradients sharded; parameters whole (gathered after
    the step as in stage 1)."""

    stage = 2

    def _setup(self) -> None:
        self._accumulators, self._handles = [], []
        for u in self.units:
            u.full = u.flatten([p.detach() for p in u.params])  # (N*S,)
            u.view_params_on(u.full)
            lo, hi = u.shard_range(self.rank)
            u.shard = nn.Parameter(u.full[lo:hi])  # a view, as in stage 1
            u.grad_shard = u.full.new_zeros(u.shard_numel)  # (S,): all the gradient kept
            u.shard.grad = u.grad_shard
            self._hook_gradients(u)
