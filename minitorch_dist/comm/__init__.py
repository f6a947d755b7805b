"""Communication: what collectives cost (``cost``), counting them (``counting``), the ring built
from send/recv (``ring``, lab 5), version shims (``shim``), a rank's place in its group
(``groups``: ``group_size``, ``group_rank``), collectives that return a new tensor for autograd
Functions (``collectives``), and drawings of the collectives (``plots``, chapter 5's figures).

The numbers stay free of plotting and of the memory tracker: ``import minitorch_dist.comm`` does
not import matplotlib (import ``minitorch_dist.comm.plots`` for the figures), and the shims mark
their collectives with :func:`minitorch_dist.scopes.backend_scope`, a leaf, so that a tracker
can leave gloo's own buffers out.
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .collectives import (
        all_gather_copy,
        all_gather_stacked,
        all_reduce_copy,
        all_to_all_copy,
        reduce_scatter_copy,
        reduce_scatter_stacked,
        split_copy,
    )
    from .cost import (
        RING_OPS,
        algorithm_bandwidth,
        bus_bandwidth,
        collective_bytes,
        collective_time,
        multi_node_ring_bandwidth,
    )
    from .counting import Call, CommCounter
    from .groups import Group, group_rank, group_size
    from .shim import all_gather_into_tensor, reduce_scatter_tensor

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above
