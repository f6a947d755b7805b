"""What makes a ZeRO stage a ``torch.optim.Optimizer``: param groups, hyper-parameters, state dicts.

The idea of a stage is in its own file and in :mod:`~minitorch_dist.zero.base`'s step. This
module is the plumbing around it that lets a ZeRO object stand where a torch optimizer stands
(a learning-rate scheduler, a checkpoint, ``torch.optim``'s param groups), as torch's
``ZeroRedundancyOptimizer`` does:

- the user's ``param_groups`` (and their hyper-parameters, which a scheduler changes) stay on
  this object; the *inner* optimizer, ``optimizer_class`` over this rank's shards, gets a copy
  of them before every step (:meth:`OptimizerCompat._copy_hyper_parameters`);
- ``state_dict()`` is the full state, consolidated over the ranks in the format of the same
  optimizer class on one process (a collective), ``local_state_dict()`` this rank's shard only
  (:mod:`~minitorch_dist.zero.state`);
- ``state`` is the inner optimizer's, keyed by shard (Adam's m, v, step; ``master`` when
  offloaded);
- ZeRO-3's model, whose parameters are views of freed buffers between steps, still saves and
  loads whole parameters with its own ``state_dict()`` (:class:`WholeModelStateDict`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from minitorch_dist.zero.groups import check_start, make_groups, make_units, take_names

__all__ = ["OptimizerCompat", "WholeModelStateDict"]


class OptimizerCompat(torch.optim.Optimizer):
    """The ``torch.optim.Optimizer`` side of a ZeRO stage (see the module docstring)."""

    _cover_groups = True  # param_groups= must hold every trainable parameter of the model
    _check_optimizer = True  # refuse an optimizer whose update is not elementwise
    group: Any
    offload: bool
    units: list
    _unit_group: list[int]

    def _take_groups(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]] | nn.Module,
        optimizer_class: type[torch.optim.Optimizer],
        param_groups: Sequence[dict[str, Any]] | None,
        units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None,
        sync_params: bool | None,
        optimizer_kwargs: dict[str, Any],
        shards: int,
    ) -> None:
        """Set ``model``, ``param_groups`` (torch's, the user's) and ``units`` (each flat buffer,
        with its param group in ``_unit_group``), after checking the parameters."""
        self.optimizer_class = optimizer_class
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
            shards,
            units,
            param_groups is not None,
            self._param_names,
        )

    def _make_inner(self) -> Any:
        """The optimizer over this rank's shards: one inner group per user group that has
        units (``CpuOffloadAdam`` with ``offload``)."""
        self._inner_group = sorted(set(self._unit_group))  # the outer group of each inner one
        inner = [
            {
                **self._hyper(g),
                "params": [u.shard for u, ug in zip(self.units, self._unit_group) if ug == g],
            }
            for g in self._inner_group
        ]
        if not self.offload:
            return self.optimizer_class(inner)
        from minitorch_dist.zero.offload import CpuOffloadAdam

        if len(inner) != 1:
            raise ValueError("offload=True takes one param group")
        adam = {k: inner[0][k] for k in ("lr", "betas", "eps", "weight_decay")}
        return CpuOffloadAdam(inner[0]["params"], **adam)

    def _hyper(self, g: int) -> dict[str, Any]:
        return {k: v for k, v in self.param_groups[g].items() if k != "params"}

    def _copy_hyper_parameters(self) -> None:
        """Give the inner groups the user's current hyper-parameters (a scheduler's ``lr``)."""
        for g, inner in zip(self._inner_group, self.inner.param_groups):
            inner.update(self._hyper(g))

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

    @property
    def state(self) -> Any:
        """Optimizer state per shard (Adam's m, v, step; ``master`` when offloaded)."""
        optimizer = self.__dict__.get("optimizer")
        return optimizer.state if optimizer is not None else self.__dict__["_outer_state"]

    @state.setter
    def state(self, value: Any) -> None:  # torch.optim.Optimizer.__init__ sets an empty one
        self.__dict__["_outer_state"] = value


class WholeModelStateDict:
    """ZeRO-3's model keeps views of freed buffers between steps: its ``state_dict()`` and
    ``load_state_dict()`` gather every unit first (collectives, as FSDP's full state dict) and
    free them after; a load keeps this rank's shard of what it wrote. Needs the stage's
    ``_gather`` and ``_free``."""

    _whole_state_dict = True  # the model's state_dict() gathers (apply_zero3 saves its pieces)
    model: nn.Module
    units: list
    rank: int
    _gather: Any  # the stage's: gather a unit's whole parameters, free them
    _free: Any

    def _hook_model_state_dict(self) -> list[Any]:
        """Register the four hooks on the model; returns their handles."""
        return [
            self.model.register_state_dict_pre_hook(self._gather_all),
            # torch marks the hook with an attribute, which a bound method cannot take
            self.model.register_state_dict_post_hook(functools.partial(self._copy_out)),
            self.model.register_load_state_dict_pre_hook(self._gather_all),
            self.model.register_load_state_dict_post_hook(self._keep_loaded),
        ]

    def _gather_all(self, *hook_args: Any) -> None:
        for u in self.units:
            self._gather(u)

    def _copy_out(self, module: nn.Module, state: dict, *hook_args: Any) -> None:
        """The gathered parameters copied out of the buffers that are freed next."""
        fulls = {u.full.untyped_storage().data_ptr() for u in self.units}
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() in fulls:
                state[k] = v.detach().clone()
        for u in self.units:
            self._free(u)

    @torch.no_grad()
    def _keep_loaded(self, module: nn.Module, incompatible: Any) -> None:
        """What load_state_dict wrote into the whole parameters becomes this rank's shard."""
        for u in self.units:
            lo, hi = u.shard_range(self.rank)
            u.shard.copy_(u.full[lo:hi])
            self._free(u)
