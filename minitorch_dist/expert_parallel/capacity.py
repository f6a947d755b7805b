"""Expert capacity and the drop policy (lab 10, task lab10.2).

The functions are written beside the model (open those files to implement them):
``expert_capacity`` in :mod:`minitorch_dist.models.capacity` (plain Python, so that the torch-free
byte counts use it too), ``apply_capacity`` in :mod:`minitorch_dist.models.routing`. The
single-process MoE block drops tokens with them too, and models import no parallel package.
This module exports them under lab 10's names: C = ceil(T / E * cf * k) slots per expert
(GShard, section 2.2), choices beyond C dropped first come first served in token order.
"""

from __future__ import annotations

from minitorch_dist.models.capacity import expert_capacity
from minitorch_dist.models.routing import apply_capacity

__all__ = ["apply_capacity", "expert_capacity"]
