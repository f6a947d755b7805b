"""What every ZeRO stage shares: construction, the step, and what a rank holds.

    opt = ZeroStage2(model.parameters(), torch.optim.AdamW, lr=1e-3)  # same model on every rank
    cross_entropy(model(x), y).backward()  # x: this rank's micro-batch
    opt.step()
    opt.zero_grad()

Each stage is data parallelism: every rank runs its own micro-batch through the whole model, and
the result is that of one process running the optimizer class (``torch.optim.Adam`` by default,
AdamW, SGD...) on the whole batch. The stages differ in which model states a rank keeps whole and which only as its 1/N shard (Rajbhandari et
al. 2020, section 5; bytes per rank for fp32 Adam, N ranks, Psi parameters):

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
itself too; the base class never asks which stage it is. Stages 2 and 3 share their unit-wise
gradient reduction, :class:`~minitorch_dist.zero.stage2.UnitwiseGradients`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._pytree import tree_leaves

from minitorch_dist.zero.groups import (
    check_arguments,
    check_start,
    make_groups,
    make_units,
    take_names,
)
from minitorch_dist.zero.guard import mark
from minitorch_dist.zero.sharding import storage_bytes

__all__ = ["ZeroOptimizer"]


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


class ZeroOptimizer(torch.optim.Optimizer):
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
    (:mod:`~minitorch_dist.zero.sync`; None: neither, to demonstrate the mistake). An optimizer whose update is not elementwise is refused
    (:func:`~minitorch_dist.zero.guard.check_elementwise`). Clip with
    :func:`~minitorch_dist.zero.clip.clip_grad_norm_`; torch's raises on these parameters.

    ``state_dict()`` is the full state, consolidated over the ranks in the format of the same
    optimizer class on one process (a collective: every rank calls it), so it loads on any
    number of ranks; ``local_state_dict()`` is this rank's shard only. torch's step hooks fire
    on the inner optimizer's step, not on this one (memory trackers see what they saw before).
    """

    stage = -1  # set by each subclass
    _cover_groups = True  # param_groups= must hold every trainable parameter of the model
    _check_optimizer = True  # refuse an optimizer whose update is not elementwise

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]] | nn.Module,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        *,
        group: dist.ProcessGroup | None = None,
        units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
        offload: bool = False,
        param_groups: Sequence[dict[str, Any]] | None = None,
        sync_params: bool | None = False,
        **optimizer_kwargs: Any,
    ) -> None:
        check_arguments(optimizer_class, offload, sync_params)
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ZeRO needs an initialised process group: run under launch()")
        self.group, self.offload, self.optimizer_class = group, offload, optimizer_class
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.model, groups = make_groups(params, param_groups, units, self._cover_groups)
        self._param_names = take_names(groups)  # from named_parameters(), for error messages
        # the class checks its own hyper-parameters, before we touch the model
        defaults = optimizer_class(
            [torch.zeros(1, requires_grad=True)], **optimizer_kwargs
        ).defaults
        super().__init__(groups, defaults)
        trainable = [[p for p in g["params"] if p.requires_grad] for g in self.param_groups]
        if not any(trainable):
            raise ValueError("the model has no trainable parameters")
        kinds = {(p.device, p.dtype) for ps in trainable for p in ps}
        if len(kinds) != 1 or not next(iter(kinds))[1].is_floating_point:
            raise ValueError(f"trainable parameters must share one device and float dtype: {kinds}")
        check_start(self, optimizer_class, optimizer_kwargs, sync_params)  # weights, class
        self.units, self._unit_group = make_units(
            self.model,
            self.param_groups,
            self._shards_per_unit(),
            units,
            param_groups is not None,
            self._param_names,
        )
        self._reduced = False  # set by reduce_gradients() (clipping), cleared by step()
        mark([p for u in self.units for p in u.params], self, f"ZeRO stage {self.stage}")
        with torch.no_grad():
            self._setup()
        self._inner_group = sorted(set(self._unit_group))  # the outer group of each inner one
        inner = [
            {
                **self._hyper(g),
                "params": [u.shard for u, ug in zip(self.units, self._unit_group) if ug == g],
            }
            for g in self._inner_group
        ]
        if offload:
            from minitorch_dist.zero.offload import CpuOffloadAdam

            if len(inner) != 1:
                raise ValueError("offload=True takes one param group")
            adam = {k: inner[0][k] for k in ("lr", "betas", "eps", "weight_decay")}
            self.optimizer: Any = CpuOffloadAdam(inner[0]["params"], **adam)
        else:
            self.optimizer = optimizer_class(inner)

    def _hyper(self, g: int) -> dict[str, Any]:
        return {k: v for k, v in self.param_groups[g].items() if k != "params"}

    def _patch_step_function(self) -> None:
        """torch wraps ``step`` to fire the global step hooks; only the inner optimizer does here,
        so a memory tracker files the step's temporaries exactly as it did before."""

    @property
    def inner(self) -> torch.optim.Optimizer:
        """The torch optimizer that updates this rank's shards (CPU masters with offload)."""
        return self.optimizer.optimizer if self.offload else self.optimizer

    def _state_keys(self) -> list[torch.Tensor]:
        """The tensor the inner optimizer keys each unit's state by (its shard, or master)."""
        return self.optimizer.masters if self.offload else [u.shard for u in self.units]

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
            for g, inner in zip(self._inner_group, self.inner.param_groups):
                inner.update(self._hyper(g))  # a scheduler changed the user's groups
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

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if hasattr(self, "optimizer"):  # torch.optim.Optimizer.__init__ adds the first ones
            raise ValueError("ZeRO shards its param groups when built: pass them all at once")
        super().add_param_group(param_group)

    # -- state dicts: full (consolidated over the ranks, any world size) or local ---------------
    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer state, as ``optimizer_class`` on one process would save it (every
        rank calls it: it all-gathers the shards of the states)."""
        from minitorch_dist.zero.state import full_state_dict

        return full_state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a full state (from :meth:`state_dict` on any number of ranks, or from a plain
        ``optimizer_class`` over the same parameters): each rank keeps its shard."""
        from minitorch_dist.zero.state import load_full_state_dict

        load_full_state_dict(self, state_dict)

    def local_state_dict(self) -> dict[str, Any]:
        """This rank's shard of the state only (no communication; the same world size to load)."""
        from minitorch_dist.zero.state import local_state_dict

        return local_state_dict(self)

    def load_local_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load what :meth:`local_state_dict` saved on this rank, with the same world size."""
        from minitorch_dist.zero.state import load_local_state_dict

        load_local_state_dict(self, state_dict)

    # -- what this rank holds ---------------------------------------------------------------
    @property
    def state(self) -> Any:
        """Optimizer state per shard (Adam's m, v, step; ``master`` when offloaded)."""
        optimizer = self.__dict__.get("optimizer")
        return optimizer.state if optimizer is not None else self.__dict__["_outer_state"]

    @state.setter
    def state(self, value: Any) -> None:  # torch.optim.Optimizer.__init__ sets an empty one
        self.__dict__["_outer_state"] = value

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Inside the block every parameter is whole on every rank (ZeRO-3 gathers them)."""
        yield

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """A copy of every trainable parameter, whole, by qualified name."""
        with self.gathered(), torch.no_grad():
            return {
                name: view.clone()
                for u in self.units
                for name, view in zip(u.names, u.views(u.full))
            }

    def state_tensors(self) -> dict[str, list[torch.Tensor]]:
        """The tensors this rank keeps between steps, by category (params, grads, optimizer)."""
        return {
            "params": self._kept_params(),
            "grads": self._kept_grads(),
            "optimizer": _tensors(list(self.state.values())),
        }

    def _kept_params(self) -> list[torch.Tensor]:
        """Parameter buffers kept between steps: each unit's whole flat parameters."""
        return [u.full for u in self.units]

    def _kept_grads(self) -> list[torch.Tensor]:
        """Gradient buffers kept between steps: each unit's whole flat gradient."""
        return [u.flat_grad for u in self.units]

    def offloaded_tensors(self) -> list[torch.Tensor]:
        """The tensors kept in CPU memory by offload (none without it)."""
        return _tensors(list(self.state.values())) if self.offload else []

    def held_bytes(self) -> dict[str, int]:
        """Bytes of what this rank keeps, counted from the storages themselves, with the keys of
        :func:`~minitorch_dist.memory.model_state_bytes`: device ``params``, ``grads``,
        ``optimizer`` and their ``total``, and the ``offloaded`` bytes in CPU memory."""
        held = {k: storage_bytes(v) for k, v in self.state_tensors().items()}
        held["offloaded"] = storage_bytes(self.offloaded_tensors())
        held["optimizer"] -= held["offloaded"]
        held["total"] = held["params"] + held["grads"] + held["optimizer"]
        return held

    def comm_payloads(self) -> dict[str, int]:
        """Full-size bytes of each kind of collective one step issues (the S of the ring
        formulas), summed over units: what :class:`~minitorch_dist.comm.CommCounter` books."""
        raise NotImplementedError

    def _unit_bytes(self) -> int:
        """Bytes of every unit's padded flat buffer together: one collective's S, all units."""
        return sum(u.padded_numel * u.params[0].element_size() for u in self.units)
