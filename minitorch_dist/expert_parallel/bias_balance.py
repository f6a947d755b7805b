"""Bias balancing against the auxiliary loss, on a skewed routing problem (chapter 10).

One MoE block (E experts, top-k, dropless) learns a fixed smooth map y = sin(x A) from inputs
x = z + m u (z standard normal, u a unit vector, m the input's mean shift). Its router starts
skewed: the gate rows of the first ``hot`` experts get ``skew * u`` added, so nearly every token
prefers them. Each step draws a fresh batch (``sequences`` of ``seq_len`` tokens) and takes an
AdamW step on the mean squared error, balanced by one of

- ``"none"``: nothing;
- ``"aux"``: + ``aux_alpha`` times the top-k auxiliary loss of the whole batch (the chapter's
  ``style="topk"``; :func:`~minitorch_dist.models.moe_bias.sequence_balance_loss` with one
  sequence of all the tokens);
- ``"bias"``: DeepSeek-V3's selection bias, moved by ``speed`` after every step
  (:func:`~minitorch_dist.models.moe_bias.update_routing_bias`), no loss term;
- ``"bias+seq"``: the bias and DeepSeek-V3's sequence-wise loss with the small ``seq_alpha``.

Recorded per step: the load imbalance max_i n_i / mean_i n_i of the step's routing, the share of
choices a capacity of ``capacity_factor`` would have dropped (C = ceil(T k cf / E) per expert),
and the task loss (the error alone, without any balancing term).
"""

from __future__ import annotations

from typing import Any

import torch

from minitorch_dist.checks import check_choice, check_int, check_positive
from minitorch_dist.models.moe import MoEBlock, MoEConfig, slots_for
from minitorch_dist.models.moe_bias import sequence_balance_loss, update_routing_bias

__all__ = ["BALANCE_METHODS", "balance_run", "dropped_share"]

BALANCE_METHODS = ("none", "aux", "bias", "bias+seq")


def dropped_share(load: torch.Tensor, capacity: int) -> float:
    """Share of the choices counted in ``load`` (E,) beyond ``capacity`` slots per expert."""
    return (load - capacity).clamp(min=0).sum().item() / load.sum().item()


def balance_run(
    method: str,
    *,
    steps: int = 150,
    experts: int = 8,
    top_k: int = 2,
    hidden: int = 16,
    sequences: int = 8,
    seq_len: int = 64,
    hot: int = 2,
    skew: float = 2.0,
    shift: float = 1.0,
    speed: float = 0.01,
    aux_alpha: float = 0.01,
    seq_alpha: float = 1e-4,
    capacity_factor: float = 1.25,
    lr: float = 1e-2,
    seed: int = 0,
) -> dict[str, Any]:
    """Train one block under ``method`` (see the module docstring); returns per step
    ``imbalance``, ``dropped`` (at ``capacity_factor``) and ``loss``, and the final ``bias``
    (zeros unless the method moves it)."""
    check_choice("method", method, BALANCE_METHODS)
    for name, value in (
        ("steps", steps),
        ("experts", experts),
        ("hidden", hidden),
        ("sequences", sequences),
        ("seq_len", seq_len),
        ("hot", hot),
    ):
        check_int(name, value)
    check_positive("speed", speed)
    gen = torch.Generator().manual_seed(seed)
    cfg = MoEConfig(experts=experts, top_k=top_k, expert_ffn=hidden, router_bias="bias" in method)
    block = MoEBlock(hidden, cfg)
    u = torch.randn(hidden, generator=gen)
    u = u / u.norm()
    with torch.no_grad():  # the same weights whatever the method: the bias is a buffer
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
        block.router.gate.weight[:hot] += skew * u
    target = torch.randn(hidden, hidden, generator=gen) / hidden**0.5
    opt = torch.optim.AdamW(block.parameters(), lr=lr)
    tokens = sequences * seq_len
    capacity = slots_for(tokens, experts, capacity_factor, top_k)
    out: dict[str, Any] = {"imbalance": [], "dropped": [], "loss": []}
    for _ in range(steps):
        x = torch.randn(tokens, hidden, generator=gen) + shift * u
        err = (block(x) - torch.sin(x @ target)).pow(2).mean()
        loss = err
        probs = block.last_router_probs
        if method == "aux":
            loss = loss + aux_alpha * sequence_balance_loss(probs, top_k=top_k, seq_len=tokens)
        if method == "bias+seq":
            loss = loss + seq_alpha * sequence_balance_loss(probs, top_k=top_k, seq_len=seq_len)
        opt.zero_grad()
        loss.backward()
        opt.step()
        load = torch.bincount(block.last_expert_indices.reshape(-1), minlength=experts)
        if "bias" in method:
            (counted,) = update_routing_bias(block, speed)
            assert torch.equal(counted, load)  # the router counted what it routed
        out["imbalance"].append((load.max() / load.double().mean()).item())
        out["dropped"].append(dropped_share(load, capacity))
        out["loss"].append(err.item())
    bias = block.router.bias if "bias" in method else torch.zeros(experts)
    out["bias"] = bias.tolist()
    out["capacity"] = capacity
    return out
