"""What each forked rank runs: join the gloo group, run the user's function, report to the parent.

:func:`~minitorch_dist.launching.launcher.launch` forks one process per rank into :func:`_child`.
Its output goes to a log file the parent relays afterwards (:func:`_read`); a stuck rank writes its
Python stack there on SIGUSR1; whatever happens, one report (value or traceback) goes back on
the rank's pipe, and a rank that finished keeps its connections open until the parent says every
rank is done.
"""

from __future__ import annotations

import faulthandler
import io
import itertools
import os
import pickle
import re
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from minitorch_dist.launching.report import (
    _collective_timeout,
    _Report,
    peers_waited_on,
    watch_receives,
)

# Set (to 1) by make test's test jobs: every rank of a launch runs on one CPU, a different CPU
# for each launch in turn. When every core is busy anyway, the ranks' hand-offs (a collective
# wakes a peer, which wakes its gloo thread) then stay on one core instead of crossing to another,
# and cost less system time: the graded tests took 17 % less CPU on a 2-core VM (94 s, not 113 s)
# and 7 % more wall time alone. Off by default: a lone launch is faster on several cores, and
# the labs' timings mean what they say.
PIN_RANKS_ENV = "MINITORCH_DIST_PIN_RANKS"
_launches = itertools.count()


def launch_cpu() -> int | None:
    """The CPU this launch's ranks share under $MINITORCH_DIST_PIN_RANKS=1 (None: unpinned)."""
    if os.environ.get(PIN_RANKS_ENV) != "1" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[(os.getpid() + next(_launches)) % len(cpus)]


def _child(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    args: tuple,
    listener: socket.socket,
    timeout: float,
    log_path: str,
    conn: Any,
    backend: str,
    cpu: int | None = None,
) -> None:
    # Forked after the parent ran multi-threaded ops, intra-op threads would deadlock the child.
    torch.set_num_threads(1)
    if cpu is not None:  # see PIN_RANKS_ENV
        os.sched_setaffinity(0, {cpu})
    log = open(log_path, "w", buffering=1)
    os.dup2(log.fileno(), 1)  # C++ writes (gloo, c10d warnings) land in the same file
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    stacks = open(log_path + ".stack", "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=False)  # see _dump_stacks
    if faulthandler.is_enabled():  # a fatal signal's stack goes into this rank's log, not the tty
        faulthandler.enable(file=log, all_threads=False)
    report = _Report(rank, False)
    try:
        port = listener.getsockname()[1]
        if rank == 0:  # serve the store on the socket the parent opened
            serve = dict(timeout=timedelta(seconds=timeout), wait_for_workers=False)
            serve["master_listen_fd"] = listener.fileno()
            try:
                store = dist.TCPStore("127.0.0.1", port, world_size, True, **serve)
            except NotImplementedError:  # torch <= 2.7's libuv store takes no listen fd
                store = dist.TCPStore("127.0.0.1", port, world_size, True, **serve, use_libuv=False)
        else:
            listener.close()
            store = dist.TCPStore(
                "127.0.0.1", port, world_size, False, timeout=timedelta(seconds=timeout)
            )
        dist.init_process_group(
            backend,
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=_collective_timeout(timeout)),
        )
        watch_receives()  # so that a receive's timeout names the rank that never sent
        value = fn(rank, world_size, *args)
        report = _Report(rank, True, value=value)
    except BaseException as e:  # noqa: BLE001 - every failure must reach the parent
        report = _Report(
            rank,
            False,
            exc_type=type(e).__name__,
            message=str(e).strip().splitlines()[0] if str(e).strip() else "",
            # drop this frame: the traceback starts in the user's function
            traceback_text="".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next)),
            at=time.monotonic(),
            waits_for=peers_waited_on(e),
        )
    sys.stdout.flush()
    # Plain pickle, not the connection's: torch registers a reduction with multiprocessing's
    # pickler that moves a tensor into shared memory, so a tensor returned here and passed to a
    # later launch would be one memory for all its forked ranks, each updating it in place.
    try:
        data = pickle.dumps(report)
    except Exception as e:  # the return value did not pickle
        report = _Report(
            rank, False, exc_type=type(e).__name__, message=f"result not picklable: {e}"
        )
        data = pickle.dumps(report)
    conn.send_bytes(data)
    if report.ok:
        # Keep our connections open until every rank is done: a rank still waiting in a
        # collective we skipped must time out (a clear error), not see "connection closed".
        try:
            conn.recv()
        except EOFError:
            pass
        if dist.is_initialized():
            dist.destroy_process_group()
    conn.close()


# gloo of torch <= 2.10 prints this from C++ as each rank joins: noise, dropped from the relay
_GLOO_CONNECTED = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\..*\n?", re.M)


def _read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return _GLOO_CONNECTED.sub("", f.read())


def _dump_stacks(procs: list, logs: list[str], wait: float = 5.0) -> None:
    """Ask stuck ranks to write their Python stacks beside their logs (shown with the error),
    and wait until each has: its dump file has grown and then stayed the same for 50 ms (a
    busy machine can take a while to schedule a waiting rank), for at most ``wait`` seconds."""
    asked = {}  # dump file -> (its rank's process, its size before the signal)
    for p, log in zip(procs, logs):
        if p.is_alive():
            asked[log + ".stack"] = (p, _size(log + ".stack"))
            os.kill(p.pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait
    last: dict[str, int] = {}
    while asked and time.monotonic() < deadline:
        time.sleep(0.05)
        sizes = {path: _size(path) for path in asked}
        if sizes == last and all(
            sizes[path] > before or not p.is_alive() for path, (p, before) in asked.items()
        ):
            return  # every dump written (or its rank gone), and none grew in the last 50 ms
        last = sizes


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
