"""A mixture-of-experts block's routing: the top-k router and the load-balancing loss (lab 10,
task lab10.1), expert capacity and the drop policy (task lab10.2).

These are the functions you write in lab 10. They live beside the model because the single-
process MoE block (:mod:`minitorch_dist.models.moe`) routes with them too: the reference and the
expert-parallel layer run the same routing, and the lab's graded tests check these functions
against hand-worked examples. ``minitorch_dist.expert_parallel`` exports them under the same
names.

Routing (Shazeer et al. 2017, section 2.1; Fedus et al. 2022, section 2.1): softmax over the E
experts' logits in at least fp32, the k largest probabilities per token, ties to the lower expert
index, weights renormalised over the k (Mixtral, DeepSeek-V3) or not (Switch, Qwen1.5-MoE).

The load-balancing loss in its three published normalisations, all unscaled (alpha = 1), with
router_probs p (T, E), P_i = mean_t p_ti the router's mean probability of expert i:

- ``"switch"`` (Fedus et al. 2022, equations 4-6): f_i = share of tokens whose top-1 expert is i;
  loss = E * sum_i f_i P_i. It counts only the first choice, whatever k is.
- ``"topk"`` (DeepSpeed's ``topkgating``): c_i = share of tokens that chose i among their k
  (sum_i c_i = k); loss = E / k * sum_i c_i P_i. Uniform routing gives 1, as Switch.
- ``"mixtral"`` (Hugging Face's ``load_balancing_loss_func`` for Mixtral): E * sum_i c_i P_i,
  the same statistics without the 1/k: k times ``"topk"``, so uniform routing gives k.

All three are minimised (at 1, 1 and k) by uniform routing, and all three are computed over the
tokens they are given: per micro-batch, the loss of a global batch is not the mean of its parts'.

Capacity: each expert takes at most C = ceil(T / E * cf * k) of a batch's T * k choices (Lepikhin
et al. 2021, "GShard", section 2.2; Fedus et al. 2022, section 2.2, "expert capacity"): cf = 1 is
exactly enough under perfectly uniform routing, cf > 1 leaves slack for imbalance.
``expert_capacity``, lab10.2's formula for C, is written in :mod:`minitorch_dist.models.capacity`
(plain Python: the torch-free byte counts of expert parallelism need it too) and exported here
under the same name. ``apply_capacity``, below, drops the choices beyond C, first come first
served in token order (then slot order within a token);
a dropped choice contributes nothing, and a token all of whose choices are dropped passes through
the block's residual connection unchanged. ``min_capacity`` (DeepSpeed's default is 4) floors C:
in a small test it can hide every drop.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minitorch_dist.checks import check_choice, check_int
from minitorch_dist.models.capacity import check_top_k, expert_capacity

__all__ = [
    "LOSS_STYLES",
    "apply_capacity",
    "expert_capacity",
    "load_balancing_loss",
    "top_k_route",
]

LOSS_STYLES = ("switch", "topk", "mixtral")


def top_k_route(
    logits: torch.Tensor, k: int, *, normalize: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Route T tokens from their router ``logits`` (T, E): returns ``(weights, experts, probs)``,
    weights (T, k) in the probs' dtype, experts (T, k) int64 in decreasing probability (ties to
    the lower index), probs (T, E) the softmax, computed in fp32 or wider.

    ``normalize``: divide the k weights by their sum (Mixtral); False keeps the raw p (Switch).
    A ValueError "top_k=3 exceeds experts=2" when k > E.
    """
    check_top_k(k, logits.shape[-1])
    # BEGIN SOLUTION lab10.1: softmax in fp32, the k largest (stable: ties to the lower index)
    probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).softmax(-1)  # (T, E)
    experts = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :k]  # (T, k)
    weights = probs.gather(-1, experts)  # (T, k)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, experts, probs
    # END SOLUTION


def load_balancing_loss(
    router_probs: torch.Tensor, *, top_k: int = 1, style: str = "switch"
) -> torch.Tensor:
    """The auxiliary loss (a scalar, unscaled) of ``router_probs`` (T, E) under ``style``
    "switch" | "topk" | "mixtral" (see the module docstring); ``top_k`` is the k the choices are
    counted over (not used by "switch", which counts top-1 choices by definition)."""
    check_choice("style", style, LOSS_STYLES)
    experts = router_probs.shape[-1]
    check_top_k(top_k, experts)
    # BEGIN SOLUTION lab10.1: fractions of choices (no gradient) times mean probabilities
    mean_probs = router_probs.mean(0)  # P_i, (E,): the gradient flows through these
    k = 1 if style == "switch" else top_k
    chosen = torch.topk(router_probs.detach(), k, dim=-1).indices  # (T, k)
    share = F.one_hot(chosen, experts).sum(1).to(router_probs.dtype).mean(0)  # c_i, sums to k
    loss = experts * (share * mean_probs).sum()
    return loss / top_k if style == "topk" else loss
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
