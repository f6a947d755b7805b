"""Rank-aware printing and seeding: output from N ranks that reads well and repeats exactly.

Under ``launch`` every rank's output is captured and relayed after the join in rank order, so a
plain ``print`` is already deterministic there. These helpers are for code that also runs under
torchrun, where the ranks' output interleaves as it comes.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["get_rank", "print_in_rank_order", "rank0_print", "seed_all"]


def get_rank() -> int:
    """This process's rank, or 0 outside a process group."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def rank0_print(*args: Any, **kwargs: Any) -> None:
    """``print`` on rank 0 only (everywhere, outside a process group)."""
    if get_rank() == 0:
        print(*args, **kwargs)


def print_in_rank_order(*args: Any, **kwargs: Any) -> None:
    """Every rank prints ``[rank k] ...``, rank 0 first. A collective: every rank must call it."""
    if not (dist.is_available() and dist.is_initialized()):
        print(*args, **kwargs)
        return
    for r in range(dist.get_world_size()):
        if r == dist.get_rank():
            print(f"[rank {r}]", *args, flush=True, **kwargs)
        dist.barrier()


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) so a run repeats exactly."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
