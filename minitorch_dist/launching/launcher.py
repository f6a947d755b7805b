"""Run one function on N ranks: forked CPU processes on gloo, or the processes torchrun started.

    results = launch(fn, 4, x)        # fn(rank, world_size, x) on 4 emulated ranks, in rank order

The same user code runs in three places:

* a notebook cell, pytest or a script: ``launch`` forks ``world_size`` CPU processes (functions
  defined in a notebook work, because fork needs no pickling), joins them in a gloo process group,
  captures what each prints, and relays it after the join in rank order;
* a GPU box or a cluster: run the script with ``torchrun --nproc_per_node=8 script.py``; ``launch``
  sees torchrun's environment and runs ``fn`` once, in this process, on NCCL;
* a notebook on a GPU box: ``torchrun(script, nproc)`` runs such a script and relays its output.

It never hangs: the store listens on a port the OS picks, the process group and the whole launch
carry a timeout, a failing rank is reported by number with its traceback (the root cause, not a
victim that merely saw the connection close), and no child outlives the call.
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from multiprocessing import connection
from typing import Any

import torch
import torch.multiprocessing as mp

from minitorch_dist.checks import check_int
from minitorch_dist.launching.by_value import ByValue
from minitorch_dist.launching.child import _child, _dump_stacks, _read, launch_cpu
from minitorch_dist.launching.frames import short_name, where_ranks_were
from minitorch_dist.launching.gpu import _run_in_torchrun, torchrun, under_torchrun
from minitorch_dist.launching.report import (
    COLLECTIVE_TIMEOUT_ENV,
    LaunchError,
    RankError,
    RankTimeoutError,
    _death,
    _raise_if_failed,
    _Report,
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

_GRACE_S = 3.0  # after the first failure, how long the other ranks get to report theirs
_DUMP_WAIT_S = 5.0  # how long an interrupted launch waits for its ranks' stacks
_EXIT_GRACE_S = 10.0  # after a success, how long the ranks get to tear down and exit


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 60.0,
    ranks: int | Sequence[int] | str = 0,
    backend: str = "gloo",
    start_method: str = "fork",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` ranks; return results in rank order.

    Outside torchrun the ranks are forked CPU processes on ``backend="gloo"``; under torchrun the
    backend is NCCL when every local rank has a GPU (gloo otherwise), whatever ``backend`` says.

    ``timeout`` (seconds) bounds the whole launch and every collective inside it. ``ranks`` picks
    whose output is relayed: ``0`` (default), a list of ranks, or ``"all"``; with more than one,
    each line is prefixed ``[rank k]``. Inside torchrun, ``fn`` runs once for this process's rank
    and the returned list holds every rank's result (gathered with ``all_gather_object``).

    ``start_method="spawn"`` (or ``"forkserver"``) starts each rank as a fresh interpreter instead
    of a fork, for a platform or a process that cannot fork: ``fn`` and ``args`` are then sent
    by value (:mod:`~minitorch_dist.launching.by_value`), so a notebook's own functions still run.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the launcher's
    check_int("world_size", world_size)
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if start_method not in ("fork", "spawn", "forkserver"):
        raise ValueError(
            f"start_method must be 'fork', 'spawn' or 'forkserver', got {start_method!r}"
        )
    shown = _shown_ranks(ranks, world_size)
    if under_torchrun():
        return _run_in_torchrun(fn, world_size, args, timeout)
    if backend == "nccl":
        raise ValueError(
            "backend='nccl' needs one process per GPU started by torchrun (forked processes "
            "cannot use CUDA): run the script with torchrun, or minitorch_dist.torchrun(script, n)"
        )
    if start_method != "fork":  # a fresh interpreter finds no notebook function by its name
        fn, args = ByValue(fn, args), ()
    elif torch.cuda.is_initialized():
        raise LaunchError(
            "CUDA is already initialised in this process, so it cannot fork emulated ranks. "
            "Run the code as a script with torchrun (minitorch_dist.torchrun(script, nproc)), "
            "restart the kernel and launch before touching CUDA, or pass start_method='spawn'."
        )
    return _fork_and_join(fn, world_size, args, timeout, shown, backend, start_method)


def _shown_ranks(ranks: int | Sequence[int] | str, world_size: int) -> list[int]:
    if ranks == "all":
        return list(range(world_size))
    chosen = [ranks] if isinstance(ranks, int) else list(ranks)
    for r in chosen:
        if not isinstance(r, int) or not 0 <= r < world_size:
            raise ValueError(f"ranks to show must be in 0..{world_size - 1} or 'all', got {r!r}")
    return chosen


def _fork_context(start_method: str = "fork") -> Any:
    """multiprocessing's "fork", or a ``LaunchError`` saying where the labs run instead."""
    try:
        return mp.get_context(start_method)
    except ValueError:  # "cannot find context for 'fork'": Windows has no fork
        raise LaunchError(
            f"emulated ranks are forked processes, and this platform ({sys.platform}) cannot "
            "fork. Run the labs on Linux or macOS, in WSL 2 on Windows, or in Colab; or run a "
            "script on each rank with torchrun (minitorch_dist.torchrun(script, nproc)). "
            "launch(..., start_method='spawn') starts fresh interpreters instead (tested on Linux)"
        ) from None


def _fork_and_join(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple,
    timeout: float,
    shown: list[int],
    backend: str,
    start_method: str = "fork",
) -> list[Any]:
    __tracebackhide__ = True
    ctx = _fork_context(start_method)
    # A socket listening on a port the OS chose (two launches never collide); rank 0 serves the
    # rendezvous store on it. The parent starts no store thread of its own: forking a process
    # while a store thread holds a lock can leave a child deadlocked.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    logdir = tempfile.mkdtemp(prefix="minitorch_dist_")
    logs = [os.path.join(logdir, f"rank{r}.log") for r in range(world_size)]
    procs, conns = [], []
    cpu = launch_cpu()  # None unless $MINITORCH_DIST_PIN_RANKS=1 (make test's test jobs)
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns when forking a multi-threaded process (a Jupyter kernel is one).
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            for rank in range(world_size):
                ours, theirs = ctx.Pipe(duplex=True)
                p = ctx.Process(
                    target=_child,
                    args=(
                        fn,
                        rank,
                        world_size,
                        args,
                        listener,
                        timeout,
                        logs[rank],
                        theirs,
                        backend,
                        cpu,
                    ),
                    daemon=True,
                )
                p.start()
                theirs.close()
                procs.append(p)
                conns.append(ours)
        try:
            reports, unfinished = _collect(procs, conns, timeout)
        except BaseException as e:  # a test's time limit, Ctrl-C: say where the ranks were
            raise _interrupted(e, procs, logs) from None  # the same exception, traced here
        _dump_stacks([procs[r] for r in unfinished], [logs[r] for r in unfinished])
        if len(reports) == world_size and all(rep.ok for rep in reports.values()):
            for c in conns:  # everyone finished: let the ranks tear the group down together
                c.send("exit")
            deadline = time.monotonic() + _EXIT_GRACE_S  # and exit before any is killed:
            for p in procs:  # a rank killed in teardown takes its peers' connections with it
                p.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        for c in conns:
            c.close()
        output = [_read(path) for path in logs]
        stacks = [_read(path + ".stack") for path in logs]
        shutil.rmtree(logdir, ignore_errors=True)
        listener.close()
    _relay(output, shown)
    _raise_if_failed(reports, unfinished, world_size, timeout, stacks, output)
    return [reports[r].value for r in range(world_size)]


def _collect(procs: list, conns: list, timeout: float) -> tuple[dict[int, _Report], list[int]]:
    """Wait for every rank's report; stop early once a failure has had time to propagate."""
    reports: dict[int, _Report] = {}
    deadline = time.monotonic() + timeout
    pending = dict(enumerate(conns))
    exited: set[int] = set()
    while len(reports) + len(exited - set(reports)) < len(procs):
        now = time.monotonic()
        if now >= deadline:
            break
        waitables = list(pending.values()) + [
            p.sentinel for r, p in enumerate(procs) if r not in exited
        ]
        ready = connection.wait(waitables, timeout=min(0.5, deadline - now))
        for r, c in list(pending.items()):
            if c in ready:
                try:
                    reports[r] = pickle.loads(c.recv_bytes())  # by value (child.py says why)
                except (EOFError, OSError):
                    pass  # the rank died without reporting; its sentinel tells us
                del pending[r]
        for r, p in enumerate(procs):
            if p.sentinel in ready and r not in pending:
                exited.add(r)
        if any(not rep.ok for rep in reports.values()):
            deadline = min(deadline, time.monotonic() + _GRACE_S)
    for r, p in enumerate(procs):
        if r in exited and r not in reports:  # its files closed before the kernel let it be
            p.join(timeout=_EXIT_GRACE_S)  # reaped: wait for its exit code, don't call it stuck
        if r not in reports and (r in exited or not p.is_alive()) and r not in pending:
            reports[r] = _Report(
                r,
                False,
                exc_type="ProcessDied",
                message=_death(p),
                traceback_text="(no Python traceback: the process itself died)\n",
                at=1e18,
            )
    unfinished = [r for r in range(len(procs)) if r not in reports]
    return reports, unfinished


def _interrupted(error: BaseException, procs: list, logs: list[str]) -> BaseException:
    """``error``, which stopped the wait for the ranks, with a note saying where each rank was
    in the reader's code and without the waiting loop's frames (the launcher's ``poll``)."""
    deadline = time.monotonic() + _DUMP_WAIT_S
    while True:  # a rank not yet in the reader's code (a busy machine) is asked again
        _dump_stacks(procs, logs, wait=max(0.0, deadline - time.monotonic()))
        note = where_ranks_were([_read(path + ".stack") for path in logs], short_name)
        if note or time.monotonic() >= deadline or not any(p.is_alive() for p in procs):
            break
        time.sleep(0.5)
    if note and hasattr(error, "add_note"):
        error.add_note(note)
    return error.with_traceback(None)


def _relay(output: list[str], shown: list[int]) -> None:
    for r in shown:
        text = output[r]
        if not text:
            continue
        if len(shown) > 1:
            text = "".join(f"[rank {r}] {line}" for line in text.splitlines(keepends=True))
        print(text, end="" if text.endswith("\n") else "\n")
    sys.stdout.flush()
