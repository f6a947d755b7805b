"""``@own_process``: run a test's body in a forked process of its own.

A backward under ``FakeTensorMode`` (``measure_step_fake``, the planner's exact count) starts
autograd's device threads, and newer torch (2.15) then refuses autograd in every process forked
afterwards ("Unable to handle autograd's threading in combination with fork-based
multiprocessing"). In the pytest process that would fail every later test that launches ranks.
A test that runs such a backward outside a launched rank wears this decorator: its body runs in
a child forked from the clean pytest process, and the child's exception (an assertion, a skip)
is raised again here, so the test reads and reports as usual. Fixtures still run in the pytest
process, before the fork.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import pytest

_TIMEOUT_S = 300.0
# pytest's outcomes do not pickle: the child sends their name and message
_OUTCOMES = {"skip": pytest.skip, "xfail": pytest.xfail, "fail": pytest.fail}


def _run_and_send(test: Callable[..., Any], args: tuple, kwargs: dict, conn: Any) -> None:
    try:
        test(*args, **kwargs)
        conn.send(None)
    except BaseException as exc:  # an assertion, pytest.skip, anything: the parent raises it
        for name, outcome in _OUTCOMES.items():
            if type(exc) is outcome.Exception:
                conn.send((name, exc.msg))
                return
        text = traceback.format_exc()
        try:
            conn.send((exc, text))
        except Exception:  # an exception that does not pickle: send its text
            conn.send((RuntimeError(text), text))
    finally:
        conn.close()


def own_process(test: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``test`` so that its body runs in a forked child of the pytest process."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        ctx = mp.get_context("fork")
        ours, theirs = ctx.Pipe(duplex=False)
        with warnings.catch_warnings():  # Python >= 3.12: forking a process that has threads
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            child = ctx.Process(target=_run_and_send, args=(test, args, kwargs, theirs))
            child.start()
        theirs.close()
        try:
            if not ours.poll(_TIMEOUT_S):
                raise TimeoutError(f"{test.__name__} ran more than {_TIMEOUT_S:.0f} s")
            result = ours.recv()
        except EOFError:
            child.join(timeout=5)
            raise RuntimeError(
                f"{test.__name__}'s process exited with code {child.exitcode} before reporting"
            ) from None
        finally:
            if child.is_alive():
                child.join(timeout=5)
            if child.is_alive():
                child.kill()
            ours.close()
        if result is not None and result[0] in _OUTCOMES:
            _OUTCOMES[result[0]](result[1])
        if result is not None:
            exc, text = result
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised in the test's own process:\n{text}")
            raise exc

    return run
