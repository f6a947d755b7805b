"""Flat, padded, sharded parameter buffers: the bookkeeping every ZeRO stage shares.

ZeRO (Rajbhandari et al. 2020, section 5) splits each model state into N equal pieces, one per
data-parallel rank. To cut many tensors of awkward shapes into N equal pieces, they are first laid
end to end in one flat buffer, which is padded with zeros to a multiple of N:

    params of a unit:   [ w1 (3 x 4) | b1 (3) | w2 (2 x 3) ]          numel = 21 = Psi_u
    flat, N = 4:        [ 0 .. 20 | pad pad pad ]                      padded = N * S = 24
    shards:             [ rank 0: 0..5 | rank 1: 6..11 | rank 2: 12..17 | rank 3: 18..23 ]

with S = ceil(Psi_u / N) elements per shard: parameter counts that do not divide by N just waste
a few zeros at the end. The model's parameters become views into the flat buffer (``p.data`` is
re-pointed), so writing the buffer (an all-gather, say) updates the parameters, and a collective
on the flat buffer moves all of a unit's tensors in one call. Padding elements have zero gradient,
so Adam leaves them at zero.

A **unit** is the set of parameters gathered and reduced together: by default each top-level
submodule of the model (each Block of the Llama, each child of a ModuleList), as PyTorch FSDP
wraps one module per unit (Zhao et al. 2023, section 3). A parameter used by several units (tied
weights) belongs to their closest common ancestor, the model itself if need be (the *root unit*).
Frozen parameters (``requires_grad=False``) belong to no unit: every rank keeps them whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from minitorch_dist.checks import check_int

__all__ = ["FlatUnit", "build_units", "default_unit_modules", "shard_numel"]


def shard_numel(numel: int, world_size: int) -> int:
    """S = ceil(numel / N): elements per shard of a flat buffer padded to N * S."""
    if numel < 0 or world_size < 1:
        raise ValueError(f"need numel >= 0 and world_size >= 1, got {numel}, {world_size}")
    return -(-numel // world_size)


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` start at the same place of the same storage (no data_ptr, which
    fake tensors do not have)."""
    same = a.untyped_storage()._cdata == b.untyped_storage()._cdata
    return same and a.storage_offset() == b.storage_offset()


class FlatUnit:
    """Parameters flattened, padded and sharded together over ``world_size`` ranks.

    ``params`` (with qualified ``names``) sit at ``offsets`` in a flat buffer of ``padded_numel
    = world_size * shard_numel`` elements; rank r owns elements ``shard_range(r)``. The ZeRO
    optimizers attach their buffers to it: ``full`` (the flat parameters), ``flat_grad`` or
    ``grad_shard``, ``shard`` (this rank's piece, an ``nn.Parameter`` the optimizer updates).
    """

    def __init__(
        self,
        module: nn.Module,
        name: str,
        params: Sequence[nn.Parameter],
        names: Sequence[str],
        world_size: int,
    ) -> None:
        self.module, self.name = module, name
        self.params, self.names = list(params), list(names)
        self.world_size = world_size
        self.numels = [p.numel() for p in self.params]
        self.offsets = [sum(self.numels[:i]) for i in range(len(self.params))]
        self.numel = sum(self.numels)  # Psi_u
        self.shard_numel = shard_numel(self.numel, world_size)  # S_u
        self.padded_numel = self.shard_numel * world_size  # N * S_u
        self.full: torch.Tensor | None = None
        self.flat_grad: torch.Tensor | None = None
        self.grad_shard: torch.Tensor | None = None
        self.shard: nn.Parameter | None = None

    def __repr__(self) -> str:
        return (
            f"FlatUnit({self.name or '<root>'!r}, {len(self.params)} tensors, "
            f"numel={self.numel}, shard={self.shard_numel} x {self.world_size})"
        )

    def shard_range(self, rank: int) -> tuple[int, int]:
        """[start, stop) of rank ``rank``'s shard in the flat buffer."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {rank}")
        return rank * self.shard_numel, (rank + 1) * self.shard_numel

    def flatten(self, tensors: Sequence[torch.Tensor | None]) -> torch.Tensor:
        """A new padded flat buffer (N * S,) holding ``tensors`` (None: zeros) at the offsets."""
        ref = self.params[0]
        flat = torch.zeros(self.padded_numel, dtype=ref.dtype, device=ref.device)
        for t, offset, n in zip(tensors, self.offsets, self.numels):
            if t is not None:
                flat[offset : offset + n].copy_(t.reshape(-1))
        return flat

    def view_params_on(self, flat: torch.Tensor) -> None:
        """Re-point every parameter's data to its slice of ``flat`` (same values expected)."""
        for p, offset, n in zip(self.params, self.offsets, self.numels):
            p.data = flat[offset : offset + n].view(p.shape)

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's slice of ``flat``, shaped like the parameter."""
        return [
            flat[o : o + n].view(p.shape) for p, o, n in zip(self.params, self.offsets, self.numels)
        ]

    def collect_grads(self) -> None:
        """Make ``flat_grad`` hold every parameter's gradient and ``p.grad`` a view of it again
        (after ``model.zero_grad()`` set grads to None, autograd allocated new ones)."""
        for p, view in zip(self.params, self.views(self.flat_grad)):
            if p.grad is None:
                view.zero_()
            elif not _same_memory(p.grad, view):
                view.copy_(p.grad)
            p.grad = view


def default_unit_modules(model: nn.Module) -> list[nn.Module]:
    """Every direct child of ``model`` with trainable parameters; the children of ModuleList and
    ModuleDict containers (which have no forward of their own) instead of the container."""
    found: list[nn.Module] = []
    for child in model.children():
        inner = child.children() if isinstance(child, (nn.ModuleList, nn.ModuleDict)) else [child]
        found += [m for m in inner if any(p.requires_grad for p in m.parameters())]
    return found


def build_units(
    model: nn.Module,
    world_size: int,
    modules: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
    only: set[int] | None = None,
) -> list[FlatUnit]:
    """Split ``model``'s trainable parameters into units over ``world_size`` ranks.

    ``modules`` (default :func:`default_unit_modules`; or a function of the model returning
    them) are the unit modules; each parameter belongs to the deepest of them (or the model, the
    root) that contains every place it is used. Units come in the order of ``modules``, the root
    unit first; units without parameters are dropped. ``only``: the ids of the parameters to
    place (default: every trainable one).
    """
    check_int("world_size", world_size)
    if callable(modules):
        modules = modules(model)
    modules = default_unit_modules(model) if modules is None else list(modules)
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
    for m in modules:
        if id(m) not in names or m is model:
            raise ValueError("each unit module must be a submodule of the model (not the model)")
    if len({id(m) for m in modules}) != len(modules):
        raise ValueError("a module is listed twice among the unit modules")
    prefixes = [("", model)] + [(names[id(m)], m) for m in modules]
    paths: dict[int, list[str]] = {}
    first: dict[int, tuple[str, nn.Parameter]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.requires_grad and (only is None or id(p) in only):
            paths.setdefault(id(p), []).append(name)
            first.setdefault(id(p), (name, p))

    def inside(prefix: str, path: str) -> bool:
        return prefix == "" or path.startswith(prefix + ".")

    owned: dict[str, list[tuple[str, nn.Parameter]]] = {prefix: [] for prefix, _ in prefixes}
    for key, (name, p) in first.items():
        owners = [prefix for prefix, _ in prefixes if all(inside(prefix, q) for q in paths[key])]
        owned[max(owners, key=len)].append((name, p))  # the deepest common owner
    return [
        FlatUnit(
            module, prefix, [p for _, p in owned[prefix]], [n for n, _ in owned[prefix]], world_size
        )
        for prefix, module in prefixes
        if owned[prefix]
    ]
