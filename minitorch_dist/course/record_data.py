"""What the grading child records of a call (for minitorch_dist/course/record.py): values as
data that ``torch.load(weights_only=True)`` loads, the state a method leaves in its object, and
the families of collectives a call used.

Nothing here is trusted: it runs in the child, beside the submission's code.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

__all__ = [
    "FAMILIES",
    "MAX_ELEMENTS",
    "active",
    "convert",
    "count_collectives",
    "has_state",
    "state",
    "to_data",
]

MAX_ELEMENTS = 1 << 20  # a larger tensor is recorded as its shape and two sums


def to_data(x: Any, depth: int = 0) -> Any:
    """``x`` as tensors, numbers, strings, lists and dicts: what ``weights_only`` loads."""
    import torch

    if depth > 6:
        return "<deep>"
    if isinstance(x, torch.Tensor):
        try:
            t = x.detach()
            if t.device.type == "meta" or t.is_sparse:
                return {"shape": list(t.shape), "dtype": str(t.dtype)}
            if t.numel():  # a storage freed in place (ZeRO-3's resize_(0)): do not read it
                extent = t.storage_offset() + sum(
                    (n - 1) * st for n, st in zip(t.shape, t.stride())
                )
                if t.untyped_storage().nbytes() < (extent + 1) * t.element_size():
                    return {"shape": list(t.shape), "dtype": str(t.dtype), "freed": True}
            t = t.to("cpu")
            if t.numel() > MAX_ELEMENTS:
                d = t.double()
                return {"shape": list(t.shape), "sum": float(d.sum()), "abs": float(d.abs().sum())}
            return t.clone().contiguous()
        except Exception:  # a fake or exotic tensor
            return {"shape": list(x.shape), "dtype": str(x.dtype)}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (torch.Size, tuple, list)):
        return [to_data(v, depth + 1) for v in list(x)[:256]]
    if isinstance(x, dict):
        return {str(k): to_data(v, depth + 1) for k, v in list(x.items())[:256]}
    if isinstance(x, torch.dtype):
        return str(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = {f.name: getattr(x, f.name, None) for f in dataclasses.fields(x)}
        return {"type": type(x).__name__, **to_data(fields, depth + 1)}
    return f"<{type(x).__name__}>"


def convert(value: Any) -> Any:
    try:  # inside a dispatch mode (a memory tracker), converting must not dispatch to it again
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            return to_data(value)
    except ImportError:
        return to_data(value)


# torch.distributed's functions by the family of communication they do: a call records the
# families it used (variants of one family, such as all_gather and all_gather_into_tensor, count
# alike; barriers are left out)
FAMILIES = {
    "all_reduce": "all_reduce",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "all_gather_object": "all_gather",
    "broadcast": "broadcast",
    "broadcast_object_list": "broadcast",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "send": "p2p",
    "recv": "p2p",
    "isend": "p2p",
    "irecv": "p2p",
    "batch_isend_irecv": "p2p",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
}
_local = threading.local()  # .active: the families used by each recorded call of this thread


def active() -> list[set[str]]:
    if not hasattr(_local, "active"):
        _local.active = []
    return _local.active


def count_collectives() -> None:
    """Wrap torch.distributed's collectives so that a recorded call notes the families it used."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    for name, family in FAMILIES.items():
        original = getattr(c10d, name, None)
        if original is None or getattr(original, "_records_family", None):
            continue

        def counted(*args: Any, _f: Any = original, _family: str = family, **kwargs: Any) -> Any:
            for used in active():
                used.add(_family)
            return _f(*args, **kwargs)

        counted._records_family = family  # type: ignore[attr-defined]
        for module in (dist, c10d):
            if getattr(module, name, None) is original:
                setattr(module, name, counted)


def has_state(obj: Any) -> bool:
    import torch

    return hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.Tensor))


def state(obj: Any) -> dict:
    """What a method leaves visible in its object: the public numbers and strings, and the
    values and gradients of the parameters of the modules and optimizers it holds (itself
    included), not its private buffers (which a right solution may arrange its own way)."""
    import torch

    def own(t: Any) -> Any:  # a view into a flat buffer (ZeRO-3's units) may be mid-gather
        if not isinstance(t, torch.Tensor):
            return t
        whole = (
            t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()
        )
        return t if whole else {"shape": list(t.shape), "view": True}

    def params(ps: Any) -> list:
        return [[own(p), own(p.grad)] for p in list(ps)[:512]]

    out: dict[str, Any] = {}
    if isinstance(obj, torch.nn.Module):
        out["parameters"] = params(obj.parameters())
    for name, value in list(vars(obj).items())[:256]:
        if name.startswith("_"):
            continue
        if isinstance(value, torch.nn.Module):
            out[name] = params(value.parameters())
        elif isinstance(value, torch.optim.Optimizer):
            out[name] = params(p for g in value.param_groups for p in g["params"])
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out
