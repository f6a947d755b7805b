"""Gradient clipping on a grid: one norm for the whole model, though no rank holds the model.

``torch.nn.utils.clip_grad_norm_`` computes ||g|| over the gradients it is given. On a grid each
rank holds a piece: its pipeline stage's layers (pp), a 1/t slice of each of their weights (tp),
and after ZeRO-1's reduce-scatter a 1/(dp cp) shard of those gradients. The model's norm is

    ||g||^2 = sum over pp stages, tp slices and ZeRO shards of this rank's sum of squares

with one exception: parameters that every tp rank holds WHOLE (the RMSNorm weights, and the
copies of a key/value head when tp > kv_heads) have the same gradient on those ranks and must be
counted once, not t times. Megatron-LM does exactly this in ``get_grad_norm_fp32`` (the sum of
squares all-reduced over the model-parallel group, with ``param_is_not_tensor_parallel_duplicate``
keeping replicas out) and, with its distributed optimizer, over the data-parallel shards too.
Two plausible mistakes, both shown by the chapter's tests: clipping each rank on its local norm
(each rank scales by a different factor: the replicas of a norm weight drift apart, the model is
clipped by the wrong amount), and summing replicated norms t times (the norm is too large).

:class:`ClippedZeroStage1` is chapter 6's ZeRO-1, clipping between its reduce-scatter and its
update -- where the averaged gradient first exists, as a shard. It is
:func:`minitorch_dist.zero.clip_grad_norm_` (chapter 6: the all-reduce of the shards' sums of
squares, torch's factor) with the grid's norm: summed over tp and pp as well, replicas once.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from minitorch_dist.comm.groups import Group
from minitorch_dist.tensor_parallel.sequence import norm_weights
from minitorch_dist.zero import ZeroStage1
from minitorch_dist.zero.clip import clip_coefficient, scale_grads_

__all__ = ["ClippedZeroStage1", "clip_coefficient", "grid_grad_norm", "tp_replicated"]


def tp_replicated(stage: nn.Module, tp_group: Group) -> dict[int, bool]:
    """For the parameters of ``stage`` that several tp ranks hold whole, by ``id``: whether THIS
    rank counts it in the norm (the first rank of each set of copies does). Norm weights: tp rank
    0; a copied key/value head (tp = m * kv_heads): the first of its m holders."""
    t, r = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    out = {id(w): r == 0 for w in norm_weights(stage)}
    for module in stage.modules():
        kv = getattr(module, "kv_heads", None)
        if kv is not None and hasattr(module, "wk") and kv % t:
            for w in (module.wk.weight, module.wv.weight):
                out[id(w)] = r % (t // kv) == 0
    return out


def grid_grad_norm(optimizer: ZeroStage1, grid: Any, counted: list[torch.Tensor]) -> torch.Tensor:
    """The whole model's gradient norm from this rank's ZeRO-1 shards (after the reduce-scatter:
    ``unit.shard.grad`` holds the dp x cp average). ``counted[i]`` is 1 where unit i's shard
    counts on this rank, 0 on a tp replica counted elsewhere. The same fp64 value on every rank."""
    # BEGIN SOLUTION lab11.1: masked sum of squares, summed over dp x cp, tp and pp; its root
    sq = torch.zeros((), dtype=torch.float64)
    for unit, mask in zip(optimizer.units, counted):
        sq += (mask * unit.shard.grad.double() ** 2).sum()  # this rank's piece
    dist.all_reduce(sq, group=grid.group("dp_cp"))  # ZeRO shards: disjoint pieces
    dist.all_reduce(sq, group=grid.group("tp"))  # tp slices (replicas counted once)
    dist.all_reduce(sq, group=grid.group("pp"))  # pipeline stages: disjoint layers
    return sq.sqrt()
    # END SOLUTION


class ClippedZeroStage1(ZeroStage1):
    """ZeRO-1 (chapter 6) whose step clips the averaged gradient to ``max_norm`` (None: no
    clipping, the norm is still computed) by the norm over the whole ``grid``. ``replicated``
    (from :func:`tp_replicated`) names the tp-replicated parameters and where each is counted.
    ``last_norm`` is the norm of the last step, before clipping."""

    def __init__(
        self,
        params: Any,
        optimizer_class: type[torch.optim.Optimizer],
        *,
        grid: Any,
        max_norm: float | None = None,
        replicated: dict[int, bool] | None = None,
        norm_fn: Any = None,
        **kwargs: Any,
    ) -> None:
        if max_norm is not None and not max_norm > 0:
            raise ValueError(f"max_norm must be a number > 0 (or None), got {max_norm!r}")
        self.grid, self.max_norm = grid, max_norm
        self.replicated = dict(replicated or {})
        self.norm_fn = grid_grad_norm if norm_fn is None else norm_fn
        self.last_norm: float | None = None
        self._counted: list[torch.Tensor] | None = None
        super().__init__(params, optimizer_class, **kwargs)

    def counted(self) -> list[torch.Tensor]:
        """Per unit, this rank's shard of a 0/1 mask: 1 where the gradient counts here."""
        if self._counted is None:
            self._counted = []
            for u in self.units:
                ones = [
                    torch.full_like(p, float(self.replicated.get(id(p), True))) for p in u.params
                ]
                lo, hi = u.shard_range(self.rank)
                # clone: a slice would keep the whole (N*S,) flat mask alive, 2 bytes a parameter
                self._counted.append(u.flatten(ones)[lo:hi].clone())
        return self._counted

    def _reduce_gradients(self) -> None:
        super()._reduce_gradients()  # shard.grad: this rank's shard of the dp x cp average
        norm = self.norm_fn(self, self.grid, self.counted())
        self.last_norm = float(norm)
        if self.max_norm is not None:  # zero.clip_grad_norm_'s scaling, by the grid's norm
            scale_grads_([u.shard.grad for u in self.units], self.max_norm, norm)
