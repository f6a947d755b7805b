"""What expert parallelism sends, in closed form (arithmetic only: no communication, no plotting).

Dispatch sends each of a rank's T * k token choices (h numbers each) to the rank that owns its
expert; under uniform routing a share 1/ep of them stays home, so one dispatch sends
T k h (ep - 1) / ep elements per rank (Lepikhin et al. 2021, section 3.2; Rajbhandari et al.
2022, "DeepSpeed-MoE", section 5.2). Combine returns the same rows, and backward repeats both
with the gradients: four all-to-alls per MoE layer per step, six when full recomputation
runs the layer's forward (and so its dispatch and combine) again before its backward.

A dense capacity buffer (GShard's dispatch) sends E * C rows per rank whatever the routing,
C = ceil(T k cf / E): about cf times the dropless bytes under uniform routing, the same bytes
under any imbalance (the excess is dropped, the shortfall padded with zeros).
"""

from __future__ import annotations

from minitorch_dist.checks import check_choice, check_divisible, check_int, check_positive
from minitorch_dist.models.moe_configs import slots_for

__all__ = [
    "ALL_TO_ALLS_PER_STEP",
    "all_to_all_bytes",
    "all_to_alls_per_step",
    "capacity_buffer_bytes",
    "ep_step_bytes",
]

ALL_TO_ALLS_PER_STEP = 4  # dispatch, combine; and both again in backward with the gradients


def _checks(tokens: int, hidden: int, ep: int, bytes_per_element: int) -> None:
    check_int("tokens", tokens, minimum=0)
    check_int("hidden", hidden)
    check_int("ep", ep)
    check_int("bytes_per_element", bytes_per_element)


def all_to_all_bytes(
    *, tokens: int, top_k: int, hidden: int, ep: int, bytes_per_element: int = 2
) -> int:
    """Bytes one rank sends in one dropless dispatch of its ``tokens`` tokens under uniform
    routing: T k h (ep - 1) / ep elements. ValueError if T k is not divisible by ep (uniform
    routing then cannot be exact)."""
    _checks(tokens, hidden, ep, bytes_per_element)
    check_int("top_k", top_k)
    per_rank = check_divisible("tokens * top_k", tokens * top_k, "ep", ep)
    return per_rank * (ep - 1) * hidden * bytes_per_element


def capacity_buffer_bytes(
    *,
    tokens: int,
    top_k: int,
    hidden: int,
    ep: int,
    experts: int,
    capacity_factor: float,
    bytes_per_element: int = 2,
    min_capacity: int = 0,
) -> int:
    """Bytes one rank sends in one dense capacity-buffer dispatch: the E/ep * C rows bound for
    each of the ep - 1 other ranks, C = ``expert_capacity(T, E, cf, top_k=k, min_capacity=...)``; independent of
    the routing."""
    _checks(tokens, hidden, ep, bytes_per_element)
    check_positive("capacity_factor", capacity_factor)
    local = check_divisible("experts", experts, "ep", ep)
    check_int("top_k", top_k, maximum=experts)
    check_int("min_capacity", min_capacity, minimum=0)
    c = max(slots_for(tokens, experts, capacity_factor, top_k), min_capacity)  # C
    return local * c * (ep - 1) * hidden * bytes_per_element


def all_to_alls_per_step(recompute: str = "none") -> int:
    """All-to-alls of one MoE layer per step: dispatch and combine forward, both again backward
    (4); with ``recompute="full"`` the recomputed forward dispatches and combines once more (6).
    ``"selective"`` recomputes attention only, not the MoE layer (4)."""
    check_choice("recompute", recompute, ("none", "selective", "full"))
    return ALL_TO_ALLS_PER_STEP + (2 if recompute == "full" else 0)


def ep_step_bytes(dispatch_bytes: int, *, moe_layers: int = 1, recompute: str = "none") -> int:
    """Bytes one rank sends per training step: four all-to-alls of ``dispatch_bytes`` (dispatch
    and combine, forward and backward) per MoE layer, six with full recomputation."""
    check_int("moe_layers", moe_layers)
    return all_to_alls_per_step(recompute) * moe_layers * dispatch_bytes
