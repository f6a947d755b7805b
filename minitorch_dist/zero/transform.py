"""ZeRO-3 as a module transform, in the spirit of PyTorch FSDP2's ``fully_shard``.

    model = apply_zero3(model, mp_policy=MixedPrecision(param_dtype=torch.bfloat16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)   # any optimizer, on the local shards
    loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()
    model.gather_full_params()                              # inspect (a collective)

The machinery is stage 3's (:class:`~minitorch_dist.zero.stage3.ZeroStage3`: units flattened
and sharded, gathered before each unit computes and freed after, gradients reduce-scattered as
soon as a unit's are written), so memory and communication are exactly chapter 6's. What
changes is who owns the update. As with FSDP2's per-parameter sharding, every parameter keeps its
name and becomes its local shard: ``model.named_parameters()`` yields, under the original names,
this rank's piece of each parameter's flattened values (a view into the unit's shard of S
elements, so the pieces cost no memory), shaped (1, ..., 1, k) to keep the parameter's number of
dimensions (``p.dim() >= 2`` recipes pick the same parameters); ``k`` may be 0. Any elementwise
``torch.optim`` optimizer over them, with any param groups, updates exactly this rank's 1/N of
the model, and trains like the same optimizer and groups on one process. FSDP2 cuts each
parameter along its first dimension (a DTensor of the full shape); Zhao et al. 2023 describe
FSDP1's flat parameters, whose layout we keep. Forward still reads ``module.weight``: the whole
parameter, a view of the gathered buffer that exists only while its unit computes.

``ignored_params`` (FSDP2's ``ignored_params``) stay whole on every rank under their names: they
are in no unit, and their gradients are averaged over the ranks at the end of each backward (one
all-reduce). Every rank must start from the same weights: checked, or rank 0's broadcast with
``sync_params=True`` (:mod:`~minitorch_dist.zero.sync`). Clip with
:func:`~minitorch_dist.zero.clip.clip_grad_norm_` (model); torch's raises on these parameters,
and an optimizer whose update is not elementwise is refused at its first step
(:mod:`~minitorch_dist.zero.guard`).

Mixed precision (``MixedPrecision``, FSDP2's ``MixedPrecisionPolicy``): the shards, the optimizer
and the gradient shards stay in fp32; before each forward the shards are cast to ``param_dtype``
and gathered in it, each unit's floating inputs are cast to it, and the gradients (computed in
``param_dtype``) are reduce-scattered in ``reduce_dtype``, fp32 by default, so that the sum over
the ranks does not round (Micikevicius et al. 2018, section 3.1, keep an fp32 master copy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._pytree import tree_map

from minitorch_dist.comm.groups import Group
from minitorch_dist.zero.guard import mark
from minitorch_dist.zero.sharding import FlatUnit, _same_memory
from minitorch_dist.zero.stage3 import ZeroStage3
from minitorch_dist.zero.transform_state import Zero3Module, install_step_check

__all__ = ["MixedPrecision", "Zero3Module", "apply_zero3"]


@dataclass(frozen=True)
class MixedPrecision:
    """Dtypes of a ZeRO-3 model (torch's ``MixedPrecisionPolicy``): ``param_dtype`` for the
    gathered parameters and the compute (None: the parameters' own), ``reduce_dtype`` for the
    gradient reduce-scatter and the gradient shards (None: the parameters' own)."""

    param_dtype: torch.dtype | None = None  # e.g. torch.bfloat16
    reduce_dtype: torch.dtype | None = torch.float32


class _Engine(ZeroStage3):
    """Stage 3's hooks; the update belongs to the user's optimizer (this one never steps)."""

    _cover_groups = False  # ignored_params belong to no unit
    _check_optimizer = False  # the user's optimizer is checked at its first step instead
    _whole_state_dict = False  # state_dict() holds the pieces; zero3_state_dict() the whole
    ignored: list[nn.Parameter]

    def _on_grad(self, unit: FlatUnit, param: torch.Tensor, *hook_args: Any) -> None:
        if not unit.ready:  # the unit's first gradient of this backward
            _attach_grads(unit)
        super()._on_grad(unit, param, *hook_args)

    def _end_backward(self) -> None:
        super()._end_backward()
        _average_ignored(self)


@torch.no_grad()
def _attach_grads(unit: FlatUnit) -> None:
    """Each piece's ``.grad`` is its view of the gradient shard again (the user's zero_grad()
    set it to None: start that part at zero)."""
    for piece, view in zip(unit.pieces, unit.grad_views):
        if piece.grad is None:
            view.zero_()
        elif not _same_memory(piece.grad, view):
            view.copy_(piece.grad)
        piece.grad = view


@torch.no_grad()
def _average_ignored(engine: _Engine) -> None:
    """All-reduce the gradients of the ignored parameters, divided by N. Repeated after every
    micro-batch's backward it stays exact: what was averaged before is the same on every rank."""
    ps = engine.ignored
    if not ps:
        return
    flat = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in ps]
    )
    dist.all_reduce(flat, group=engine.group)
    flat.div_(engine.world_size)
    offset = 0
    for p in ps:
        view = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
        if p.grad is None:
            p.grad = view.clone()
        else:
            p.grad.copy_(view)


def _cast_inputs(dtype: torch.dtype, module: nn.Module, args: Any, kwargs: Any) -> Any:
    cast = functools.partial(_cast, dtype)
    return tree_map(cast, args), tree_map(cast, kwargs)


def _cast(dtype: torch.dtype, t: Any) -> Any:
    return t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def apply_zero3(
    model: nn.Module,
    *,
    group: Group = None,
    units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
    mp_policy: MixedPrecision | None = None,
    prefetch: bool = True,
    reshard_after_forward: bool = True,
    ignored_params: Iterable[nn.Parameter] | None = None,
    sync_params: bool | None = False,
) -> nn.Module:
    """Shard ``model`` (the same on every rank of ``group``: checked, or rank 0's broadcast with
    ``sync_params``) over the ranks, ZeRO-3 style, in place; returns it. ``units``: the modules
    gathered one at a time (default: every block,
    :func:`~minitorch_dist.zero.sharding.default_unit_modules`); ``ignored_params`` stay whole
    and replicated; ``prefetch`` and ``reshard_after_forward`` are
    :class:`~minitorch_dist.zero.stage3.ZeroStage3`'s. Build the optimizer after, over ``model.parameters()`` (or param groups of
    ``model.named_parameters()``). The model's parameters must be fp32 (or of one float dtype)
    on one device; with ``mp_policy`` the compute runs in its ``param_dtype``."""
    if isinstance(model, Zero3Module):
        raise ValueError("apply_zero3 was applied to this model already")
    if mp_policy is not None and not isinstance(mp_policy, MixedPrecision):
        raise ValueError(f"mp_policy must be a MixedPrecision, got {type(mp_policy).__name__}")
    ignored = list(ignored_params or [])
    owned = {id(p) for p in model.parameters()}
    if any(not isinstance(p, nn.Parameter) or id(p) not in owned for p in ignored):
        raise ValueError("ignored_params must be parameters of the model")
    skip = {id(p) for p in ignored}
    sharded = [p for p in model.parameters() if p.requires_grad and id(p) not in skip]
    if not sharded:
        raise ValueError("apply_zero3 needs a trainable parameter that is not ignored")
    engine = _Engine(
        model,
        torch.optim.SGD,
        lr=0.0,
        group=group,
        units=units,
        prefetch=prefetch,
        reshard_after_forward=reshard_after_forward,
        param_groups=[{"params": sharded}],
        sync_params=sync_params,
    )
    engine.ignored = [p for p in ignored if p.requires_grad]
    policy = mp_policy or MixedPrecision(reduce_dtype=None)
    compute = policy.param_dtype or engine.units[0].params[0].dtype
    reduce = policy.reduce_dtype or engine.units[0].params[0].dtype
    with torch.no_grad():
        for u in engine.units:
            u.master = u.shard  # (S,) what the pieces the user's optimizer updates are views of
            if compute != u.master.dtype:  # compute copy of the shard, gathered in that dtype
                u.shard = nn.Parameter(u.master.detach().to(compute), requires_grad=False)
                full = torch.empty(u.padded_numel, dtype=compute, device=u.master.device)
                u.view_params_on(full)  # the parameters become views of the low-precision buffer
                u.full = full
                engine._hook_gradients(u)  # a new dtype gets a new AccumulateGrad node
                u.full.untyped_storage().resize_(0)
            u.grad_shard = u.grad_shard.to(reduce)  # (S,): the reduce-scatter's output dtype
            u.master.grad = u.grad_shard
            _make_pieces(u, engine.rank)
    if compute != engine.units[0].master.dtype:
        refresh = functools.partial(_refresh_shards, engine)
        engine._handles.append(model.register_forward_pre_hook(refresh, prepend=True))
        for u in engine.units:
            hook = functools.partial(_cast_inputs, compute)
            engine._handles.append(u.module.register_forward_pre_hook(hook, with_kwargs=True))
    _swap_parameters(model, engine)
    model.zero3 = engine
    model.__class__ = type(f"Zero3{type(model).__name__}", (Zero3Module, type(model)), {})
    mark([pc for u in engine.units for pc in u.pieces] + engine.ignored, model, "apply_zero3")
    install_step_check()
    return model


def _make_pieces(unit: FlatUnit, rank: int) -> None:
    """Per parameter: this rank's piece of its flattened values, a view of ``unit.master``
    shaped (1, ..., 1, k), and its gradient, the same view of ``unit.grad_shard``."""
    lo, hi = unit.shard_range(rank)
    unit.pieces, unit.grad_views, unit.spans, unit.starts = [], [], [], []
    for p, offset, n in zip(unit.params, unit.offsets, unit.numels):
        a, b = max(offset, lo), min(offset + n, hi)
        k = max(b - a, 0)
        start = a - lo if k else 0
        shape = (1,) * (p.dim() - 1) + (k,)
        piece = nn.Parameter(unit.master.detach()[start : start + k].view(shape))
        piece._zero3_piece = True
        view = unit.grad_shard[start : start + k].view(shape)
        piece.grad = view
        unit.pieces.append(piece)
        unit.grad_views.append(view)
        unit.spans.append((a - offset, a - offset + k))  # elements of the parameter it holds
        unit.starts.append(start)  # where it starts in the shard


@torch.no_grad()
def _refresh_shards(engine: _Engine, module: nn.Module, args: Any) -> None:
    """Before each forward: the compute copies from the (updated) fp32 shards."""
    for u in engine.units:
        u.shard.copy_(u.master)


def _swap_parameters(model: nn.Module, engine: _Engine) -> None:
    """Each sharded parameter's entry becomes its piece, under the same name (every place it
    is registered: a tied weight too); the whole parameter stays the attribute forward reads."""
    piece_of = {id(p): pc for u in engine.units for p, pc in zip(u.params, u.pieces)}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None and id(p) in piece_of:
                module._parameters[name] = piece_of[id(p)]
                object.__setattr__(module, name, p)  # still what forward reads: module.weight
