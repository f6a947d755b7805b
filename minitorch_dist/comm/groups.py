"""A rank's place in a process group, also when no group exists.

Every technique asks the same two questions of its group: how many ranks, and which one am I.
Without an initialised process group (one process, a notebook cell, a unit test) the answers are
1 and 0, so the same code runs on one rank with every collective skipped.

:data:`Group` is the one type of a ``group`` argument across the package: a process group, or
None for the default group (every rank; one rank when none is initialised).
"""

from __future__ import annotations

import torch.distributed as dist

__all__ = ["Group", "group_rank", "group_size"]

Group = dist.ProcessGroup | None  # a process group; None: the default group


def group_size(group: Group = None) -> int:
    """Ranks in ``group`` (None: the default group; 1 when no process group is initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def group_rank(group: Group = None) -> int:
    """This rank's index in ``group`` (0 when no process group is initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0
    return dist.get_rank(group)
