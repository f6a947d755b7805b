"""Expert capacity and the drop policy (lab 10, task lab10.2).

Each expert takes at most C = ceil(T / E * cf * k) of a batch's T * k choices (Lepikhin et al.
2021, "GShard", section 2.2; Fedus et al. 2022, section 2.2, "expert capacity"): cf = 1 is
exactly enough under perfectly uniform routing, cf > 1 leaves slack for imbalance. The choices
beyond C are dropped, first come first served in token order (then slot order within a token);
a dropped choice contributes nothing, and a token all of whose choices are dropped passes through
the block's residual connection unchanged. ``min_capacity`` (DeepSpeed's default is 4) floors C:
in a small test it can hide every drop.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from minitorch_dist.checks import check_int, check_positive
from minitorch_dist.models.moe_configs import check_top_k

__all__ = ["apply_capacity", "expert_capacity"]


def expert_capacity(
    tokens: int, experts: int, capacity_factor: float, *, top_k: int = 1, min_capacity: int = 0
) -> int:
    """C = max(ceil(T / E * cf * k), min_capacity), slots per expert for ``tokens`` tokens.

    cf is read as the decimal it prints as (``1.1`` is 11/10: T=1000, E=10 gives 110, where float
    arithmetic, 1000 / 10 * 1.1 = 110.00000000000001, would give 111). A ValueError names a
    capacity_factor <= 0 or a top_k > experts.
    """
    check_int("tokens", tokens, minimum=0)
    check_int("experts", experts)
    check_positive("capacity_factor", capacity_factor)
    check_top_k(top_k, experts)
    check_int("min_capacity", min_capacity, minimum=0)
    # BEGIN SOLUTION lab10.2: ceil(T k cf / E), cf as its printed decimal, floored by min_capacity
    cf = Fraction(repr(float(capacity_factor)))
    return max(math.ceil(Fraction(tokens * top_k, experts) * cf), min_capacity)
    # END SOLUTION


def apply_capacity(expert_indices: torch.Tensor, experts: int, capacity: int) -> torch.Tensor:
    """Keep mask (T, k) bool for the choices ``expert_indices`` (T, k): a choice is kept when
    fewer than ``capacity`` earlier choices -- earlier tokens, or earlier slots of the same
    token -- went to the same expert."""
    check_int("capacity", capacity, minimum=0)
    # BEGIN SOLUTION lab10.2: each choice's place in its expert's queue, token-major order
    onehot = F.one_hot(expert_indices.reshape(-1), experts)  # (T*k, E), token-major
    position = (onehot.cumsum(0) * onehot).sum(-1) - 1  # (T*k,): 0 for an expert's first
    return (position < capacity).view_as(expert_indices)
    # END SOLUTION
