"""Mutants of lab 0's task (see tests/test_mutants.py for what a mutant is and how it is run)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from mutants_common import Mutant

from minitorch_dist.comm import all_gather_into_tensor, reduce_scatter_tensor


def _no_all_gather(tensor: torch.Tensor) -> torch.Tensor:
    """Reduce-scatters into this rank's slice of the tensor and stops: the other chunks stay."""
    n, r = dist.get_world_size(), dist.get_rank()
    flat = tensor.view(-1)
    k = flat.numel() // n
    chunk = torch.empty(k, dtype=flat.dtype)
    reduce_scatter_tensor(chunk, flat)
    flat[r * k : (r + 1) * k] = chunk
    return tensor


def _gather_unreduced(tensor: torch.Tensor) -> torch.Tensor:
    """All-gathers each rank's own chunk of its input without reducing it first."""
    n, r = dist.get_world_size(), dist.get_rank()
    flat = tensor.view(-1)
    k = flat.numel() // n
    all_gather_into_tensor(flat, flat[r * k : (r + 1) * k].clone())
    return tensor


def _plain_all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """Right sum, but not built from the halves the task asks for."""
    dist.all_reduce(tensor)
    return tensor


_TARGET = "minitorch_dist.comm.halves:all_reduce_by_halves"
MUTANTS_LAB00: list[Mutant] = [
    Mutant("lab00.1", "no-all-gather", _TARGET, _no_all_gather, r"does not hold the sum"),
    Mutant("lab00.1", "gather-unreduced", _TARGET, _gather_unreduced, r"does not hold the sum"),
    Mutant("lab00.1", "plain-all-reduce", _TARGET, _plain_all_reduce, r"not dist.all_reduce"),
]
