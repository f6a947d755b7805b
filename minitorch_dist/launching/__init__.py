"""Running one function on N ranks: forked CPU processes on gloo, or the processes torchrun
started (chapter 0).

    launcher    launch(fn, world_size, ...), the forked ranks and their output in rank order
    child       what each forked rank runs: join the group, run fn, report to the parent
    report      how a launch fails: RankError, RankTimeoutError, the root cause, stuck ranks
    frames      which frames are the reader's: a rank's traceback and where stuck ranks were
    gpu         the GPU path: inside torchrun, and torchrun() from Python
    by_value    start_method='spawn': a notebook's own functions pickled by value

``from minitorch_dist import launch`` is the name readers use; the package's own modules import
:mod:`minitorch_dist.launching.launcher`. The package is not called ``launch``: a subpackage of
that name would replace the function ``minitorch_dist.launch`` as soon as it was imported.
"""

from minitorch_dist.launching.launcher import (
    COLLECTIVE_TIMEOUT_ENV,
    LaunchError,
    RankError,
    RankTimeoutError,
    launch,
    torchrun,
    under_torchrun,
)

__all__ = [
    "COLLECTIVE_TIMEOUT_ENV",
    "LaunchError",
    "RankError",
    "RankTimeoutError",
    "launch",
    "torchrun",
    "under_torchrun",
]
