"""One process grid: ``world_size`` ranks as dp x pp x cp x ep x tp, each axis's groups built once.

    grid = ProcessGrid(dp=2, pp=2, tp=2)          # inside launch(): 8 ranks
    grid.coords                                   # this rank's place: {"dp": 1, "pp": 0, ...}
    dist.all_reduce(t, group=grid.group("tp"))    # the ranks that share this rank's tp group

Ranks are numbered with **tp innermost**, then ep, cp, pp and dp outermost, as picotron does
(``torch.arange(world).view(dp, pp, cp, tp)``, with ep added next to tp). Megatron-LM also puts
tp innermost (``parallel_state.initialize_model_parallel``, default order "tp-cp-ep-dp-pp", which
puts pp rather than dp outermost):

    rank = ((((dp_i * pp + pp_i) * cp + cp_i) * ep + ep_i) * tp + tp_i

so the ranks of one tensor-parallel group are neighbours. On a cluster ``torchrun`` gives the
GPUs of one node consecutive ranks, so a tp group of at most ``gpus_per_node`` ranks never leaves
its node: tensor parallelism sends two all-reduces per layer and needs NVLink, while data
parallelism's one gradient reduction per step can cross the slower network.

Any axis may be 1. Every group is created once, when the grid is built (``dist.new_group`` is a
collective: every rank must create every group, in the same order), and the grid is passed
explicitly to every technique -- there is no module global. Besides the five axes the grid builds
the groups over which gradients are reduced: ``"dp_cp"`` (context-parallel ranks hold the same
weights and see different tokens, so their gradients are summed too) and ``"dp_cp_ep"`` (dense,
non-expert weights are replicated over the expert axis as well).

:class:`GridLayout` is the arithmetic alone (no process group needed: use it to print a map of a
grid you cannot run); :class:`ProcessGrid` adds this rank and the process groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from minitorch_dist.checks import check_int

__all__ = ["AXES", "GROUPS", "GridLayout", "ProcessGrid"]

AXES = ("dp", "pp", "cp", "ep", "tp")  # outermost first: tp is innermost (neighbouring ranks)
# every group the grid builds: each axis alone, and the gradient-reduction groups
GROUPS: dict[str, tuple[str, ...]] = {
    **{axis: (axis,) for axis in AXES},
    "dp_cp": ("dp", "cp"),
    "dp_cp_ep": ("dp", "cp", "ep"),
}


def _axes_of(name: str | tuple[str, ...]) -> tuple[str, ...]:
    """An axis name, a group name of :data:`GROUPS`, or a tuple of axes -> a tuple of axes."""
    axes = GROUPS.get(name) if isinstance(name, str) else tuple(name)
    if not axes or any(a not in AXES for a in axes):
        raise ValueError(
            f"group must be one of {', '.join(GROUPS)} or a tuple of axes from "
            f"{', '.join(AXES)}, got {name!r}"
        )
    return axes


@dataclass(frozen=True)
class GridLayout:
    """The shape of a grid and where each rank sits in it; no process group needed."""

    dp: int = 1  # data parallel: replicas that see different batches (outermost)
    pp: int = 1  # pipeline parallel: stages that hold different layers
    cp: int = 1  # context parallel: ranks that hold different chunks of each sequence
    ep: int = 1  # expert parallel: ranks that hold different experts
    tp: int = 1  # tensor parallel: ranks that hold slices of every weight (innermost)

    def __post_init__(self) -> None:
        for axis in AXES:
            check_int(axis, getattr(self, axis))

    @property
    def world_size(self) -> int:
        return math.prod(self.sizes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The five axis sizes, outermost (dp) first."""
        return tuple(getattr(self, axis) for axis in AXES)

    def check_world_size(self, world_size: int) -> None:
        """ValueError unless the axes multiply to ``world_size``."""
        if self.world_size != world_size:
            product = "*".join(AXES)
            raise ValueError(
                f"{product} = {self.world_size} but world_size = {world_size} ({self.describe()})"
            )

    def describe(self) -> str:
        return " x ".join(f"{axis} {getattr(self, axis)}" for axis in AXES)

    def _check_rank(self, rank: int) -> None:
        check_int("rank", rank, minimum=0, maximum=self.world_size - 1)

    def coords(self, rank: int) -> dict[str, int]:
        """Where ``rank`` sits: its index along each axis."""
        self._check_rank(rank)
        out = {}
        for axis, size in zip(reversed(AXES), reversed(self.sizes)):  # tp first: innermost
            rank, out[axis] = divmod(rank, size)
        return {axis: out[axis] for axis in AXES}

    def rank_of(self, **coords: int) -> int:
        """The rank at the given coordinates (axes not named are 0)."""
        unknown = set(coords) - set(AXES)
        if unknown:
            raise ValueError(f"unknown axes {sorted(unknown)}: the axes are {', '.join(AXES)}")
        rank = 0
        for axis, size in zip(AXES, self.sizes):
            rank = rank * size + check_int(
                f"{axis} index", coords.get(axis, 0), minimum=0, maximum=size - 1
            )
        return rank

    def group_ranks(self, name: str | tuple[str, ...], rank: int) -> list[int]:
        """The ranks in ``rank``'s group ``name`` (an axis, ``"dp_cp"``, ...), ascending."""
        axes, fixed = _axes_of(name), self.coords(rank)
        return [
            r
            for r in range(self.world_size)
            if all(self.coords(r)[a] == fixed[a] for a in AXES if a not in axes)
        ]

    def all_groups(self, name: str | tuple[str, ...]) -> list[list[int]]:
        """Every group along ``name``: a partition of the ranks, ordered by their first rank."""
        seen: dict[tuple[int, ...], None] = {}
        for rank in range(self.world_size):
            seen.setdefault(tuple(self.group_ranks(name, rank)), None)
        return [list(g) for g in seen]

    def table(self, gpus_per_node: int | None = None) -> str:
        """A printable map: one row per rank with its coordinates, then each axis's groups.

        With ``gpus_per_node``, a node column shows which groups stay inside a node."""
        if gpus_per_node is not None:
            check_int("gpus_per_node", gpus_per_node)
        head = "rank" + "".join(f"{a:>4}" for a in AXES) + ("  node" if gpus_per_node else "")
        lines = [f"world_size {self.world_size} = {self.describe()}  (tp innermost)", head]
        for rank in range(self.world_size):
            c = self.coords(rank)
            node = f"{rank // gpus_per_node:>6}" if gpus_per_node else ""
            lines.append(f"{rank:>4}" + "".join(f"{c[a]:>4}" for a in AXES) + node)
        lines.append("groups:")
        for name in GROUPS:
            if math.prod(getattr(self, a) for a in GROUPS[name]) == 1:
                continue  # an axis of size 1: every rank alone, nothing to show
            groups = self.all_groups(name)
            shown = " ".join("[" + ",".join(map(str, g)) + "]" for g in groups)
            lines.append(f"  {name:<9}{shown}")
        return "\n".join(lines)


class ProcessGrid:
    """A :class:`GridLayout` with this rank's place in it and every group, built once.

    Call it on every rank, inside an initialised default process group whose size is
    ``dp * pp * cp * ep * tp``. ``grid.group(name)`` returns this rank's group for an axis or a
    group of :data:`GROUPS`; ``grid.size(axis)``, ``grid.index(axis)`` (its place on the axis) and
    ``grid.ranks(name)`` (global ranks of its group) describe it; ``grid.tp_group``,
    ``grid.tp_rank``, ``grid.dp_cp_size`` ... are shorthands for the same calls.
    """

    def __init__(self, dp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1, tp: int = 1) -> None:
        self.layout = GridLayout(dp=dp, pp=pp, cp=cp, ep=ep, tp=tp)
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(
                "a ProcessGrid needs an initialised process group: build it inside "
                "launch() or torchrun (GridLayout needs none)"
            )
        self.layout.check_world_size(dist.get_world_size())
        self.rank = dist.get_rank()
        self.coords = self.layout.coords(self.rank)
        self._groups: dict[str, Any] = {}
        for name in GROUPS:  # every rank creates every group, in the same order
            for ranks in self.layout.all_groups(name):
                group = dist.new_group(ranks)
                if self.rank in ranks:
                    self._groups[name] = group

    def group(self, name: str | tuple[str, ...]) -> Any:
        """This rank's process group along an axis (``"tp"``) or of :data:`GROUPS` (``"dp_cp"``)."""
        axes = _axes_of(name)
        for key, value in GROUPS.items():
            if set(value) == set(axes):
                return self._groups[key]
        raise ValueError(f"no group over {axes}: the grid builds {', '.join(GROUPS)}")

    def ranks(self, name: str | tuple[str, ...]) -> list[int]:
        """Global ranks of this rank's group ``name``, ascending (group rank i = ranks[i])."""
        return self.layout.group_ranks(name, self.rank)

    def size(self, name: str | tuple[str, ...]) -> int:
        return len(self.ranks(name))

    def index(self, name: str | tuple[str, ...]) -> int:
        """This rank's rank inside its group ``name``; for an axis, its coordinate on it."""
        return self.ranks(name).index(self.rank)

    def __getattr__(self, name: str) -> Any:
        # grid.tp_group, grid.dp_cp_group ... and grid.tp_rank, grid.pp_size ...
        for suffix, get in (("_group", self.group), ("_rank", self.index), ("_size", self.size)):
            if name.endswith(suffix) and name[: -len(suffix)] in GROUPS:
                return get(name[: -len(suffix)])
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"ProcessGrid({self.layout.describe()}, rank {self.rank}: {self.coords})"

    def table(self, gpus_per_node: int | None = None) -> str:
        return self.layout.table(gpus_per_node)
