"""Param groups and units of a ZeRO optimizer: what it is given, cut into flat buffers.

With parameters (or dicts of param groups, as ``torch.optim`` takes them) each group is one unit,
as DeepSpeed flattens each group. With a module, every top-level block is a unit (or ``units=``);
with a module and ``param_groups=[...]`` (the usual "no weight decay on biases and norms"
recipe, which ZeRO-3 needs because it must wrap the module), each unit is cut further by group:
the parameters of one block and one group are flattened together, so every flat buffer, and the
inner optimizer's shard of it, belongs to exactly one group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

from minitorch_dist.checks import check_bool
from minitorch_dist.zero.guard import check_elementwise
from minitorch_dist.zero.sharding import FlatUnit, build_units
from minitorch_dist.zero.sync import check_or_sync_params

__all__ = [
    "check_arguments",
    "check_start",
    "make_groups",
    "make_units",
    "param_label",
    "take_names",
]


def make_groups(
    params: Iterable[torch.Tensor] | Iterable[dict[str, Any]] | nn.Module,
    param_groups: Sequence[dict[str, Any]] | None,
    units: Any,
    cover: bool = True,
) -> tuple[nn.Module | None, list[dict[str, Any]]]:
    """(the model or None, the param groups to give ``torch.optim.Optimizer``)."""
    model = params if isinstance(params, nn.Module) else None
    if model is None:
        if units is not None:
            raise ValueError("units= picks modules: pass the model, not its parameters")
        if param_groups is not None:
            raise ValueError(
                "param_groups= goes with a model; without one pass the groups "
                "as the first argument, as torch.optim takes them"
            )
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        return None, [{**g, "params": _listed(g["params"])} for g in groups]
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    if param_groups is None:
        return model, [{"params": trainable}]
    groups = []
    for g in param_groups:
        if not isinstance(g, dict) or "params" not in g:
            raise ValueError("param_groups must be dicts with a 'params' entry, as torch.optim's")
        ps = g["params"]
        groups.append({**g, "params": _listed(ps)})
    names = {id(p): n for n, p in model.named_parameters()}
    listed = [id(p) for g in groups for p in g["params"]]
    for g in groups:
        for p in g["params"]:
            if id(p) not in names:
                raise ValueError("param_groups holds a tensor that is not a parameter of the model")
    if len(set(listed)) != len(listed):
        raise ValueError("a parameter appears in more than one param group")
    missing = [names[id(p)] for p in trainable if id(p) not in set(listed)]
    if cover and missing:
        raise ValueError(
            f"param_groups must hold every trainable parameter of the model; missing: {missing[:3]}"
        )
    return model, groups


def _listed(params: Any) -> list:
    """A group's parameters as a list (one tensor, an iterator, or ``(name, tensor)`` pairs)."""
    return [params] if isinstance(params, torch.Tensor) else list(params)


def take_names(groups: list[dict[str, Any]]) -> dict[int, str]:
    """Strip ``(name, tensor)`` pairs (``model.named_parameters()``, as torch.optim takes them
    since 2.6) down to the tensors, in place; returns the names by ``id`` of the tensor."""
    names = {}
    for g in groups:
        pairs = g["params"]
        if any(isinstance(p, tuple) for p in pairs):
            if not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                raise ValueError("a param group mixes (name, parameter) pairs and bare tensors")
            names.update({id(p): n for n, p in pairs})
            g["params"] = [p for _, p in pairs]
    return names


def param_label(names: dict[int, str], index: int, p: torch.Tensor) -> str:
    """How an error names a parameter: its module path, or where a bare iterator hid it, its
    position and shape, with how to get the name."""
    if id(p) in names:
        return f"parameter {names[id(p)]!r}"
    return (
        f"parameter {index} of the optimizer (shape {tuple(p.shape)}; pass "
        "model.named_parameters() or the model instead of model.parameters() to see its name)"
    )


def make_units(
    model: nn.Module | None,
    param_groups: list[dict[str, Any]],
    shards: int,
    units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None,
    by_group: bool,
    known: dict[int, str] | None = None,
) -> tuple[list[FlatUnit], list[int]]:
    """The units, and the param group of each (``known``: parameter names by ``id``)."""
    known = known or {}
    trainable = [[p for p in g["params"] if p.requires_grad] for g in param_groups]
    if model is not None and not by_group:
        found = build_units(model, shards, units)
        return found, [0] * len(found)
    out: list[FlatUnit] = []
    owner: list[int] = []
    if model is not None:
        for g, ps in enumerate(trainable):
            found = build_units(model, shards, units, only={id(p) for p in ps})
            out += found
            owner += [g] * len(found)
        return out, owner
    index = {id(p): i for i, p in enumerate(p for g in param_groups for p in g["params"])}
    for g, ps in enumerate(trainable):
        if ps:
            names = [known.get(id(p), f"param{index[id(p)]}") for p in ps]
            out.append(FlatUnit(None, f"group{g}", ps, names, shards))
            owner.append(g)
    return out, owner


def check_start(
    opt: Any, optimizer_class: type, optimizer_kwargs: dict[str, Any], sync_params: bool | None
) -> None:
    """Before anything is flattened: the optimizer class is elementwise (unless the stage says
    not to check), and every rank holds the same parameters and buffers (or rank 0's are
    broadcast). Fake tensors (measure.py's 70B models) have no data: the probe runs on the CPU
    and the weights are not compared."""
    trainable = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
    fake = isinstance(trainable[0], FakeTensor)
    if opt._check_optimizer:
        device = "cpu" if fake else trainable[0].device
        check_elementwise(optimizer_class, optimizer_kwargs, device, trainable[0].dtype)
    flat = (p for g in opt.param_groups for p in g["params"])
    named = [(param_label(opt._param_names, i, p), p) for i, p in enumerate(flat)]
    if opt.model is not None:
        named = [(f"parameter {n!r}", p) for n, p in opt.model.named_parameters()]
        named += [(f"buffer {n!r}", b) for n, b in opt.model.named_buffers()]
    check_or_sync_params(named, opt.group, None if fake else sync_params)


def check_arguments(optimizer_class: Any, offload: Any, sync_params: Any) -> None:
    """The ZeRO optimizers' own arguments (``ValueError`` naming the one that is wrong)."""
    if not (
        isinstance(optimizer_class, type) and issubclass(optimizer_class, torch.optim.Optimizer)
    ):
        raise ValueError(
            f"optimizer_class must be a torch.optim.Optimizer subclass, got {optimizer_class!r}"
        )
    check_bool("offload", offload)
    if sync_params not in (True, False, None):
        raise ValueError(f"sync_params must be True, False or None, got {sync_params!r}")
    if offload and optimizer_class is not torch.optim.Adam:
        raise ValueError("offload=True runs torch.optim.Adam on the CPU: use that class")
