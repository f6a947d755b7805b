"""The top-k router and the auxiliary load-balancing loss (lab 10, task lab10.1).

The functions are written in :mod:`minitorch_dist.models.routing` (open that file to implement
them): the single-process MoE block routes with them too, and models import no parallel package.
This module exports them under lab 10's names; the routing and the loss's three normalisations
("switch", "topk", "mixtral") are described there.
"""

from __future__ import annotations

from minitorch_dist.models.routing import LOSS_STYLES, load_balancing_loss, top_k_route

__all__ = ["LOSS_STYLES", "load_balancing_loss", "top_k_route"]
