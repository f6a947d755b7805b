"""What every ZeRO stage shares: construction, the step, and what a rank holds.

    opt = ZeroStage2(model, lr=1e-3)     # the same model (same seed) on every rank
    cross_entropy(model(x), y).backward()  # x: this rank's micro-batch
    opt.step()
    opt.zero_grad()

Each stage is data parallelism: every rank runs its own micro-batch through the whole model, and
the result is that of one process running ``torch.optim.Adam`` on the whole batch. The stages
differ in which model states a rank keeps whole and which only as its 1/N shard (Rajbhandari et
al. 2020, section 5; bytes per rank for fp32 Adam, N ranks, Psi parameters):

    stage  parameters  gradients  Adam's m, v   bytes per rank
    0      whole       whole      whole         4 Psi + 4 Psi + 8 Psi       (plain data parallel)
    1      whole       whole      shard         4 Psi + 4 Psi + 8 Psi / N   (P_os)
    2      whole       shard      shard         4 Psi + 12 Psi / N          (P_os+g)
    3      shard       shard      shard         16 Psi / N                  (P_os+g+p)

A step is three moves, which each stage fills in: ``_reduce_gradients`` (average the gradients
over the ranks, keeping what this rank needs), ``optimizer.step()`` (torch's own Adam, run on this
rank's shards only, so the arithmetic is exactly that of the single-process reference), and
``_gather_parameters`` (give every rank the updated parameters it keeps). With ``offload=True``
the middle move runs on the CPU (:mod:`minitorch_dist.zero.offload`, ZeRO-Offload). What a stage
keeps between steps (``_kept_params``, ``_kept_grads``) and sends (``comm_payloads``) it says
itself too; the base class never asks which stage it is. Stages 2 and 3 share their unit-wise
gradient reduction, :class:`~minitorch_dist.zero.stage2.UnitwiseGradients`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._pytree import tree_leaves

from minitorch_dist.checks import check_bool
from minitorch_dist.zero.sharding import FlatUnit, build_units, storage_bytes

__all__ = ["ZeroOptimizer"]


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


class ZeroOptimizer:
    """Adam over data-parallel ranks with ZeRO stage :attr:`stage` (see the module docstring).

    ``model`` must be identical on every rank of ``group`` (the default group when None) and have
    its trainable parameters on one device, in one floating dtype. ``units`` lists the modules
    whose parameters are flattened and communicated together, or is a function of the model that
    returns them (default: every top-level block,
    :func:`~minitorch_dist.zero.sharding.default_unit_modules`). Adam's hyper-parameters are
    those of ``torch.optim.Adam``. ``offload=True`` keeps the optimizer states, an fp32 master
    copy of this rank's shard, and the update in CPU memory (ZeRO-Offload, Ren et al. 2021).
    """

    stage = -1  # set by each subclass

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        group: dist.ProcessGroup | None = None,
        units: Sequence[nn.Module] | Callable[[nn.Module], Sequence[nn.Module]] | None = None,
        offload: bool = False,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be an nn.Module, got {type(model).__name__}")
        if not lr >= 0 or not eps >= 0 or not weight_decay >= 0:
            raise ValueError(
                f"lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}"
            )
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        check_bool("offload", offload)
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ZeRO needs an initialised process group: run under launch()")
        self.model, self.group, self.offload = model, group, offload
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.units: list[FlatUnit] = build_units(model, self._shards_per_unit(), units)
        if not self.units:
            raise ValueError("the model has no trainable parameters")
        kinds = {(p.device, p.dtype) for u in self.units for p in u.params}
        if len(kinds) != 1 or not next(iter(kinds))[1].is_floating_point:
            raise ValueError(f"trainable parameters must share one device and float dtype: {kinds}")
        self.hyper = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        with torch.no_grad():
            self._setup()
        shards = [u.shard for u in self.units]
        if offload:
            from minitorch_dist.zero.offload import CpuOffloadAdam

            self.optimizer: Any = CpuOffloadAdam(shards, **self.hyper)
        else:
            self.optimizer = torch.optim.Adam(shards, **self.hyper)

    # -- the three moves of a step; subclasses fill them in --------------------------------
    def _shards_per_unit(self) -> int:
        """Equal shards each flat buffer is padded to: one per rank (stage 0: 1, no padding)."""
        return self.world_size

    def _setup(self) -> None:
        """Flatten each unit, point the parameters into it, make ``unit.shard`` (and its grad)."""
        raise NotImplementedError

    def _reduce_gradients(self) -> None:
        """Leave in ``unit.shard.grad`` the gradient averaged over the ranks, for every unit."""
        raise NotImplementedError

    def _gather_parameters(self) -> None:
        """After the update: give this rank the parameters it keeps (nothing at stages 0, 3)."""

    def _zero_grad(self) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def step(self) -> None:
        """Average the gradients over the ranks, run Adam on this rank's shards, share them."""
        self._reduce_gradients()
        self.optimizer.step()
        self._gather_parameters()

    def zero_grad(self) -> None:
        """Zero the gradient buffers this rank keeps (they stay allocated, as ZeRO's do)."""
        with torch.no_grad():
            self._zero_grad()

    # -- what this rank holds ---------------------------------------------------------------
    @property
    def state(self) -> dict:
        """Optimizer state per shard (Adam's m, v, step; ``master`` when offloaded)."""
        return self.optimizer.state

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Inside the block every parameter is whole on every rank (ZeRO-3 gathers them)."""
        yield

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """A copy of every trainable parameter, whole, by qualified name."""
        with self.gathered(), torch.no_grad():
            return {name: view.clone() for u in self.units
                    for name, view in zip(u.names, u.views(u.full))}  # fmt: skip

    def state_tensors(self) -> dict[str, list[torch.Tensor]]:
        """The tensors this rank keeps between steps, by category (params, grads, optimizer)."""
        return {
            "params": self._kept_params(),
            "grads": self._kept_grads(),
            "optimizer": _tensors(list(self.state.values())),
        }

    def _kept_params(self) -> list[torch.Tensor]:
        """Parameter buffers kept between steps: each unit's whole flat parameters."""
        return [u.full for u in self.units]

    def _kept_grads(self) -> list[torch.Tensor]:
        """Gradient buffers kept between steps: each unit's whole flat gradient."""
        return [u.flat_grad for u in self.units]

    def offloaded_tensors(self) -> list[torch.Tensor]:
        """The tensors kept in CPU memory by offload (none without it)."""
        return _tensors(list(self.state.values())) if self.offload else []

    def held_bytes(self) -> dict[str, int]:
        """Bytes of what this rank keeps, counted from the storages themselves, with the keys of
        :func:`~minitorch_dist.memory.model_state_bytes`: device ``params``, ``grads``,
        ``optimizer`` and their ``total``, and the ``offloaded`` bytes in CPU memory."""
        held = {k: storage_bytes(v) for k, v in self.state_tensors().items()}
        held["offloaded"] = storage_bytes(self.offloaded_tensors())
        held["optimizer"] -= held["offloaded"]
        held["total"] = held["params"] + held["grads"] + held["optimizer"]
        return held

    def comm_payloads(self) -> dict[str, int]:
        """Full-size bytes of each kind of collective one step issues (the S of the ring
        formulas), summed over units: what :class:`~minitorch_dist.comm.CommCounter` books."""
        raise NotImplementedError

    def _unit_bytes(self) -> int:
        """Bytes of every unit's padded flat buffer together: one collective's S, all units."""
        return sum(u.padded_numel * u.params[0].element_size() for u in self.units)
