"""Thread-local scopes that one part of the package sets and another reads.

A leaf module (standard library only), so that the code that sets a scope and the code that reads
it need not import each other. :func:`backend_scope` marks code of a communication backend: the
collectives of :mod:`minitorch_dist.comm` run inside one, and
:class:`~minitorch_dist.memory.MemoryTracker` adopts no new storage while it is open (gloo copies
a reduce-scatter's input into a buffer of its own, which is gloo's memory, not the training
algorithm's; see rule 4 in :mod:`minitorch_dist.memory.track`). Without this module, ``comm``
would import the memory tracker (and torch's dispatch machinery) just to set a flag.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["backend_scope", "in_backend_scope"]

_BACKEND = threading.local()  # depth of backend_scope() on this thread


@contextlib.contextmanager
def backend_scope() -> Iterator[None]:
    """Code of a communication backend: trackers adopt no new storage until it ends. Nests."""
    _BACKEND.depth = getattr(_BACKEND, "depth", 0) + 1
    try:
        yield
    finally:
        _BACKEND.depth -= 1


def in_backend_scope() -> bool:
    """Whether this thread is inside :func:`backend_scope` (at any depth)."""
    return getattr(_BACKEND, "depth", 0) > 0
