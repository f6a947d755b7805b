"""What a model made by :func:`~minitorch_dist.zero.transform.apply_zero3` can do beyond torch's
module interface: gather its parameters and gradients, save and load its state whole (on any
number of ranks), and check its optimizer.

The state saved is the one-process one: every sharded parameter whole under its original name,
the optimizer's elementwise states whole per name (its scalars, such as ``step``, as they are).
Loading validates everything first (names, shapes, missing and extra keys, the optimizer's groups
and states) and names the offending key, so a bad file changes nothing; then each rank copies
its pieces out of the whole tensors. No communication on load.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from minitorch_dist.comm import all_gather_into_tensor
from minitorch_dist.zero.guard import check_elementwise
from minitorch_dist.zero.sharding import FlatUnit
from minitorch_dist.zero.state import own_copy

__all__ = ["Zero3Module", "install_step_check"]


def _elementwise(key: str, value: Any) -> bool:
    return isinstance(value, torch.Tensor) and key != "step" and value.dim() > 0


class Zero3Module:
    """Mixed into the class of a model :func:`apply_zero3` transformed (as FSDP2's
    ``FSDPModule``). Every method is a collective unless it says otherwise."""

    zero3: Any

    def _gather(self, unit: FlatUnit, shard: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's (S,) piece of one unit-wide tensor, gathered and cut per parameter."""
        flat = shard.detach().new_empty(unit.padded_numel)
        all_gather_into_tensor(flat, shard.detach().contiguous(), group=self.zero3.group)
        return [view.clone() for view in unit.views(flat)]  # (N*S,) cut into the parameters

    def _gather_flat(self, pick: Callable[[FlatUnit], torch.Tensor]) -> dict[str, torch.Tensor]:
        return {n: t for u in self.zero3.units for n, t in zip(u.names, self._gather(u, pick(u)))}

    def _piece_names(self) -> set[str]:
        """Every name a piece is registered under (a tied weight's second name too)."""
        pieces = {id(pc) for u in self.zero3.units for pc in u.pieces}
        return {n for n, p in self.named_parameters(remove_duplicate=False) if id(p) in pieces}

    def zero3_state_dict(self, optimizer: Any = None) -> tuple[dict, dict | None]:
        """The model's state with every sharded parameter whole under its original name (frozen
        and ignored parameters and buffers as they are), and ``optimizer``'s state (an optimizer
        over ``self.parameters()``) whole per name: what loads on any number of ranks."""
        skip = self._piece_names()
        model = {k: v for k, v in self.state_dict().items() if k not in skip}
        model.update(self._gather_flat(lambda u: u.master))  # the sharded ones, whole
        if optimizer is None:
            return model, None
        state: dict[str, dict[str, Any]] = {}
        for u in self.zero3.units:
            per = [optimizer.state.get(pc, {}) for pc in u.pieces]
            for key in dict.fromkeys(k for s in per for k in s):
                ref = next(s[key] for s in per if key in s)
                if _elementwise(key, ref):
                    flat = ref.new_zeros(u.shard_numel)  # (S,)
                    for pc, start, s in zip(u.pieces, u.starts, per):
                        if key in s:
                            if s[key].shape != pc.shape:
                                raise ValueError(
                                    f"state {key!r} is not elementwise: ZeRO-3 "
                                    "shards only elementwise states"
                                )
                            flat[start : start + pc.numel()] = s[key].reshape(-1)
                    pieces = self._gather(u, flat)
                else:  # a scalar such as Adam's step: each parameter's own copy
                    pieces = [own_copy(s.get(key, ref)) for s in per]
                for name, piece in zip(u.names, pieces):
                    state.setdefault(name, {})[key] = piece
        names = {id(p): n for n, p in self.named_parameters()}
        for p in self.zero3.ignored:
            if p in optimizer.state:
                state[names[id(p)]] = {k: own_copy(v) for k, v in optimizer.state[p].items()}
        return model, {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}

    def _check_load(self, model: dict, optim: dict | None, optimizer: Any) -> None:
        """Raise ``ValueError`` naming the first key that cannot load; change nothing."""
        whole = {n: tuple(p.shape) for u in self.zero3.units for n, p in zip(u.names, u.params)}
        aliases = self._piece_names() - set(whole)
        rest = {
            k: tuple(v.shape)
            for k, v in self.state_dict().items()
            if k not in whole and k not in aliases
        }
        expected = {**whole, **rest}
        missing = [k for k in expected if k not in model]
        extra = [k for k in model if k not in expected and k not in aliases]
        if missing or extra:
            raise ValueError(
                f"the model state does not match the model: missing {missing[:5]}, "
                f"unexpected {extra[:5]}"
            )
        for k, shape in expected.items():
            if tuple(model[k].shape) != shape:
                raise ValueError(
                    f"parameter {k!r} has shape {tuple(model[k].shape)} in the "
                    f"state, {shape} in the model"
                )
        if optim is None or optimizer is None:
            return
        sizes = [len(g["params"]) for g in optimizer.param_groups]
        saved = [len(g["params"]) for g in optim["param_groups"]]
        if saved != sizes:
            raise ValueError(
                f"the optimizer state has param groups of {saved} parameters, the optimizer {sizes}"
            )
        for name, entries in optim["state"].items():
            if name not in expected:
                raise ValueError(f"the optimizer state names {name!r}, not a parameter")
            for key, value in entries.items():
                if _elementwise(key, value) and tuple(value.shape) != expected[name]:
                    raise ValueError(
                        f"optimizer state {key!r} of {name!r} has shape "
                        f"{tuple(value.shape)}, the parameter {expected[name]}"
                    )

    @torch.no_grad()
    def load_zero3_state_dict(
        self, model: dict, optim: dict | None = None, optimizer: Any = None
    ) -> None:
        """Load what :meth:`zero3_state_dict` returned (on any number of ranks): each rank
        keeps its pieces. Everything is validated before anything is written (a ``ValueError``
        names the key). No communication."""
        self._check_load(model, optim, optimizer)
        where = {}  # id(piece) -> (name, span)
        for u in self.zero3.units:
            for name, pc, span in zip(u.names, u.pieces, u.spans):
                where[id(pc)] = (name, span)
                pc.copy_(model[name].reshape(-1)[span[0] : span[1]].view(pc.shape))
        skip = self._piece_names()
        self.load_state_dict({k: v for k, v in model.items() if k not in skip}, strict=False)
        if optimizer is None or optim is None:
            return
        names = {id(p): n for n, p in self.named_parameters()}
        params = [p for g in optimizer.param_groups for p in g["params"]]
        saved_ids = [i for g in optim["param_groups"] for i in g["params"]]
        state = {}
        for p, i in zip(params, saved_ids):
            name, span = where.get(id(p), (names.get(id(p)), None))
            entry = optim["state"].get(name)
            if not entry:
                continue
            state[i] = {  # copies: torch's load_state_dict keeps a "step" tensor it is given
                k: (
                    v.reshape(-1)[span[0] : span[1]].view(p.shape).clone()
                    if span is not None and _elementwise(k, v)
                    else own_copy(v)
                )
                for k, v in entry.items()
            }
        optimizer.load_state_dict({"state": state, "param_groups": optim["param_groups"]})

    def _whole(self, sharded: dict[str, torch.Tensor], own: Callable) -> dict[str, torch.Tensor]:
        """By the names of ``named_parameters()`` (a tied weight once): the gathered tensor of
        a sharded parameter, ``own(p)`` of a parameter kept whole (skipped when None)."""
        name_of = {id(pc): n for u in self.zero3.units for n, pc in zip(u.names, u.pieces)}
        out = {}
        for name, p in self.named_parameters():
            value = sharded[name_of[id(p)]] if id(p) in name_of else own(p)
            if value is not None:
                out[name] = value
        return out

    def gather_full_params(self, *, trainable_only: bool = False) -> dict[str, torch.Tensor]:
        """Every parameter of the model, whole, by its original name, as torch's full state
        dict holds it: the sharded ones gathered from the fp32 shards, the ``ignored_params``
        and frozen ones copied as they are (``trainable_only``: without the frozen ones, as
        :func:`~minitorch_dist.reference.param_values` reads a model). With the buffers:
        ``zero3_state_dict()[0]``."""
        sharded = self._gather_flat(lambda u: u.master)
        keep = lambda p: p.requires_grad or not trainable_only  # noqa: E731
        return self._whole(sharded, lambda p: p.detach().clone() if keep(p) else None)

    def gather_full_grads(self) -> dict[str, torch.Tensor]:
        """Every trainable parameter's gradient, whole, by name, averaged over the ranks (after
        backward): the sharded ones gathered (zeros where none was computed yet), those of
        ``ignored_params`` as they are (left out while they have none)."""
        sharded = self._gather_flat(lambda u: u.grad_shard)
        grad = lambda p: p.grad.detach().clone() if p.grad is not None else None  # noqa: E731
        return self._whole(sharded, lambda p: grad(p) if p.requires_grad else None)

    def local_grad_shards(self) -> dict[str, tuple[torch.Tensor, tuple[int, int]]]:
        """This rank's part of each parameter's gradient, no communication: by name, the 1-D
        tensor of flattened elements ``[start, stop)`` of that parameter this rank holds
        (parameters with no element in this rank's range are left out)."""
        out = {}
        for u in self.zero3.units:
            for name, view, span in zip(u.names, u.grad_views, u.spans):
                if span[1] > span[0]:
                    out[name] = (view.reshape(-1), span)
        return out


_CHECKED: weakref.WeakSet = weakref.WeakSet()


def _kwargs(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's defaults that its constructor takes (AdamW's hold a key it does not)."""
    params = inspect.signature(type(optimizer).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(optimizer.defaults)
    return {k: v for k, v in optimizer.defaults.items() if k in params}


def _check_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """Global step pre-hook: the first step of an optimizer over apply_zero3's pieces checks
    that its update is elementwise (:func:`~minitorch_dist.zero.guard.check_elementwise`)."""
    if optimizer in _CHECKED:
        return
    pieces = [
        p for g in optimizer.param_groups for p in g["params"] if getattr(p, "_zero3_piece", False)
    ]
    if pieces:
        check_elementwise(
            type(optimizer), _kwargs(optimizer), pieces[0].device, pieces[0].dtype, strict=False
        )
    _CHECKED.add(optimizer)


_INSTALLED: list = []


def install_step_check() -> None:
    """Register :func:`_check_step` once, for every optimizer of the process."""
    if not _INSTALLED:
        _INSTALLED.append(register_optimizer_step_pre_hook(_check_step))
