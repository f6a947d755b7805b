"""Collectives that return a new tensor and leave their input alone, for autograd Functions.

``dist.all_reduce`` and its kin write into the tensor they are given; an autograd Function must
not overwrite a tensor that autograd may have saved for backward. Each function here copies its
input into a fresh buffer, runs the collective on it inside the backend's scope
(:func:`~minitorch_dist.scopes.backend_scope`) and returns a fresh copy of the buffer: gloo's
worker thread drops its reference to the buffer a moment earlier or later from run to run, so a
memory tracker must neither adopt the buffer nor be handed it (measured: an all-reduce output
counted on one rank and not the other). On a GPU, NCCL needs no such copy; Megatron has none.

Tensor parallelism's region operators (:mod:`minitorch_dist.tensor_parallel.functions`) are
built from these; ``dim`` is the dimension gathered, scattered or split (the sequence, ``dim=1``,
in our (b, s, h) activations). Context parallelism's all-gather attention and Ulysses
(:mod:`minitorch_dist.context_parallel.alternatives`) use :func:`all_gather_stacked`,
:func:`reduce_scatter_stacked` and :func:`all_to_all_copy`: the first two keep one rank's part
apart from the others' (a leading dimension of size n) and return the collective's own output
buffer, with no second copy, as the all-gather attention's memory was always measured.

Each collective has this one name; the package calls it by that name (``tests/test_signatures.py``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.checks import check_divisible
from minitorch_dist.comm.groups import Group, group_rank, group_size
from minitorch_dist.comm.shim import all_gather_into_tensor, reduce_scatter_tensor
from minitorch_dist.scopes import backend_scope

__all__ = [
    "all_gather_copy",
    "all_gather_stacked",
    "all_reduce_copy",
    "all_to_all_copy",
    "reduce_scatter_copy",
    "reduce_scatter_stacked",
    "split_copy",
]


def all_reduce_copy(x: torch.Tensor, group: Group, op: Any = dist.ReduceOp.SUM) -> torch.Tensor:
    """The sum (or ``op``) of ``x`` over the ranks of ``group``, in a new tensor."""
    if group_size(group) == 1:
        return x.clone()
    with backend_scope():
        buffer = x.contiguous().clone()  # (...) never the input: it may be saved for backward
        dist.all_reduce(buffer, op=op, group=group)
        return buffer.clone()


def all_gather_copy(x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
    """The ranks' ``x`` concatenated along ``dim`` in rank order: (..., s/t, ...) -> (..., s, ...)."""
    t = group_size(group)
    with backend_scope():
        local = x.movedim(dim, 0).contiguous()  # (s/t, ...): the gathered dim first
        buffer = local.new_empty((t * local.shape[0], *local.shape[1:]))  # (s, ...)
        all_gather_into_tensor(buffer, local, group=group)
        # one contiguous copy: a non-contiguous result would be copied again by EACH linear that
        # multiplies it (wq, wk, wv) and saved three times (measured); Megatron's (s, b, h)
        # layout gathers along dim 0 and needs no copy at all
        return buffer.movedim(0, dim).clone(memory_format=torch.contiguous_format)


def reduce_scatter_copy(x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
    """This rank's slice along ``dim`` of the sum of the ranks' ``x``: (..., s, ...) ->
    (..., s/t, ...). ValueError unless ``dim`` divides by the group size."""
    t = group_size(group)
    check_divisible("seq_len", x.shape[dim], "tp", t)
    with backend_scope():
        full = x.movedim(dim, 0).contiguous()  # (s, ...)
        buffer = full.new_empty((full.shape[0] // t, *full.shape[1:]))  # (s/t, ...)
        reduce_scatter_tensor(buffer, full, group=group)
        return buffer.movedim(0, dim).clone(memory_format=torch.contiguous_format)


def split_copy(x: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
    """This rank's contiguous slice of ``x`` along ``dim`` (no communication). ValueError unless
    ``dim`` divides by the group size."""
    t = group_size(group)
    check_divisible("seq_len", x.shape[dim], "tp", t)
    return x.chunk(t, dim=dim)[group_rank(group)].contiguous()  # (b, s/t, h): my tokens


def all_gather_stacked(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Every rank's ``x`` stacked in rank order: (...) on each rank -> (n, ...)."""
    n = group_size(group)
    out = x.new_empty((n * x.shape[0], *x.shape[1:]))  # gloo gathers along dim 0
    with backend_scope():
        all_gather_into_tensor(out, x.contiguous(), group=group)
    return out.view(n, *x.shape)


def reduce_scatter_stacked(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Entry r of the ranks' summed ``x`` on rank r: (n, ...) on each rank -> (...)."""
    out = x.new_empty(x.shape[1:])
    with backend_scope():
        reduce_scatter_tensor(out, x.contiguous().flatten(0, 1), group=group)
    return out


def all_to_all_copy(
    x: torch.Tensor, group: Group, scatter_dim: int, gather_dim: int
) -> torch.Tensor:
    """Cut ``x`` into n pieces along ``scatter_dim``, send piece j to rank j, and concatenate
    what arrives along ``gather_dim`` in rank order, in a new tensor."""
    n = group_size(group)
    inputs = [t.contiguous() for t in x.chunk(n, dim=scatter_dim)]
    outputs = [torch.empty_like(t) for t in inputs]
    with backend_scope():
        dist.all_to_all(outputs, inputs, group=group)
    return torch.cat(outputs, dim=gather_dim)
