"""DeepSeek-V3's auxiliary-loss-free load balancing (DeepSeek-AI 2024, section 2.1.2).

Each expert i gets a bias b_i, added to the router's scores for the top-k *selection* only
(eq. 16): a token goes to the k experts of largest s_ti + b_i, but each chosen expert's gate
weight comes from the unbiased s_ti (renormalised over the k, as ``Router`` does). The bias is
not a trained parameter: after each step, every expert's load (the choices it received over the
whole batch, all micro-batches and ranks) is compared with the mean load, and

    b_i <- b_i - speed   if expert i was overloaded,   b_i + speed   if it was underloaded,

``b += speed * sign(mean - load)`` (the paper's "bias update speed" gamma: 0.001 for the first
14.3T tokens, then 0, section 4.2). No gradient of a balancing term reaches the model.

A small sequence-wise balance loss complements it (eqs. 17-20), so that no single sequence is
extremely unbalanced: per sequence of T tokens, f_i = E / (k T) * (tokens whose unbiased top-k
holds i), P_i = mean_t s'_ti (the scores normalised to sum to 1 over the experts), and
L_Bal = alpha * sum_i f_i P_i, averaged here over the batch's sequences (alpha = 0.0001 in
DeepSeek-V3). Under perfectly even routing sum_i f_i P_i = 1.

DeepSeek-V3 computes its scores with a sigmoid; :class:`BiasedRouter` keeps ``Router``'s softmax,
so that a block with and without the bias differs only by the bias. The loads are counted in
``BiasedRouter.load`` at every forward since the last :func:`update_routing_bias`: a recomputed
forward (activation checkpointing) counts its tokens twice, so call the update on models
without recomputation, or count the loads yourself.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from minitorch_dist.checks import check_int, check_positive
from minitorch_dist.models.moe_configs import check_top_k
from minitorch_dist.models.router import Router
from minitorch_dist.models.routing import load_balancing_loss, top_k_route

__all__ = ["BiasedRouter", "biased_routers", "sequence_balance_loss", "update_routing_bias"]


class BiasedRouter(Router):
    """gate: Linear(h, E, no bias) and ``bias`` (E,), a buffer; forward(x (T, h)) -> (weights
    (T, k), experts (T, k), probs (T, E)) as ``Router``'s, the experts chosen by probs + bias
    (ties to the lower index), the weights taken from the unbiased probs."""

    def __init__(
        self,
        hidden: int,
        experts: int,
        top_k: int,
        *,
        normalize: bool = True,
        router_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(hidden, experts, top_k, normalize=normalize, router_dtype=router_dtype)
        self.register_buffer("bias", torch.zeros(experts))  # moved by update_routing_bias only
        self.register_buffer("load", torch.zeros(experts, dtype=torch.long), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dtype = torch.promote_types(x.dtype, self.router_dtype)  # fp32 for a bf16 model
        logits = F.linear(x.to(dtype), self.gate.weight.to(dtype))  # (T, E)
        _, _, probs = top_k_route(logits, self.top_k)  # lab10.1's softmax: probs (T, E)
        scores = probs.detach() + self.bias.to(probs.dtype)  # selection only (eq. 16)
        # lab10.1's top-k of the scores: a softmax in fp64 keeps the order of these fp32 scores
        # exactly (ties to the lower index, as theirs), so it chooses the k largest of them
        chosen = top_k_route(scores.double(), self.top_k)[1]  # (T, k)
        weights = torch.take_along_dim(probs, chosen, dim=-1)  # (T, k): the unbiased affinities
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        with torch.no_grad():
            self.load += torch.bincount(chosen.reshape(-1), minlength=self.experts)
        return weights, chosen, probs


def biased_routers(model: nn.Module) -> list[BiasedRouter]:
    """Every :class:`BiasedRouter` in ``model``, in module order."""
    return [m for m in model.modules() if isinstance(m, BiasedRouter)]


@torch.no_grad()
def update_routing_bias(
    model: nn.Module, speed: float, *, group: dist.ProcessGroup | None = None
) -> list[torch.Tensor]:
    """After a step: for every :class:`BiasedRouter` of ``model``, b += speed * sign(mean load -
    load) over the choices counted since the last update (every micro-batch of the step), then
    reset the count. Returns the loads used, one (E,) tensor per router.

    ``group``: every rank that routes a share of the step's tokens with a copy of this router,
    the data-parallel x context-parallel ranks (the expert-parallel ones are among them); the
    load is summed over it first, the whole batch's load, so that every copy of the bias moves
    alike, as Megatron-LM sums it over its data-parallel group with context parallelism. Only
    when ep = dp and cp = 1 is that the expert-parallel group; with dp > ep, summing over the
    ep group alone lets the copies of different ep groups drift apart. An expert-parallel model
    needs a ``group`` of at least its ep ranks (ValueError)."""
    check_positive("speed", speed)
    routers = biased_routers(model)
    if not routers:
        raise ValueError(
            "the model has no BiasedRouter (build its MoEConfig with router_bias=True)"
        )
    ep = max((getattr(m, "ep", 1) for m in model.modules() if hasattr(m, "router")), default=1)
    size = 1 if group is None else dist.get_world_size(group)
    if ep > 1 and size < ep:
        raise ValueError(
            f"an expert-parallel model (ep={ep}) routes the step's tokens on several ranks: "
            f"pass group=, every data-parallel x context-parallel rank (got {size} rank(s))"
        )
    loads = []
    for router in routers:
        load = router.load.clone()
        if group is not None:
            dist.all_reduce(load, group=group)
        mean = load.double().mean()
        router.bias += speed * torch.sign(mean - load.double()).to(router.bias.dtype)
        router.load.zero_()
        loads.append(load)
    return loads


def sequence_balance_loss(probs: torch.Tensor, *, top_k: int, seq_len: int) -> torch.Tensor:
    """DeepSeek-V3's sequence-wise balance loss, unscaled (alpha = 1): for ``probs`` (T, E), T
    tokens in sequences of ``seq_len``, the mean over sequences of sum_i f_i P_i (eqs. 17-20;
    f from the unbiased top-k, no gradient; P from the scores normalised over the experts).
    With ``seq_len = T`` it is the whole batch's top-k auxiliary loss."""
    experts = probs.shape[-1]
    check_top_k(top_k, experts)
    check_int("seq_len", seq_len)
    if probs.shape[0] % seq_len:
        raise ValueError(f"{probs.shape[0]} tokens are not whole sequences of seq_len={seq_len}")
    share = probs / probs.sum(-1, keepdim=True)  # s'_ti (eq. 19): the same top-k as probs
    # sum_i f_i P_i of one sequence (eqs. 18, 20) is lab10.1's "topk" loss of its s'
    losses = [load_balancing_loss(seq, top_k=top_k, style="topk") for seq in share.split(seq_len)]
    return torch.stack(losses).mean()
