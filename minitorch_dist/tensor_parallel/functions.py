"""The region-crossing autograd Functions of tensor and sequence parallelism.

Megatron-LM (Shoeybi et al. 2019, section 3, Figure 3) brackets each tensor-parallel region of a
layer with two conjugate operators:

    f  (copy_to_tp)       forward: identity          backward: all-reduce      (region entry)
    g  (reduce_from_tp)   forward: all-reduce        backward: identity        (region exit)

Entry: every rank multiplies the same input by its slice of a column-parallel weight, so the
input's gradient is the SUM of the ranks' partial gradients. Exit: each rank holds a partial sum
of a row-parallel product; the forward adds them up, and the sum's gradient is the same on every
rank.

Sequence parallelism (Korthikanti et al. 2022, section 4.2.2) keeps the activations outside the
regions split along the sequence and swaps each all-reduce for its two halves:

    g  (gather_from_sp)        forward: all-gather      backward: reduce-scatter
    g_bar (reduce_scatter_to_sp) forward: reduce-scatter  backward: all-gather
    scatter_to_sp              forward: keep my slice   backward: all-gather

Our activations are (b, s, h), so the sequence is ``dim=1`` (Megatron lays them out (s, b, h)
and uses dim 0). With one rank every function is the identity. The copying collectives they are
built from, and ``group_size``/``group_rank``, live in :mod:`minitorch_dist.comm`.
"""

from __future__ import annotations

from typing import Any

import torch

from minitorch_dist.checks import check_divisible
from minitorch_dist.comm.collectives import (
    all_gather_copy,
    all_reduce_copy,
    reduce_scatter_copy,
    split_copy,
)
from minitorch_dist.comm.groups import Group, group_size

__all__ = [
    "CopyToTP",
    "GatherFromSP",
    "ReduceFromTP",
    "ReduceScatterToSP",
    "ScatterToSP",
    "copy_to_tp",
    "gather_from_sp",
    "reduce_from_tp",
    "reduce_scatter_to_sp",
    "scatter_to_sp",
]

# The collectives the tasks call: all_reduce_copy (lab07.1), all_gather_copy, reduce_scatter_copy
# and split_copy (lab07.5), each returning a new tensor (minitorch_dist.comm.collectives says why).


# -- Megatron's f and g -----------------------------------------------------------------------
class CopyToTP(torch.autograd.Function):
    """Identity in forward, all-reduce in backward: the ``f`` operator of Megatron-LM
    (Shoeybi et al. 2019, section 3), where a tensor-parallel region begins."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)  # a view, not a copy: nothing new to store

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        # BEGIN SOLUTION lab07.1: f's backward sums the ranks' partial input gradients
        return all_reduce_copy(grad, ctx.group), None
        # END SOLUTION


class ReduceFromTP(torch.autograd.Function):
    """All-reduce in forward, identity in backward: the ``g`` operator of Megatron-LM
    (Shoeybi et al. 2019, section 3), where a tensor-parallel region ends."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        # BEGIN SOLUTION lab07.1: g's forward sums the ranks' partial outputs
        return all_reduce_copy(x, group)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None  # every rank already holds the whole gradient of the sum


# -- sequence parallelism's halves --------------------------------------------------------------
class GatherFromSP(torch.autograd.Function):
    """All-gather along ``dim`` in forward, reduce-scatter in backward: sequence parallelism's
    region entry (Korthikanti et al. 2022, section 4.2.2, operator g)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
        ctx.group, ctx.dim = group, dim
        # BEGIN SOLUTION lab07.5: gather every rank's tokens; backward reduce-scatters
        return all_gather_copy(x, group, dim)  # (b, s/t, h) -> (b, s, h)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        # BEGIN SOLUTION lab07.5: the gradient of a gather is a reduce-scatter
        # (b, s, h) -> (b, s/t, h)
        return reduce_scatter_copy(grad, ctx.group, ctx.dim), None, None
        # END SOLUTION


class ReduceScatterToSP(torch.autograd.Function):
    """Reduce-scatter along ``dim`` in forward, all-gather in backward: sequence parallelism's
    region exit (Korthikanti et al. 2022, section 4.2.2, operator g-bar)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
        ctx.group, ctx.dim = group, dim
        # BEGIN SOLUTION lab07.5: sum the partial outputs, keep my tokens; backward all-gathers
        return reduce_scatter_copy(x, group, dim)  # (b, s, h) -> (b, s/t, h)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        # BEGIN SOLUTION lab07.5: the gradient of a reduce-scatter is an all-gather
        # (b, s/t, h) -> (b, s, h)
        return all_gather_copy(grad, ctx.group, ctx.dim), None, None
        # END SOLUTION


class ScatterToSP(torch.autograd.Function):
    """Keep this rank's slice along ``dim`` in forward, all-gather in backward (a replicated
    tensor enters the sequence-parallel part)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
        ctx.group, ctx.dim = group, dim
        # BEGIN SOLUTION lab07.5: keep my tokens; backward all-gathers the gradient
        return split_copy(x, group, dim)  # (b, s, h) -> (b, s/t, h)
        # END SOLUTION

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        # BEGIN SOLUTION lab07.5: the other ranks' slices had no gradient from me: gather
        return all_gather_copy(grad, ctx.group, ctx.dim), None, None
        # END SOLUTION


# -- function forms: the identity on one rank ------------------------------------------------
def copy_to_tp(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """Megatron's f: identity forward, all-reduce of the gradient over ``group`` backward."""
    return x if group_size(group) == 1 else CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group: Group = None) -> torch.Tensor:
    """Megatron's g: all-reduce over ``group`` forward, identity backward."""
    return x if group_size(group) == 1 else ReduceFromTP.apply(x, group)


def gather_from_sp(x: torch.Tensor, group: Group = None, dim: int = 1) -> torch.Tensor:
    """All-gather the sequence (``dim``) forward, reduce-scatter the gradient backward."""
    return x if group_size(group) == 1 else GatherFromSP.apply(x, group, dim)


def reduce_scatter_to_sp(x: torch.Tensor, group: Group = None, dim: int = 1) -> torch.Tensor:
    """Reduce-scatter along the sequence forward, all-gather the gradient backward. ValueError
    unless the sequence divides by the group size."""
    t = group_size(group)
    check_divisible("seq_len", x.shape[dim], "tp", t)
    return x if t == 1 else ReduceScatterToSP.apply(x, group, dim)


def scatter_to_sp(x: torch.Tensor, group: Group = None, dim: int = 1) -> torch.Tensor:
    """This rank's contiguous slice of the sequence forward, all-gather backward. ValueError
    unless the sequence divides by the group size."""
    t = group_size(group)
    check_divisible("seq_len", x.shape[dim], "tp", t)
    return x if t == 1 else ScatterToSP.apply(x, group, dim)
