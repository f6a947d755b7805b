"""A progress bar for long loops, silent wherever output must stay the same from run to run.

``for x in progress(items, desc="planner"): ...`` draws ``desc: |#####     | 12/40 3.1s`` on
stderr, rewritten in place with ``\\r``, when stderr is a terminal; in a notebook opened by a
person (JupyterLab, Notebook, VS Code, Colab) it is one line of output updated in place through an
``IPython.display`` handle. It draws nothing at all:

- when ``MINITORCH_DIST_PROGRESS=0`` (the make commands set it for the tests and the book),
- when ``CI`` is set, or inside a pytest run (``PYTEST_CURRENT_TEST``),
- when stderr is not a terminal and no person's notebook frontend is attached: notebooks run by
  nbval, nbclient or the book build get no progress line in their outputs.

A loop inside a loop that already shows progress stays silent (one line, the outer one). No
dependency (tqdm is not one of ours); at most one redraw per ``interval`` seconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["mode", "progress"]

T = TypeVar("T")
WIDTH = 24  # characters of the bar
_drawing = [0]  # how many bars are drawing now: only the outermost draws
# Set by the kernels a person's frontend starts: jupyter_server (Lab, Notebook 7), VS Code, Colab.
FRONTEND_ENV = ("JPY_SESSION_NAME", "VSCODE_PID", "VSCODE_CWD", "COLAB_RELEASE_TAG")


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return ip is not None and getattr(ip, "kernel", None) is not None


def mode() -> str | None:
    """Where progress is drawn now: ``"terminal"``, ``"notebook"`` or ``None`` (silent)."""
    env = os.environ
    if env.get("MINITORCH_DIST_PROGRESS", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    if env.get("CI") or env.get("PYTEST_CURRENT_TEST"):
        return None
    if _in_kernel():
        return "notebook" if any(env.get(k) for k in FRONTEND_ENV) else None
    try:
        return "terminal" if sys.stderr.isatty() else None
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return None


def _line(desc: str, n: int, total: int | None, seconds: float) -> str:
    head = f"{desc}: " if desc else ""
    if total:
        filled = min(WIDTH, WIDTH * n // total)
        return f"{head}|{'#' * filled}{' ' * (WIDTH - filled)}| {n}/{total} {seconds:.1f}s"
    return f"{head}{n} {seconds:.1f}s"


class _Terminal:
    def __init__(self) -> None:
        self.width = 0

    def draw(self, text: str, final: bool) -> None:
        pad = " " * max(0, self.width - len(text))  # wipe the end of a longer previous line
        self.width = len(text)
        sys.stderr.write(f"\r{text}{pad}" + ("\n" if final else ""))
        sys.stderr.flush()


class _Notebook:
    def __init__(self) -> None:
        from IPython.display import display

        self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def draw(self, text: str, final: bool) -> None:
        if self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)


def progress(
    iterable: Iterable[T], total: int | None = None, desc: str = "", *, interval: float = 0.1
) -> Iterator[T]:
    """Yield the items of ``iterable``, drawing how many have been done (of ``total``, taken
    from ``len(iterable)`` when not given) where :func:`mode` allows; silent otherwise."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    where = mode()
    if where is None or _drawing[0]:
        yield from iterable
        return
    out: Any = _Terminal() if where == "terminal" else _Notebook()
    start = last = time.perf_counter()
    n = 0
    out.draw(_line(desc, 0, total, 0.0), False)
    _drawing[0] += 1
    try:
        for item in iterable:
            yield item
            n += 1
            now = time.perf_counter()
            if now - last >= interval:
                out.draw(_line(desc, n, total, now - start), False)
                last = now
    finally:
        _drawing[0] -= 1
        out.draw(_line(desc, n, total, time.perf_counter() - start), True)
