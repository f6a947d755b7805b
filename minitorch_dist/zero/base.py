"""What every ZeRO stage shares: construction, the step, and what a rank holds.

    opt = ZeroStage2(model.parameters(), torch.optim.AdamW, lr=1e-3)  # same model on every rank
    cross_entropy(model(x), y).backward()  # x: this rank's micro-batch
    opt.step()
    opt.zero_grad()

Each stage is data parallelism: every rank runs its own micro-batch through the whole model, and
the result is that of one process running the optimizer class (``torch.optim.Adam`` by
default, AdamW, SGD...) on the whole batch. The stages differ in which model states a rank
keeps whole and which only as its 1/N shard (Rajbhandari et al. 2020, section 5; bytes per
rank for fp32 Adam, N ranks, Psi parameters):

    stage  parameters  gradients  Adam's m, v   bytes per rank
    0      whole       whole      whole         4 Psi + 4 Psi + 8 Psi       (plain data parallel)
    1      whole       whole      shard         4 Psi + 4 Psi + 8 Psi / N   (P_os)
    2      whole       shard      shard         4 Psi + 12 Psi / N          (P_os+g)
    3      shard       shard      shard         16 Psi / N                  (P_os+g+p)

A step is three moves, which each stage fills in: ``_reduce_gradients`` (average the gradients
over the ranks, keeping what this rank needs), ``optimizer.step()`` (torch's own optimizer, run on
this rank's shards only, so the arithmetic is exactly that of the single-process reference), and
``_gather_parameters`` (give every rank the updated parameters it keeps). With ``offload=True``
the middle move runs on the CPU (:mod:`minitorch_dist.zero.offload`, ZeRO-Offload). What a stage
keeps between steps (``_kept_params``, ``_kept_grads``) and sends (``comm_payloads``) it says
itself too (:mod:`~minitorch_dist.zero.holdings` adds them up); the base class never asks which
stage it is. Stages 2 and 3 share their unit-wise gradient reduction,
:class:`~minitorch_dist.zero.stage2.UnitwiseGradients`. What makes the object a
``torch.optim.Optimizer`` (param groups, a scheduler's ``lr``, state dicts) is
:mod:`~minitorch_dist.zero.compat`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.comm.groups import Group
from minitorch_dist.zero.compat import OptimizerCompat
from minitorch_dist.zero.groups import check_arguments
from minitorch_dist.zero.guard import mark
from minitorch_dist.zero.holdings import Holdings

__all__ = ["ZeroOptimizer"]


class ZeroOptimizer(Holdings, OptimizerCompat):
    """A ``torch.optim`` optimizer over data-parallel ranks with ZeRO stage :attr:`stage` (see
    the module docstring), shaped like torch's ``ZeroRedundancyOptimizer``:

        opt = ZeroStage1(model.parameters(), torch.optim.AdamW, lr=1e-3, weight_decay=0.1)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 / (1 + step))

    ``params`` is what torch's optimizers take (tensors, or dicts of param groups, identical on
    every rank of ``group``, WORLD when None) or a module (its trainable parameters, one group).
    ``optimizer_class`` (any ``torch.optim.Optimizer`` whose states are elementwise: SGD, Adam,
    AdamW, ...) runs with ``optimizer_kwargs`` on this rank's shards only; ``param_groups`` are
    the user's, and their hyper-parameters (a scheduler's ``lr``) are copied to the shards'
    groups before every step. Trainable parameters share one device and one floating dtype;
    frozen ones (``requires_grad=False``) are left alone.

    Units (parameters flattened and communicated together): with a module, every top-level
    block, or ``units`` (modules, or a function of the model returning them), cut by group when
    ``param_groups`` (torch's list of dicts over the model's parameters) is given; with
    parameters, one unit per param group (:mod:`~minitorch_dist.zero.groups`). ``offload=True``
    keeps the optimizer states, an fp32 master copy of this rank's shard and the update in CPU
    memory (ZeRO-Offload, Ren et al. 2021; ``torch.optim.Adam`` and one param group only).
    Every rank must start from the same parameters: they are checked (a ``ValueError`` names
    the first that differs), or rank 0's are broadcast with ``sync_params=True``
    (:mod:`~minitorch_dist.zero.sync`; None: neither, to demonstrate the mistake). An optimizer
    whose update is not elementwise is refused (:func:`~minitorch_dist.zero.guard.
    check_elementwise`). Clip with :func:`~minitorch_dist.zero.clip.clip_grad_norm_`: building
    a ZeRO object makes torch's raise on its parameters (:mod:`~minitorch_dist.zero.guard`).

    ``state_dict()`` is the full state, consolidated over the ranks in the format of the same
    optimizer class on one process (a collective: every rank calls it), so it loads on any
    number of ranks; ``local_state_dict()`` is this rank's shard only. torch's step hooks fire
    on the inner optimizer's step, not on this one (memory trackers see what they saw before).
    """

    stage = -1  # set by each subclass

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]] | nn.Module,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        *,
        group: Group = None,
        units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
        offload: bool = False,
        param_groups: Sequence[dict[str, Any]] | None = None,
        sync_params: bool | None = False,
        **optimizer_kwargs: Any,
    ) -> None:
        check_arguments(optimizer_class, offload, sync_params)
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ZeRO needs an initialised process group: run under launch()")
        self.group, self.offload = group, offload
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        # torch.optim's side (compat): param groups, the same weights on every rank, the units
        self._take_groups(
            params,
            optimizer_class,
            param_groups,
            units,
            sync_params,
            optimizer_kwargs,
            self._shards_per_unit(),
        )
        self._reduced = False  # set by reduce_gradients() (clipping), cleared by step()
        # from here on torch's clip_grad_norm_ refuses these parameters (guard)
        mark([p for u in self.units for p in u.params], self, f"ZeRO stage {self.stage}")
        with torch.no_grad():
            self._setup()  # the stage: flat buffers, shards, hooks
        self.optimizer: Any = self._make_inner()  # optimizer_class over this rank's shards

    # -- the three moves of a step; subclasses fill them in --------------------------------
    def _shards_per_unit(self) -> int:
        """Equal shards each flat buffer is padded to: one per rank (stage 0: 1, no padding)."""
        return self.world_size

    def _setup(self) -> None:
        """Flatten each unit, point the parameters into it, make ``unit.shard`` (and its grad)."""
        raise NotImplementedError

    def _reduce_gradients(self) -> None:
        """Leave in ``unit.shard.grad`` the gradient averaged over the ranks, for every unit."""
        raise NotImplementedError

    def _gather_parameters(self) -> None:
        """After the update: give this rank the parameters it keeps (nothing at stages 0, 3)."""

    def _zero_grad(self, set_to_none: bool) -> None:
        """Zero each unit's whole flat gradient (stages 0 and 1 keep one; stages 2 and 3 keep
        only shards and override this)."""
        for u in self.units:
            u.flat_grad.zero_()
            if set_to_none:  # the next backward writes new grads; the step copies them in
                for p in u.params:
                    p.grad = None
            else:
                u.collect_grads()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Average the gradients over the ranks, run the optimizer on this rank's shards (with
        the current hyper-parameters of ``param_groups``), share them. Returns ``closure()``."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            if not self._reduced:
                self._reduce_gradients()
            self._reduced = False
            self._copy_hyper_parameters()  # a scheduler changed the user's groups
            self.optimizer.step()
            self._gather_parameters()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradients this rank keeps; ``p.grad`` becomes None (``set_to_none``, torch's
        default) or zeros. The flat gradient buffers stay allocated, as ZeRO's do."""
        with torch.no_grad():
            self._zero_grad(set_to_none)
        self._reduced = False

    def reduce_gradients(self) -> None:
        """Average the gradients over the ranks now (a collective), rather than in ``step()``,
        which then does not again: :func:`~minitorch_dist.zero.clip.clip_grad_norm_` needs the
        averaged shards. Call it after the last backward of a step."""
        if not self._reduced:
            with torch.no_grad():
                self._reduce_gradients()
            self._reduced = True

    def _grad_shards(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """After :meth:`reduce_gradients`: the averaged gradient this rank holds, as (pieces
        disjoint across the ranks, pieces every rank holds alike); stage 0 holds all alike."""
        return [u.shard.grad for u in self.units], []
