"""The router of the mixture-of-experts block: a gate ``Linear(h, E)`` whose logits lab 10.1's
:func:`~minitorch_dist.models.routing.top_k_route` turns into each token's k experts and weights.
:class:`~minitorch_dist.models.moe_bias.BiasedRouter` (DeepSeek-V3's balancing) extends it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models.moe_configs import check_top_k
from minitorch_dist.models.routing import top_k_route

__all__ = ["Router"]


class Router(nn.Module):
    """gate: Linear(h, E, no bias); forward(x (T, h)) -> (weights (T, k), experts (T, k),
    probs (T, E)): the logits computed in ``router_dtype`` or the input's dtype, whichever is
    wider, routed by :func:`~minitorch_dist.models.routing.top_k_route` (lab10.1)."""

    def __init__(
        self,
        hidden: int,
        experts: int,
        top_k: int,
        *,
        normalize: bool = True,
        router_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.experts, self.top_k = experts, check_top_k(top_k, experts)
        self.normalize, self.router_dtype = normalize, router_dtype
        self.gate = nn.Linear(hidden, experts, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dtype = torch.promote_types(x.dtype, self.router_dtype)  # fp32 for a bf16 model
        logits = F.linear(x.to(dtype), self.gate.weight.to(dtype))  # (T, h) @ (h, E) -> (T, E)
        return top_k_route(logits, self.top_k, normalize=self.normalize)  # lab10.1's router
