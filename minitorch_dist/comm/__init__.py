"""Communication: what collectives cost (``cost``), counting them (``counting``), version shims."""

from .cost import RING_OPS, collective_bytes
from .counting import Call, CommCounter
from .shim import all_gather_into_tensor, reduce_scatter_tensor

__all__ = [
    "RING_OPS",
    "Call",
    "CommCounter",
    "all_gather_into_tensor",
    "collective_bytes",
    "reduce_scatter_tensor",
]
