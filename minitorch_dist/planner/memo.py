"""The closed forms the planner calls, memoised: the same function, remembered by its arguments.

Ranking every configuration of a 70B model on 1,024 GPUs calls each formula hundreds of
thousands of times with a few hundred distinct arguments; remembering the answers makes the
search fast (``benchmarks/planner_speed.py``) without changing a number. The results are shared
between calls: never mutate them.
"""

from __future__ import annotations

from functools import lru_cache

from minitorch_dist.context_parallel import cost as cp_cost
from minitorch_dist.expert_parallel import cost as ep_cost
from minitorch_dist.memory import estimate
from minitorch_dist.models import configs
from minitorch_dist.pipeline import cost as pp_cost
from minitorch_dist.tensor_parallel import cost as tp_cost
from minitorch_dist.zero import cost as zero_cost  # closed-form modules only: no torch

__all__ = [
    "activation_bytes",
    "all_to_all_bytes",
    "bubble_fraction",
    "ep_step_bytes",
    "model_state_bytes",
    "p2p_bytes",
    "ring_bytes_per_rank",
    "split_layers",
    "tp_comm_bytes",
    "zero_comm_bytes",
]

_cache = lru_cache(maxsize=65536)
activation_bytes = _cache(estimate.activation_bytes)
model_state_bytes = _cache(estimate.model_state_bytes)
split_layers = _cache(configs.split_layers)
bubble_fraction = _cache(pp_cost.bubble_fraction)
p2p_bytes = _cache(pp_cost.p2p_bytes)
tp_comm_bytes = _cache(tp_cost.tp_comm_bytes)
ring_bytes_per_rank = _cache(cp_cost.ring_bytes_per_rank)
all_to_all_bytes = _cache(ep_cost.all_to_all_bytes)
ep_step_bytes = _cache(ep_cost.ep_step_bytes)
zero_comm_bytes = _cache(zero_cost.zero_comm_bytes)
