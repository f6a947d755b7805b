"""Expert capacity, the number of slots each expert has in a batch (lab 10, task lab10.2): the
one function of lab10.2 that needs no torch, so it sits in this small file of plain Python.

Each expert takes at most C = ceil(T / E * cf * k) of a batch's T * k token choices (Lepikhin et
al. 2021, "GShard", section 2.2; Fedus et al. 2022, section 2.2, "expert capacity"): cf = 1 is
exactly enough under perfectly uniform routing, cf > 1 leaves slack for imbalance.
``min_capacity`` (DeepSpeed's default is 4) floors C: in a small test it can hide every drop.

Everything that needs C calls this function: the MoE block and the expert-parallel layer
(through :mod:`minitorch_dist.models.routing`, where lab10.2's other half, ``apply_capacity``,
drops the choices beyond C), and the closed forms that predict the bytes of a capacity buffer
(:mod:`minitorch_dist.expert_parallel.cost`), which run without torch.
"""

from __future__ import annotations

import math
from fractions import Fraction

from minitorch_dist.checks import check_int, check_positive

__all__ = ["check_top_k", "expert_capacity"]


def check_top_k(top_k: int, experts: int) -> int:
    """``top_k`` if 1 <= top_k <= experts; a ValueError "top_k=3 exceeds experts=2" otherwise."""
    check_int("top_k", top_k)
    if top_k > experts:
        raise ValueError(f"top_k={top_k} exceeds experts={experts}")
    return top_k


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
