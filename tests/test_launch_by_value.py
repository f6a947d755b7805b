"""launch(..., start_method="spawn"): a notebook's or a script's own functions run on ranks that
were not forked, because minitorch_dist.launching.by_value sends them by value.

The launches run in a subprocess whose ``__main__`` is a script file (spawn re-imports it, so the
launch sits under ``if __name__ == "__main__"``) or code executed as a notebook cell is (no file:
spawn imports nothing of it). Plain pickle would send ``__main__.fn`` by name, and the ranks
would fail with "Can't get attribute 'fn' on <module '__main__'>".
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_dist.launching import by_value

ROOT = Path(__file__).resolve().parents[1]

# The user's code: one function calling other __main__ functions (recursive, mutually too), a global
# constant, a lambda, a closure, a default argument, a module used by name and a tensor argument.
USER_CODE = """
import json
import math

import torch
import torch.distributed as dist

from minitorch_dist import launch

SCALE = 3
square = lambda x: x * x


def helper(x):
    return x * SCALE + math.floor(0.5)


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def is_even(n):
    return n == 0 or is_odd(n - 1)


def is_odd(n):
    return n != 0 and is_even(n - 1)


def make_adder(k):
    def add(x, extra=100):
        return x + k + extra
    return add


add_ten = make_adder(10)


def work(rank, world_size, t):
    t.add_(rank)  # each rank's own copy: the caller's tensor and the other rank's stay as sent
    total = t.clone()
    dist.all_reduce(total)
    print(f"rank {rank} of {world_size}")
    return [helper(rank), fact(4), add_ten(rank), square(rank + 1), is_even(rank + 4), total.tolist()]
"""

LAUNCH = """
t = torch.ones(2)
results = launch(work, 2, t, start_method="spawn", ranks="all")
print(json.dumps({"results": results, "caller": t.tolist()}))
"""


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=240, env=env, **kw
    )


def _check(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "[rank 0] rank 0 of 2" in lines and "[rank 1] rank 1 of 2" in lines, proc.stdout
    got = json.loads(lines[-1])
    assert got["results"] == [
        [0, 24, 110, 1, True, [3.0, 3.0]],
        [3, 24, 111, 4, False, [3.0, 3.0]],
    ]
    assert got["caller"] == [1.0, 1.0]


def test_spawn_runs_a_scripts_own_functions(tmp_path):
    """A script run as __main__: spawn re-imports it as __mp_main__, and the functions go by
    value all the same."""
    script = tmp_path / "train.py"
    body = textwrap.indent(LAUNCH, "    ")
    script.write_text(USER_CODE + '\n\nif __name__ == "__main__":\n' + body)
    _check(_run([str(script)], cwd=tmp_path))


def test_spawn_runs_a_notebooks_own_functions(tmp_path):
    """Code executed in __main__ with no file behind it, as a notebook kernel runs a cell: the
    ranks have nothing to import it from."""
    cell = USER_CODE + LAUNCH
    runner = (
        "import __main__\n"
        f"exec(compile({cell!r}, '<ipython-input-1>', 'exec'), __main__.__dict__)\n"
    )
    _check(_run(["-c", runner], cwd=tmp_path))


def test_spawn_reports_a_failing_rank_and_refuses_a_main_class(tmp_path):
    """A rank's exception comes back with the user's line; a class defined in __main__ cannot
    reach a fresh interpreter, and launch says so before starting any rank."""
    cell = """
from minitorch_dist import launch
from minitorch_dist.launching import LaunchError, RankError

class Box:
    pass

def uses_box(rank, world_size):
    return Box()

def boom(rank, world_size):
    if rank == 1:
        raise ValueError("rank one is unhappy")
    return rank

try:
    launch(uses_box, 2, start_method="spawn")
except LaunchError as e:
    print("LaunchError:", e)
try:
    launch(boom, 2, start_method="spawn")
except RankError as e:
    print("RankError:", e)
"""
    runner = f"import __main__\nexec(compile({cell!r}, '<cell>', 'exec'), __main__.__dict__)\n"
    proc = _run(["-c", runner], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "LaunchError: a rank started without fork gets uses_box" in proc.stdout
    assert "class Box is defined in __main__" in proc.stdout
    assert "RankError: rank 1 of 2 failed with ValueError: rank one is unhappy" in proc.stdout
    assert 'File "<cell>", line 13, in boom' in proc.stdout


def _closure():
    """A function pickle cannot find by name: a closure that calls itself through its cell."""

    def countdown(n):
        return [] if n == 0 else [n, *countdown(n - 1)]

    return countdown


def test_by_value_rebuilds_in_a_fresh_interpreter():
    """The pickle holds the code, not a name: a fresh interpreter with this process's path (as
    spawn gives its ranks) runs the closure, recursive through its own cell, and a partial of it;
    its globals are its module's, imported by name."""
    import functools

    countdown = _closure()
    data = by_value.dumps((countdown, functools.partial(countdown, 2)))
    code = (
        "import sys, pickle\n"
        "f, p = pickle.loads(sys.stdin.buffer.read())\n"
        "print(f(3), p(), f.__qualname__)\n"
    )
    path = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=data,
        capture_output=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=path),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == "[3, 2, 1] [2, 1] _closure.<locals>.countdown"
    with pytest.raises(AttributeError):  # the plain pickle: no such name at module level
        pickle.dumps(countdown)


def test_a_platform_without_fork_is_offered_spawn(monkeypatch):
    """The error on a platform without fork names start_method='spawn'."""
    from minitorch_dist.launching import LaunchError
    from minitorch_dist.launching import launcher as launcher_module

    real = launcher_module.mp.get_context

    def no_fork(method: str | None = None):
        if method == "fork":
            raise ValueError("cannot find context for 'fork'")
        return real(method)

    monkeypatch.setattr(launcher_module.mp, "get_context", no_fork)
    with pytest.raises(LaunchError, match="start_method='spawn'"):
        launcher_module.launch(lambda rank, world_size: rank, 2)
    with pytest.raises(ValueError, match="start_method must be"):
        launcher_module.launch(lambda rank, world_size: rank, 2, start_method="thread")
