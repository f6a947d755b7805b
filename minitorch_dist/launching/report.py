"""How a launch of emulated ranks fails: the errors, and the report built from what each rank said.

The root cause is the rank that raised first with an error of its own (not a victim that saw a
peer's connection close, nor a backend wait that expired); a launch where ranks got stuck names
each stuck rank and the line it waited on, the rank it waited to receive from when the
waiting frames show it (``recv(src=...)``, a ``P2POp(irecv, ..., peer)``), and the timeout that
actually fired (the launch's, or the smaller collective timeout). Machine paths are shortened so that a notebook's
stored error output is the same on every machine.
"""

from __future__ import annotations

import os
import re
import weakref
from dataclasses import dataclass
from typing import Any

from minitorch_dist.launching.frames import _FILE, _short_paths, _where, is_users, trim_traceback

# Errors a rank raises only because another rank went away first: never the root cause.
_VICTIM = re.compile(
    r"Connection closed by peer|Connection reset|Broken pipe|EOF|closed by remote|"
    r"Socket Timeout|ECONNRESET|Transport endpoint",
    re.IGNORECASE,
)
_TIMEOUT = re.compile(r"timed out|timeout", re.IGNORECASE)
# Errors the backend raises when a peer is gone or a wait expires; any other type (a
# NotImplementedError whose task mentions a timeout, a ValueError, an AssertionError) is the
# rank's own failure, whatever its message says.
_BACKEND_ERRORS = frozenset(
    {
        "RuntimeError",
        "DistError",
        "DistBackendError",
        "DistNetworkError",
        "DistStoreError",
        "ConnectionError",
        "ConnectionResetError",
        "BrokenPipeError",
        "EOFError",
    }
)

# Caps every collective's (process group's) timeout, in seconds, when set: the graded tests set
# it (tests/conftest.py) so that a collective that cannot complete fails in seconds, not minutes.
COLLECTIVE_TIMEOUT_ENV = "MINITORCH_DIST_COLLECTIVE_TIMEOUT"

_OUTPUT_LINES = 30  # lines of a dead rank's own output (gloo's message) quoted in the error


class LaunchError(RuntimeError):
    """A launch of emulated ranks failed."""


class RankError(LaunchError):
    """A rank raised. ``rank`` is the root cause; ``traceback_text`` is that rank's traceback."""

    def __init__(self, message: str, rank: int, exc_type: str, traceback_text: str) -> None:
        super().__init__(message)
        self.rank = rank
        self.exc_type = exc_type
        self.traceback_text = traceback_text


class RankTimeoutError(LaunchError, TimeoutError):
    """Ranks did not finish within the timeout: usually a collective that not every rank called."""

    def __init__(self, message: str, ranks: list[int]) -> None:
        super().__init__(message)
        self.ranks = ranks


@dataclass
class _Report:
    rank: int
    ok: bool
    value: Any = None
    exc_type: str = ""
    message: str = ""
    traceback_text: str = ""
    at: float = 0.0  # time.monotonic() when the exception was caught (shared clock after fork)
    waits_for: tuple[int, ...] = ()  # ranks a timed-out receive waited on (peers_waited_on)


# this rank's receives still open: id -> (weak reference to the work, or None for a blocking recv;
# peer). Weak: holding the work would hold its receive buffer, which a pipeline stage must drop.
_waiting: dict[int, Any] = {}


def watch_receives() -> None:
    """In a forked rank: remember the peer of each receive posted through ``dist.recv`` or
    ``dist.batch_isend_irecv`` until it completes, so that a timeout can name who never sent.
    The wrappers call torch's own functions and return what they return."""
    import torch.distributed as dist

    recv, batch = dist.recv, dist.batch_isend_irecv

    def watched_recv(tensor: Any, src: Any = None, *args: Any, **kwargs: Any) -> Any:
        _waiting[-1] = (None, src)
        value = recv(tensor, src, *args, **kwargs)
        _waiting.pop(-1, None)
        return value

    def watched_batch(p2p_op_list: Any) -> Any:
        works = batch(p2p_op_list)
        for key, (ref, _) in list(_waiting.items()):
            if ref is not None and (ref() is None or ref().is_completed()):
                del _waiting[key]  # completed, or dropped by its owner
        if len(works) == len(p2p_op_list):  # gloo: one work per op, in order
            for work, op in zip(works, p2p_op_list):
                if getattr(op.op, "__name__", "") == "irecv":
                    _waiting[id(work)] = (weakref.ref(work), op.peer)
        return works

    dist.recv, dist.batch_isend_irecv = watched_recv, watched_batch


def _succeeded(work: Any) -> bool:
    """Whether a receive's work completed without error (torch's deprecation warning for
    ``is_success``, printed once from C++, is kept out of the rank's output)."""
    if not work.is_completed():
        return False
    saved = os.dup(2)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        return bool(work.is_success())
    except (AttributeError, RuntimeError):  # gone from a later torch: treat it as still open
        return False
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peers_waited_on(error: BaseException) -> tuple[int, ...]:
    """The ranks a receive that timed out with ``error`` waited on: the open receives that
    :func:`watch_receives` saw, and ``src`` in the locals of the traceback's frames. Empty
    when the error is no timeout or nothing says."""
    if not _TIMEOUT.search(str(error)):
        return ()
    open_works = [
        (None if ref is None else ref(), ref is None, peer) for ref, peer in _waiting.values()
    ]
    peers = [
        peer
        for work, blocking, peer in open_works
        if blocking or (work is not None and not _succeeded(work))
    ]
    tb = error.__traceback__
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            if name == "src" and isinstance(value, int) and not isinstance(value, bool):
                peers.append(value)
        tb = tb.tb_next
    return tuple(sorted({p for p in peers if isinstance(p, int)}))


def _timed_out(rep: _Report) -> str:
    """Where a rank whose collective timed out was waiting, and the backend's message."""
    frames = [
        line.strip() for line in rep.traceback_text.splitlines() if line.startswith("  File ")
    ]
    mine = [f for f in frames if is_users(_FILE.search(f).group(1))]
    frames = (mine or [f for f in frames if "torch/distributed" not in f])[-4:]
    where = "\n    ".join(frames)
    return f"\nrank {rep.rank} was stuck at:\n    {where}\n  {rep.exc_type}: {rep.message}"


def _death(p: Any) -> str:
    code = p.exitcode
    if code is None:  # closed its pipes, still exiting
        return "process closed its connections and was exiting without reporting"
    return f"process exited with code {code} without reporting" + (
        f" (signal {-code})" if code is not None and code < 0 else ""
    )


# Newer torch (2.15) refuses autograd in a forked child once the parent process ran a backward.
_FORKED_AUTOGRAD = "autograd's threading in combination with fork-based multiprocessing"
_FORKED_AUTOGRAD_HINT = (
    ". This process ran a backward before launch forked the ranks, and torch lets no forked "
    "rank use autograd after that: run the single-process work in a rank of its own "
    "(launch(fn, 1)), or launch before any backward in this process"
)


def _is_victim_or_timeout(rep: _Report) -> bool:
    """Whether a rank failed only because another rank went away or a backend wait expired."""
    if rep.exc_type not in _BACKEND_ERRORS:
        return False
    return bool(_VICTIM.search(rep.message) or _TIMEOUT.search(rep.message))


def _raise_if_failed(
    reports: dict[int, _Report],
    unfinished: list[int],
    world_size: int,
    timeout: float,
    stacks: list[str],
    output: list[str],
) -> None:
    __tracebackhide__ = True  # pytest shows the test's line, not this function's source
    for rep in reports.values():  # a rank killed by a signal: its own last words say why
        if rep.exc_type == "ProcessDied" and output[rep.rank].strip():
            last = output[rep.rank].rstrip().splitlines()[-_OUTPUT_LINES:]
            said = output[rep.rank].split("Fatal Python error")[0].strip().splitlines()
            if said:  # what it printed before faulthandler's stack dump
                rep.message += " | its output ended with: " + " / ".join(
                    x.strip() for x in said[-3:]
                )
            rep.traceback_text += f"--- last lines of rank {rep.rank}'s output ---\n"
            rep.traceback_text += "\n".join(last) + "\n"
    failed = [rep for rep in reports.values() if not rep.ok]
    # A crash is a failure that is neither a timeout nor a victim of another rank going away.
    crashes = [rep for rep in failed if not _is_victim_or_timeout(rep)]
    if crashes:
        root = min(crashes, key=lambda rep: (rep.at, rep.rank))
        others = sorted(rep.rank for rep in failed if rep is not root)
        also = f" (then ranks {others} failed too)" if others else ""
        if _FORKED_AUTOGRAD in root.message:
            also += _FORKED_AUTOGRAD_HINT
        root.traceback_text = trim_traceback(root.traceback_text)  # the reader's frames
        raise RankError(
            _short_paths(
                f"rank {root.rank} of {world_size} failed with {root.exc_type}: "
                f"{root.message}{also}\n\n--- traceback of rank {root.rank} ---\n"
                f"{root.traceback_text}"
            ),
            rank=root.rank,
            exc_type=root.exc_type,
            traceback_text=root.traceback_text,
        )
    if unfinished or failed:
        stuck = sorted(set(unfinished) | {rep.rank for rep in failed})
        done = sorted(set(range(world_size)) - set(stuck))
        if unfinished:  # the launch's own timeout fired
            fired = f"did not finish within timeout={timeout:g} s"
        else:  # every stuck rank's collective (or receive) timed out first
            fired = (
                f"did not finish: a collective timed out after {_collective_timeout(timeout):g} s"
            )
        raise RankTimeoutError(
            _short_paths(
                f"ranks {stuck} of {world_size} {fired} (finished: {done}). "
                + _never_sent(failed, stuck, done)
                + "A rank waiting in a collective that another rank never called looks like "
                "this; check that every rank calls the same collectives in the same order."
                + "".join(_where(r, stacks[r]) for r in unfinished)
                + "".join(_timed_out(rep) for rep in sorted(failed, key=lambda rep: rep.rank))
            ),
            ranks=stuck,
        )


def _collective_timeout(timeout: float) -> float:
    """The process group's timeout: the launch's, capped by $MINITORCH_DIST_COLLECTIVE_TIMEOUT."""
    cap = os.environ.get(COLLECTIVE_TIMEOUT_ENV)
    return min(timeout, float(cap)) if cap else timeout


def _never_sent(failed: list[_Report], stuck: list[int], done: list[int]) -> str:
    """Who never sent: the peers a timed-out receive waited on when known, else the ranks that
    finished while others waited (they never called what the others wait on)."""
    waiting: dict[int, list[int]] = {}
    for rep in failed:
        for peer in rep.waits_for:
            waiting.setdefault(peer, []).append(rep.rank)
    if waiting:
        said = []
        for peer, ranks in sorted(waiting.items()):
            state = "it had finished" if peer in done else "it was stuck itself"
            said.append(
                f"Rank {peer} never sent what rank(s) {sorted(ranks)} waited to receive ({state})"
            )
        return "; ".join(said) + ". "
    if done:
        return f"Rank(s) {done} finished without sending or calling what rank(s) {stuck} wait on. "
    return ""
