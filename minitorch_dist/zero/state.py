"""Optimizer state dicts of the ZeRO stages: full (consolidated) and local (this rank's shard).

A rank's inner optimizer keys its state by the unit's shard, S elements of a padded flat buffer of
N * S (:mod:`minitorch_dist.zero.sharding`). The *full* state dict undoes the sharding: every
elementwise state tensor (Adam's ``exp_avg``, ``exp_avg_sq``, SGD's ``momentum_buffer``) is
all-gathered into the flat buffer and cut back into one tensor per parameter, scalars (``step``)
are copied to every parameter, and the parameters are numbered in the order of ``param_groups``:
exactly what the same ``torch.optim`` class on one process saves. So it loads on any number of
ranks (resharding is slicing the flat buffer differently) and into a plain optimizer, as
torch's ``ZeroRedundancyOptimizer.consolidate_state_dict`` allows. The *local* state dict is the
inner optimizer's own, with the world size it was saved on: cheaper, but it only loads on the
same ranks.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from minitorch_dist.comm import all_gather_into_tensor

__all__ = [
    "full_state_dict",
    "load_full_state_dict",
    "load_local_state_dict",
    "local_state_dict",
    "own_copy",
]


def _check(opt: Any) -> None:
    if opt.offload:
        raise ValueError("state dicts with offload=True are not supported (the CPU master copy)")


def _param_index(opt: Any) -> dict[int, int]:
    return {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}


def _groups(opt: Any, index: dict[int, int]) -> list[dict[str, Any]]:
    return [
        {**opt._hyper(g), "params": [index[id(p)] for p in group["params"]]}
        for g, group in enumerate(opt.param_groups)
    ]


def _elementwise(name: str, value: Any) -> bool:
    """Whether a state entry has one element per parameter element (all but torch's ``step``)."""
    return isinstance(value, torch.Tensor) and name != "step"


def own_copy(value: Any) -> Any:
    """A tensor of its own (torch's optimizers update ``step`` in place: two parameters
    sharing one tensor would advance it twice per step), anything else as it is."""
    return value.clone() if isinstance(value, torch.Tensor) else value


def _gather(opt: Any, unit: Any, shard: torch.Tensor) -> torch.Tensor:
    """The flat buffer (N * S,) of every rank's shard (S,) of one state tensor."""
    if unit.world_size == 1:
        return shard
    flat = shard.new_empty(unit.padded_numel)
    all_gather_into_tensor(flat, shard.contiguous(), group=opt.group)  # (S,) -> (N*S,)
    return flat


@torch.no_grad()
def full_state_dict(opt: Any) -> dict[str, Any]:
    """The state of ``opt`` as ``opt.optimizer_class`` on one process would save it (a
    collective: every rank calls it, in the same order)."""
    _check(opt)
    index = _param_index(opt)
    state: dict[int, dict[str, Any]] = {}
    for unit, key in zip(opt.units, opt._state_keys()):
        for name, value in opt.inner.state.get(key, {}).items():
            if _elementwise(name, value) and value.shape == (unit.shard_numel,):
                pieces = [t.clone() for t in unit.views(_gather(opt, unit, value))]
            elif not _elementwise(name, value) and (
                not isinstance(value, torch.Tensor) or value.numel() == 1
            ):
                pieces = [
                    value.clone() if isinstance(value, torch.Tensor) else value for _ in unit.params
                ]
            else:
                raise ValueError(
                    f"state {name!r} of {opt.optimizer_class.__name__} is not "
                    "elementwise: ZeRO shards only elementwise states"
                )
            for p, piece in zip(unit.params, pieces):
                state.setdefault(index[id(p)], {})[name] = piece
    return {"state": state, "param_groups": _groups(opt, index)}


def _check_groups(opt: Any, saved: list[dict[str, Any]]) -> None:
    sizes = [len(g["params"]) for g in opt.param_groups]
    if [len(g["params"]) for g in saved] != sizes:
        got = [len(g["params"]) for g in saved]
        raise ValueError(f"the state dict has param groups of {got} parameters, expected {sizes}")


def _check_shapes(opt: Any, states: list[list[dict[str, Any]]]) -> None:
    """Before anything is written: every elementwise state has its parameter's element count
    (``ValueError`` naming the parameter by its module path where the optimizer knows it)."""
    for unit, per in zip(opt.units, states):
        for name, p, s in zip(unit.names, unit.params, per):
            for key, value in s.items():
                if _elementwise(key, value) and value.numel() != p.numel():
                    raise ValueError(
                        f"optimizer state {key!r} of parameter {name!r} has shape "
                        f"{tuple(value.shape)}, the parameter {tuple(p.shape)}"
                    )


@torch.no_grad()
def load_full_state_dict(opt: Any, state_dict: dict[str, Any]) -> None:
    """Load a full state dict (saved on any number of ranks): keep this rank's shard of it."""
    _check(opt)
    _check_groups(opt, state_dict["param_groups"])
    for group, saved in zip(opt.param_groups, state_dict["param_groups"]):
        group.update({k: v for k, v in saved.items() if k != "params"})
    index = _param_index(opt)
    saved_ids = [i for g in state_dict["param_groups"] for i in g["params"]]
    by_param = {i: state_dict["state"].get(saved_ids[i], {}) for i in range(len(saved_ids))}
    _check_shapes(opt, [[by_param[index[id(p)]] for p in u.params] for u in opt.units])
    inner_state = {}
    for k, unit in enumerate(opt.units):
        states = [by_param[index[id(p)]] for p in unit.params]
        first = next((s for s in states if s), None)
        if first is None:
            continue  # no step taken yet
        lo, hi = unit.shard_range(opt.rank if unit.world_size > 1 else 0)  # stage 0: whole
        loaded = {}
        for name, value in first.items():
            if _elementwise(name, value):
                flat = torch.zeros(unit.padded_numel, dtype=value.dtype)
                for s, o, n in zip(states, unit.offsets, unit.numels):
                    if name in s:
                        flat[o : o + n].copy_(s[name].reshape(-1))
                loaded[name] = flat[lo:hi].clone()  # (S,): this rank's shard
            else:  # a copy: torch's optimizers advance "step" in place
                loaded[name] = own_copy(value)
        inner_state[k] = loaded
    groups = [
        {**opt._hyper(g), "params": [k for k, ug in enumerate(opt._unit_group) if ug == g]}
        for g in opt._inner_group
    ]  # inner parameter k: the shard of unit k
    opt.inner.load_state_dict({"state": inner_state, "param_groups": groups})


def local_state_dict(opt: Any) -> dict[str, Any]:
    """This rank's shard of the state (the inner optimizer's), tagged with the world size."""
    _check(opt)
    return {
        "world_size": opt.world_size,
        "rank": opt.rank,
        "stage": opt.stage,
        "shards": [u.shard_numel for u in opt.units],
        "optimizer": opt.inner.state_dict(),
        "param_groups": [opt._hyper(g) for g in range(len(opt.param_groups))],
    }


def load_local_state_dict(opt: Any, state_dict: dict[str, Any]) -> None:
    """Load :func:`local_state_dict` of the same rank of the same world size."""
    _check(opt)
    saved = state_dict["world_size"]
    if saved != opt.world_size:
        raise ValueError(
            f"a local (sharded) state dict saved on world_size={saved} ranks cannot "
            f"load on world_size={opt.world_size}: resharding needs the full "
            "state_dict() / load_state_dict()"
        )
    if state_dict["rank"] != opt.rank or state_dict["shards"] != [u.shard_numel for u in opt.units]:
        raise ValueError(
            f"this local state dict belongs to rank {state_dict['rank']} with shards "
            f"{state_dict['shards']}, not to rank {opt.rank}"
        )
    for group, hyper in zip(opt.param_groups, state_dict["param_groups"]):
        group.update(hyper)
    # a copy: torch's load_state_dict keeps the tensors it is given, and updates them in place
    opt.inner.load_state_dict(copy.deepcopy(state_dict["optimizer"]))
