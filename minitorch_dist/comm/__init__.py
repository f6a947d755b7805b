"""Communication: what collectives cost (``cost``), counting them (``counting``), the ring built
from send/recv (``ring``, lab 5), drawings of the collectives (``viz``), version shims."""

from .cost import (
    RING_OPS,
    algorithm_bandwidth,
    bus_bandwidth,
    collective_bytes,
    collective_time,
)
from .counting import Call, CommCounter
from .shim import all_gather_into_tensor, reduce_scatter_tensor

__all__ = [
    "RING_OPS",
    "Call",
    "CommCounter",
    "algorithm_bandwidth",
    "all_gather_into_tensor",
    "bus_bandwidth",
    "collective_bytes",
    "collective_time",
    "reduce_scatter_tensor",
]
