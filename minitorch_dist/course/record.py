"""The grading child's side of the autograder (minitorch_dist/course/judge.py): a pytest plugin that
records what the task's functions return, and reports each test's start and end.

Loaded with ``-p minitorch_dist.course.record`` in a child process that runs the submission's
code. ``$MINITORCH_DIST_RECORD_TARGETS`` names the functions that hold the assignment's tasks
(``module:Qualname``, JSON); each is wrapped in place (its ``__code__`` replaced, so every
reference to it, in a dict, a class or another module, records too). Every call writes one file
under the current test's folder: the function's return value (or the exception type it raised),
its tensor arguments after the call, for a method what it left visible in its object (public
numbers, the parameters and gradients of the modules and optimizers it holds) and the families
of collectives it called, as tensors and plain values (``torch.save``; the judge
loads them with ``weights_only=True``; built by minitorch_dist/course/record_data.py). Forked
ranks inherit the wrapper and write their own files, keyed by their rank.

Nothing here is trusted: the submission runs in this process and can change any of it. The judge
scores a test only when its recordings match the reference's (judge.py), so a child that lies
about a test's outcome, or skips the recording, gains nothing.
"""

from __future__ import annotations

import faulthandler
import hashlib
import importlib
import inspect
import json
import os
import signal
import time
import types
from typing import Any

from .record_data import active, convert, count_collectives, has_state, state, to_data

__all__ = ["RECORD_DIR_ENV", "STOPPED_ENV", "TARGETS_ENV", "TaskStopped", "test_folder", "to_data"]

RECORD_DIR_ENV = "MINITORCH_DIST_RECORD_OUT"
TARGETS_ENV = "MINITORCH_DIST_RECORD_TARGETS"
# {"module:Qualname": why} for the functions of tasks that already timed out: a call fails at
# once (TaskStopped) instead of running into the same endless loop until the judge's limit
STOPPED_ENV = "MINITORCH_DIST_RECORD_STOPPED"


class TaskStopped(RuntimeError):
    """A call of a task's function after that task timed out in an earlier test."""


CALLS_PER_PROCESS = 64  # per function: a training loop's thousandth call adds nothing
_CALL_NAME = "__minitorch_dist_record_call__"

_out: str | None = None  # the current test's folder
_originals: dict[str, Any] = {}
_counts: dict[tuple[int, str], int] = {}


def test_folder(nodeid: str) -> str:
    """The name of a test's recordings folder: a hash of its node id."""
    return hashlib.sha1(nodeid.encode()).hexdigest()[:20]


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_initialized() else -1
    except Exception:
        return -1


def _save(key: str, entry: dict) -> None:
    import torch

    if _out is None:
        return
    rank = _rank()
    n = _counts.get((rank, key), 0)
    if n >= CALLS_PER_PROCESS:
        return
    _counts[(rank, key)] = n + 1
    os.makedirs(_out, exist_ok=True)
    name = f"{time.monotonic_ns():020d}-{os.getpid()}-{len(_counts)}-{n}.pt"
    torch.save({"rank": rank, "key": key, **entry}, os.path.join(_out, name))


_stopped: dict[str, str] = {}  # STOPPED_ENV


def _call(key: str, args: tuple, kwargs: dict) -> Any:
    import torch

    if key in _stopped:
        raise TaskStopped(_stopped[key])
    used: set[str] = set()
    stack = active()
    stack.append(used)
    try:
        result = _originals[key](*args, **kwargs)
    except BaseException as e:
        try:
            _save(key, {"raised": type(e).__name__})
        except Exception:
            pass
        raise
    finally:
        while stack and stack.pop() is not used:  # this call's entry (and any left above it)
            pass
    try:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        entry = {"returned": convert(result), "tensors": convert(tensors)}
        if args and has_state(args[0]):  # a method: what it left in its object
            entry["state"] = convert(state(args[0]))
        _save(key, {**entry, "comm": sorted(used)})
    except Exception:
        pass
    return result


def _function(module: types.ModuleType, qualname: str) -> tuple[Any, str, Any]:
    """(owner, attribute name, the plain function) of ``qualname`` in ``module``."""
    owner: Any = module
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    raw = inspect.getattr_static(owner, name)
    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    return owner, name, inspect.unwrap(fn)


def install(targets: list[str]) -> None:
    """Wrap each ``module:Qualname`` of ``targets`` so that its calls are recorded."""
    for target in targets:
        module_name, qualname = target.split(":")
        try:
            module = importlib.import_module(module_name)
            _, _, fn = _function(module, qualname)
        except Exception:
            continue  # a submission that does not import: its tests fail on their own
        if not isinstance(fn, types.FunctionType) or target in _originals:
            continue
        _originals[target] = types.FunctionType(
            fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
        )
        _originals[target].__kwdefaults__ = fn.__kwdefaults__
        fn.__globals__[_CALL_NAME] = _call
        scope: dict = {}
        freevars = fn.__code__.co_freevars
        # a trampoline with the same free variables (a method using super() has __class__)
        outer = "\n".join(f"    {v} = None" for v in freevars) or "    pass"
        touch = "".join(f"        if False:\n            {v}\n" for v in freevars)
        exec(
            f"def _outer():\n{outer}\n    def _t(*args, **kwargs):\n{touch}"
            f"        return {_CALL_NAME}({target!r}, args, kwargs)\n    return _t\n",
            fn.__globals__ | {"__name__": "record"},
            scope,
        )
        fn.__code__ = scope["_outer"]().__code__


def _event(entry: dict) -> None:
    base = os.environ.get(RECORD_DIR_ENV)
    if base:
        with open(os.path.join(base, "events.jsonl"), "a") as f:
            f.write(json.dumps(entry) + "\n")


def pytest_addoption(parser: Any) -> None:
    """When pytest registers this plugin, before conftest.py and the package bind the names."""
    try:
        count_collectives()
    except Exception:
        pass


_stacks: Any = None  # where SIGUSR2 makes this process dump its stack (stacks-<pid>.txt)
_mask: set = set()  # the forking thread's signal mask before a fork


def _dump_stacks_on_sigusr2(base: str) -> None:
    """SIGUSR2 writes this process's Python stacks into its own file in ``base``: the judge asks
    a stuck test where it is. One file per process, since the forked ranks, writing at once
    into one inherited file, interleave their lines beyond reading (SIGUSR1 is the launcher's:
    its ranks take it for their own deadlock reports). A fork holds SIGUSR2 back until the new
    process has its own file: until then it would still write into its parent's."""
    global _stacks
    _stacks = open(os.path.join(base, f"stacks-{os.getpid()}.txt"), "a")
    faulthandler.register(signal.SIGUSR2, file=_stacks, all_threads=True)


def _hold_sigusr2() -> None:
    global _mask
    _mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})


def _release_sigusr2() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, _mask)


def pytest_configure(config: Any) -> None:
    base = os.environ.get(RECORD_DIR_ENV)
    if base:
        _dump_stacks_on_sigusr2(base)
        os.register_at_fork(
            before=_hold_sigusr2,
            after_in_parent=_release_sigusr2,
            after_in_child=lambda: (_dump_stacks_on_sigusr2(base), _release_sigusr2()),
        )
    _stopped.update(json.loads(os.environ.get(STOPPED_ENV, "{}")))
    install(json.loads(os.environ.get(TARGETS_ENV, "[]")))


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    global _out
    base = os.environ.get(RECORD_DIR_ENV)
    _out = os.path.join(base, "rec", test_folder(nodeid)) if base else None
    _counts.clear()
    _event({"start": nodeid, "at": time.time()})


_reported: set[str] = set()


def pytest_runtest_logreport(report: Any) -> None:
    from .grade_report import _cap, failure_reason

    if report.nodeid in _reported:
        return
    if report.failed:
        reason = failure_reason(report)
        outcome, output = "failed", f"{reason}\n\n{_cap(report.longreprtext)}"
    elif report.skipped:
        text = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
        outcome, reason, output = "skipped", text.removeprefix("Skipped: "), ""
    elif report.when == "call":
        outcome, reason, output = "passed", "", ""
    else:
        return
    _reported.add(report.nodeid)
    _event({"end": report.nodeid, "outcome": outcome, "reason": reason, "output": output})
