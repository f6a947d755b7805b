"""Communication: what collectives cost (``cost``), counting them (``counting``), the ring built
from send/recv (``ring``, lab 5), version shims (``shim``), and drawings of the collectives
(``plots``, chapter 5's figures).

The numbers stay free of plotting and of the memory tracker: ``import minitorch_dist.comm`` does
not import matplotlib (import ``minitorch_dist.comm.plots`` for the figures), and the shims mark
their collectives with :func:`minitorch_dist.scopes.backend_scope`, a leaf, so that a tracker
can leave gloo's own buffers out.
"""

from minitorch_dist.lazy import attach

_EXPORTS = {  # module -> the names it provides, imported on first use (minitorch_dist.lazy)
    ".cost": (
        "RING_OPS",
        "algorithm_bandwidth",
        "bus_bandwidth",
        "collective_bytes",
        "collective_time",
        "multi_node_ring_bandwidth",
    ),
    ".counting": ("Call", "CommCounter"),
    ".shim": ("all_gather_into_tensor", "reduce_scatter_tensor"),
}

__all__ = [
    "RING_OPS",
    "Call",
    "CommCounter",
    "algorithm_bandwidth",
    "all_gather_into_tensor",
    "bus_bandwidth",
    "collective_bytes",
    "collective_time",
    "multi_node_ring_bandwidth",
    "reduce_scatter_tensor",
]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
