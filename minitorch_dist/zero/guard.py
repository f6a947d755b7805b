"""Guards: the torch idioms that cannot be right on ZeRO's objects raise instead of being wrong.

**torch's clip_grad_norm_.** ``torch.nn.utils.clip_grad_norm_(model.parameters(), c)`` sees only
what this rank holds: at ZeRO-0 and -1 the rank's own, un-averaged gradients (the average is
taken inside ``step()``); at ZeRO-2 and -3 nothing (``p.grad`` is None after backward: torch
returns 0 and clips nothing); under ``apply_zero3`` this rank's shard, clipped by its own norm.
Every ZeRO object marks the parameters it owns when it is built (:func:`mark`: a weak
reference to the owner, set on the tensor), and the first mark installs the guard
(:func:`install`): it wraps ``torch.nn.utils.clip_grad._clip_grads_with_norm_``, the function
torch's ``clip_grad_norm_`` calls by its module-level name to scale the gradients, and the
public alias ``torch.nn.utils.clip_grads_with_norm_``. Given a marked parameter of a live ZeRO
object, it raises a ``RuntimeError`` that names :func:`minitorch_dist.zero.clip_grad_norm_`.
Because the lookup happens when torch's function runs, ``from torch.nn.utils import
clip_grad_norm_`` made before the ZeRO object was built is caught too. Other tensors pass
through to torch's own function untouched. Importing ``minitorch_dist.zero`` patches nothing:
a program that builds no ZeRO object keeps torch's functions as they are.

**Optimizers whose state is not elementwise.** ZeRO runs the optimizer on a 1-D piece of each
parameter's flattened values. That equals the optimizer on the whole parameter only if its
update is elementwise (SGD, Adam, AdamW...). :func:`check_elementwise` runs the optimizer twice,
on a 3 x 4 probe and on the same values cut into two flat pieces, and refuses it (``ValueError``)
if a state tensor is not shaped like its parameter (a factored second moment, as Adafactor keeps)
or the two updates differ (a per-tensor trust ratio, as LAMB computes).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

__all__ = ["check_elementwise", "install", "mark", "owner_of"]

_MARK = "_minitorch_zero_owner"
_ORIGINAL: dict[str, Any] = {}


def mark(tensors: Iterable[torch.Tensor], owner: object, what: str) -> None:
    """Record on each tensor that ``owner`` (described as ``what``) owns its gradient, and
    install the guard that makes torch's ``clip_grad_norm_`` refuse such tensors."""
    install()
    ref = weakref.ref(owner)
    for t in tensors:
        setattr(t, _MARK, (ref, what))


def owner_of(t: torch.Tensor) -> str | None:
    """What owns ``t``'s gradient (a live ZeRO object's description), or None."""
    found = getattr(t, _MARK, None)
    return found[1] if found is not None and found[0]() is not None else None


def _guarded_clip(
    parameters: Any, max_norm: float, total_norm: torch.Tensor, foreach: bool | None = None
) -> None:
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    for p in params:
        what = owner_of(p)
        if what is not None:
            raise RuntimeError(
                f"torch.nn.utils.clip_grad_norm_ cannot clip the parameters of {what}: it sees "
                "only this rank's gradients (un-averaged, a shard, or None), so its norm is not "
                "the model's. Use minitorch_dist.zero.clip_grad_norm_(optimizer_or_model, "
                "max_norm) between backward() and step(): it all-reduces the norm over the shards"
            )
    return _ORIGINAL["clip"](params, max_norm, total_norm, foreach)


def install() -> None:
    """Wrap torch's gradient scaling so that it refuses ZeRO's parameters (idempotent)."""
    import torch.nn.utils as utils
    import torch.nn.utils.clip_grad as clip_grad

    if "clip" in _ORIGINAL:
        return
    _ORIGINAL["clip"] = clip_grad._clip_grads_with_norm_
    clip_grad._clip_grads_with_norm_ = _guarded_clip  # what clip_grad_norm_ calls by name
    utils.clip_grads_with_norm_ = _guarded_clip


def _probe_run(
    optimizer_class: type,
    kwargs: dict[str, Any],
    pieces: bool,
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, list]:
    gen = torch.Generator().manual_seed(0)
    value = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    grads = [torch.randn(3, 4, generator=gen, dtype=torch.float64) for _ in range(2)]
    cut = [(0, 5), (5, 12)] if pieces else [(0, 12)]
    shape = (lambda n: (n,)) if pieces else (lambda n: (3, 4))
    params = [
        torch.nn.Parameter(value.reshape(-1)[a:b].reshape(shape(b - a)).to(device, dtype))
        for a, b in cut
    ]
    opt = optimizer_class(params, **kwargs)
    for g in grads:
        for p, (a, b) in zip(params, cut):
            p.grad = g.reshape(-1)[a:b].reshape(p.shape).to(device, dtype)
        opt.step()
    out = torch.cat([p.detach().reshape(-1).double().cpu() for p in params])
    return out, [(tuple(p.shape), k, v) for p in params for k, v in opt.state[p].items()]


def check_elementwise(
    optimizer_class: type,
    kwargs: dict[str, Any],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
    *,
    strict: bool = True,
) -> None:
    """Raise ``ValueError`` unless ``optimizer_class(**kwargs)`` updates each element on its own
    (see the module docstring): what sharding a parameter's values into pieces requires. If the
    probe cannot run (an optimizer that needs a closure, say): an error, or with ``strict=False``
    a warning."""
    with unset_fake_temporarily():  # real tensors, even under a FakeTensorMode
        _check(optimizer_class, kwargs, torch.device(device), dtype, strict)


def _check(
    optimizer_class: type,
    kwargs: dict[str, Any],
    device: torch.device,
    dtype: torch.dtype,
    strict: bool,
) -> None:
    name = getattr(optimizer_class, "__name__", str(optimizer_class))
    try:
        whole, state = _probe_run(optimizer_class, kwargs, False, device, dtype)
        cut, _ = _probe_run(optimizer_class, kwargs, True, device, dtype)
    except Exception as e:  # noqa: BLE001 - any failure means we could not check it
        if not strict:
            warnings.warn(f"ZeRO could not check that {name} is elementwise: {e}", stacklevel=3)
            return
        raise ValueError(
            f"ZeRO could not check that {name} is elementwise (it runs it on a "
            f"3 x 4 probe parameter): {type(e).__name__}: {e}"
        ) from e
    for shape, key, value in state:
        if isinstance(value, torch.Tensor) and value.numel() > 1 and tuple(value.shape) != shape:
            raise ValueError(
                f"{name} keeps state {key!r} of shape {tuple(value.shape)} for a parameter of "
                f"shape {shape}: ZeRO shards only optimizers whose state is elementwise (one "
                "value per parameter element, as SGD, Adam, AdamW); a factored state "
                "(Adafactor) would be computed on the shards' shapes, not the parameters'"
            )
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    if not torch.allclose(whole, cut, rtol=tol, atol=tol):
        err = (whole - cut).abs().max().item()
        raise ValueError(
            f"{name} updates a parameter cut into pieces differently from the whole "
            f"parameter (max difference {err:.3g} on a 3 x 4 probe): ZeRO shards "
            "only optimizers whose update is elementwise"
        )
