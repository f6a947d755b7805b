"""ZeRO-3 as a module transform, in the spirit of PyTorch FSDP2's ``fully_shard``.

    model = apply_zero3(model, mp_policy=MixedPrecision(param_dtype=torch.bfloat16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)   # any optimizer, on the local shards
    loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()
    model.gather_full_params()                              # inspect (a collective)

The machinery is stage 3's (:class:`~minitorch_dist.zero.stage3.ZeroStage3`: units flattened
and sharded, gathered before each unit computes and freed after, gradients reduce-scattered as
soon as a unit's are written), so memory and communication are exactly chapter 6's. What
changes is who owns the update: each unit's shard of S elements becomes an ``nn.Parameter`` of
the unit's module (``zero3_shard``), and the model's original parameters stop being parameters
(they stay attributes, views of the gathered buffer that exist only while a unit computes).
``model.parameters()`` then yields the shards (and any frozen parameters), so any ``torch.optim``
optimizer updates exactly this rank's 1/N of the model. FSDP2 shards each parameter along its
first dimension (Zhao et al. 2023 describe FSDP1's flat parameters, which we keep); here a
parameter's shard is the part of its flattened values that falls into this rank's range
(:meth:`Zero3Module.local_grad_shards`).

Mixed precision (``MixedPrecision``, FSDP2's ``MixedPrecisionPolicy``): the shards, the optimizer
and the gradient shards stay in fp32; before each forward the shards are cast to ``param_dtype``
and gathered in it, each unit's floating inputs are cast to it, and the gradients (computed in
``param_dtype``) are reduce-scattered in ``reduce_dtype``, fp32 by default, so that the sum over
the ranks does not round (Micikevicius et al. 2018, section 3.1, keep an fp32 master copy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._pytree import tree_map

from minitorch_dist.comm import all_gather_into_tensor
from minitorch_dist.zero.sharding import FlatUnit
from minitorch_dist.zero.stage3 import ZeroStage3

__all__ = ["MixedPrecision", "Zero3Module", "apply_zero3"]

SHARD = "zero3_shard"  # the name of each unit's shard among its module's parameters


@dataclass(frozen=True)
class MixedPrecision:
    """Dtypes of a ZeRO-3 model (torch's ``MixedPrecisionPolicy``): ``param_dtype`` for the
    gathered parameters and the compute (None: the parameters' own), ``reduce_dtype`` for the
    gradient reduce-scatter and the gradient shards (None: the parameters' own)."""

    param_dtype: torch.dtype | None = None  # e.g. torch.bfloat16
    reduce_dtype: torch.dtype | None = torch.float32


class _Engine(ZeroStage3):
    """Stage 3's hooks; the update belongs to the user's optimizer (this one never steps)."""

    def _on_grad(self, unit: FlatUnit, param: torch.Tensor, *hook_args: Any) -> None:
        if unit.master.grad is None:  # the user's zero_grad() set it to None: start at zero
            unit.grad_shard.zero_()
            unit.master.grad = unit.grad_shard
        super()._on_grad(unit, param, *hook_args)


class Zero3Module:
    """Mixed into the class of a model :func:`apply_zero3` transformed (as FSDP2's
    ``FSDPModule``). Every method is a collective unless it says otherwise."""

    zero3: _Engine

    def _gather(self, unit: FlatUnit, shard: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's (S,) piece of one unit-wide tensor, gathered and cut per parameter."""
        flat = shard.detach().new_empty(unit.padded_numel)
        all_gather_into_tensor(flat, shard.detach().contiguous(), group=self.zero3.group)
        return [view.clone() for view in unit.views(flat)]  # (N*S,) cut into the parameters

    def _gather_flat(self, pick: Callable[[FlatUnit], torch.Tensor]) -> dict[str, torch.Tensor]:
        return {n: t for u in self.zero3.units for n, t in zip(u.names, self._gather(u, pick(u)))}

    def zero3_state_dict(self, optimizer: Any = None) -> tuple[dict, dict | None]:
        """The model's state with every sharded parameter whole under its original name (frozen
        parameters and buffers as they are), and ``optimizer``'s state (an optimizer over
        ``self.parameters()``) whole per original name: what loads on any number of ranks."""
        model = {k: v for k, v in self.state_dict().items() if not k.endswith(SHARD)}
        model.update(self.gather_full_params())
        if optimizer is None:
            return model, None
        state: dict[str, dict[str, Any]] = {}
        for u in self.zero3.units:
            for key, value in optimizer.state.get(u.master, {}).items():
                elementwise = isinstance(value, torch.Tensor) and key != "step"
                pieces = self._gather(u, value) if elementwise else [value] * len(u.names)
                for name, piece in zip(u.names, pieces):
                    state.setdefault(name, {})[key] = piece
        return model, {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}

    @torch.no_grad()
    def load_zero3_state_dict(self, model: dict, optim: dict | None = None,
                              optimizer: Any = None) -> None:  # fmt: skip
        """Load what :meth:`zero3_state_dict` returned (on any number of ranks): each rank
        keeps its shard. No communication."""
        engine, names = self.zero3, set()
        index = {}
        if optimizer is not None:
            params = [p for g in optimizer.param_groups for p in g["params"]]
            index = {id(p): i for i, p in enumerate(params)}
        state = {}
        for u in engine.units:
            lo, hi = u.shard_range(engine.rank)
            u.master.copy_(_shard_of(u, [model[n] for n in u.names], lo, hi))
            names.update(u.names)
            per = [optim["state"].get(n, {}) for n in u.names] if optim else []
            first = next((s for s in per if s), None)
            if first is not None:
                state[index[id(u.master)]] = {
                    k: _shard_of(u, [s.get(k) for s in per], lo, hi)
                    if isinstance(v, torch.Tensor) and k != "step" else v
                    for k, v in first.items()
                }  # fmt: skip
        self.load_state_dict({k: v for k, v in model.items() if k not in names}, strict=False)
        if optimizer is not None and optim is not None:
            optimizer.load_state_dict({"state": state, "param_groups": optim["param_groups"]})

    def gather_full_params(self) -> dict[str, torch.Tensor]:
        """Every trainable parameter, whole, by its original name (from the fp32 shards)."""
        return self._gather_flat(lambda u: u.master)

    def gather_full_grads(self) -> dict[str, torch.Tensor]:
        """Every trainable parameter's gradient, whole, averaged over the ranks (after
        backward; zeros where none was computed yet)."""
        return self._gather_flat(lambda u: u.grad_shard)

    def local_grad_shards(self) -> dict[str, tuple[torch.Tensor, tuple[int, int]]]:
        """This rank's part of each parameter's gradient, no communication: by name, the 1-D
        tensor of flattened elements ``[start, stop)`` of that parameter this rank holds
        (parameters with no element in this rank's range are left out)."""
        out = {}
        for u in self.zero3.units:
            lo, hi = u.shard_range(self.zero3.rank)
            for name, offset, n in zip(u.names, u.offsets, u.numels):
                a, b = max(offset, lo), min(offset + n, hi)
                if a < b:
                    out[name] = (u.grad_shard[a - lo : b - lo], (a - offset, b - offset))
        return out


def _shard_of(unit: FlatUnit, whole: list, lo: int, hi: int) -> torch.Tensor:
    """This rank's (S,) piece of per-parameter tensors laid end to end (None: zeros)."""
    ref = next(t for t in whole if t is not None)
    flat = torch.zeros(unit.padded_numel, dtype=ref.dtype, device=ref.device)  # (N*S,)
    for t, offset, n in zip(whole, unit.offsets, unit.numels):
        if t is not None:
            flat[offset : offset + n].copy_(t.reshape(-1))
    return flat[lo:hi].clone()


def _cast_inputs(dtype: torch.dtype, module: nn.Module, args: Any, kwargs: Any) -> Any:
    cast = functools.partial(_cast, dtype)
    return tree_map(cast, args), tree_map(cast, kwargs)


def _cast(dtype: torch.dtype, t: Any) -> Any:
    return t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def apply_zero3(
    model: nn.Module,
    *,
    group: dist.ProcessGroup | None = None,
    units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
    mp_policy: MixedPrecision | None = None,
    prefetch: bool = True,
) -> nn.Module:
    """Shard ``model`` (the same on every rank of ``group``) over the ranks, ZeRO-3 style, in
    place; returns it. ``units``: the modules gathered one at a time (default: every block,
    :func:`~minitorch_dist.zero.sharding.default_unit_modules`). Build the optimizer after,
    over ``model.parameters()``. The model's parameters must be fp32 (or of one float dtype)
    on one device; with ``mp_policy`` the compute runs in its ``param_dtype``."""
    if isinstance(model, Zero3Module):
        raise ValueError("apply_zero3 was applied to this model already")
    if mp_policy is not None and not isinstance(mp_policy, MixedPrecision):
        raise ValueError(f"mp_policy must be a MixedPrecision, got {type(mp_policy).__name__}")
    engine = _Engine(model, torch.optim.SGD, lr=0.0, group=group, units=units, prefetch=prefetch)
    policy = mp_policy or MixedPrecision(reduce_dtype=None)
    compute = policy.param_dtype or engine.units[0].params[0].dtype
    reduce = policy.reduce_dtype or engine.units[0].params[0].dtype
    with torch.no_grad():
        for u in engine.units:
            u.master = u.shard  # (S,) the parameter the user's optimizer updates
            if compute != u.master.dtype:  # compute copy of the shard, gathered in that dtype
                u.shard = nn.Parameter(u.master.detach().to(compute), requires_grad=False)
                full = torch.empty(u.padded_numel, dtype=compute, device=u.master.device)
                u.view_params_on(full)  # the parameters become views of the low-precision buffer
                u.full = full
                engine._hook_gradients(u)  # a new dtype gets a new AccumulateGrad node
                u.full.untyped_storage().resize_(0)
            u.grad_shard = u.grad_shard.to(reduce)  # (S,): the reduce-scatter's output dtype
            u.master.grad = u.grad_shard
    if compute != engine.units[0].master.dtype:
        refresh = functools.partial(_refresh_shards, engine)
        engine._handles.append(model.register_forward_pre_hook(refresh, prepend=True))
        for u in engine.units:
            hook = functools.partial(_cast_inputs, compute)
            engine._handles.append(u.module.register_forward_pre_hook(hook, with_kwargs=True))
    _swap_parameters(model, engine)
    model.zero3 = engine
    model.__class__ = type(f"Zero3{type(model).__name__}", (Zero3Module, type(model)), {})
    return model


@torch.no_grad()
def _refresh_shards(engine: _Engine, module: nn.Module, args: Any) -> None:
    """Before each forward: the compute copies from the (updated) fp32 shards."""
    for u in engine.units:
        u.shard.copy_(u.master)


def _swap_parameters(model: nn.Module, engine: _Engine) -> None:
    """Original parameters become plain attributes; each unit's shard a parameter instead."""
    owned = {id(p) for u in engine.units for p in u.params}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None and id(p) in owned:
                del module._parameters[name]
                object.__setattr__(module, name, p)  # still what forward reads: module.weight
    for u in engine.units:
        if SHARD in u.module._parameters:
            raise ValueError(f"two units share the module {u.name!r}")
        u.module.register_parameter(SHARD, u.master)
