"""Which frames of a rank's traceback or stack are the reader's own, so that an error shows
the reader's line rather than the launcher's waiting loop (for :mod:`.report` and
:mod:`.launcher`).

A frame is the reader's unless it lies in Python's standard library, in an installed package
(``site-packages``: torch) or in this launcher (``minitorch_dist/launching``). A rank's traceback
keeps the reader's frames and says how many others it left out; a launch that is interrupted (a
test's time limit, Ctrl-C in a notebook) adds a note saying where each rank was.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
from collections.abc import Callable

__all__ = ["innermost", "is_users", "trim_traceback", "where_ranks_were"]

_LAUNCHING = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = tuple(
    sorted({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")}, key=len)
)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_FILE = re.compile(r'File "([^"]+)"')


def _short_paths(text: str) -> str:
    """File names in an error message without this machine's paths: ``site-packages/torch/...``,
    ``minitorch_dist/...`` (relative to the repository), ``<notebook cell>`` for a kernel's cell."""

    return _FILE.sub(lambda match: f'File "{short_name(match.group(1))}"', text)


def short_name(name: str) -> str:
    """A file name without this machine's paths (see :func:`_short_paths`)."""
    if re.search(r"/ipykernel_\d+/\d+\.py$", name):
        return "<notebook cell>"
    if "/site-packages/" in name:
        return f"site-packages/{name.split('/site-packages/', 1)[1]}"
    if name.startswith(_REPO):
        return name[len(_REPO) :]
    return name


# "  File "x", line 3, in f" (a traceback) or "  File "x", line 3 in f" (faulthandler's dump)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+),? in (\S+)')


def is_users(path: str) -> bool:
    """Whether a frame in file ``path`` (absolute, or shortened by the launch's errors) is the
    reader's code: not the standard library, an installed package or this launcher."""
    norm = path.replace(os.sep, "/")
    if norm.startswith("<frozen") or "/site-packages/" in f"/{norm}" or "/dist-packages/" in norm:
        return False
    if path.startswith(_STDLIB) or path.startswith(_LAUNCHING):
        return False
    return "minitorch_dist/launching/" not in f"/{norm}"


def trim_traceback(text: str) -> str:
    """A rank's traceback with only the reader's frames: each run of other frames (torch,
    Python, the launcher) becomes one line saying how many were left out. Unchanged when no
    frame is the reader's."""
    lines = text.splitlines(keepends=True)
    frames = [
        i for i, line in enumerate(lines) if line.startswith("  File ") and _FRAME.match(line)
    ]
    if not any(is_users(_FRAME.match(lines[i]).group(1)) for i in frames):
        return text
    out: list[str] = []
    hidden = 0
    i = 0
    while i < len(lines):
        match = _FRAME.match(lines[i]) if lines[i].startswith("  File ") else None
        if match is None:
            if hidden:
                out.append(f"  ({hidden} frame(s) of torch, Python or the launcher left out)\n")
                hidden = 0
            out.append(lines[i])
            i += 1
            continue
        end = i + 1  # the frame's source line and its ^^^ markers
        while end < len(lines) and lines[end].startswith("    "):
            end += 1
        if is_users(match.group(1)):
            if hidden:
                out.append(f"  ({hidden} frame(s) of torch, Python or the launcher left out)\n")
                hidden = 0
            out += lines[i:end]
        else:
            hidden += 1
        i = end
    return "".join(out)


# torch's callbacks into a dispatch mode (a CommCounter counting collectives): a layer between
# the reader's line and torch, not where the reader's code is
_HOOKS = {"__torch_dispatch__", "__torch_function__"}


def innermost(text: str, dump: bool = False) -> tuple[str, int, str] | None:
    """(file, line, function) of the innermost frame of the reader's code in a traceback (the
    last one) or, with ``dump``, in a faulthandler stack dump (most recent call first: the
    first one). None when no frame is the reader's."""
    found = [
        (m.group(1), int(m.group(2)), m.group(3))
        for m in map(_FRAME.match, text.splitlines())
        if m is not None and is_users(m.group(1)) and m.group(3) not in _HOOKS
    ]
    if not found:
        return None
    return found[0] if dump else found[-1]


def where_ranks_were(stacks: list[str], short: Callable[[str], str] | None = None) -> str:
    """A note for an interrupted launch: for each rank whose stack dump shows the reader's
    code, its innermost frame and source line. ``short`` shortens a file name. Empty when no
    dump shows the reader's code."""
    rows = []
    for rank, stack in enumerate(stacks):
        frame = innermost(stack, dump=True)
        if frame is None:
            continue
        path, number, function = frame
        source = linecache.getline(path, number).strip()
        name = short(path) if short is not None else path
        rows.append(
            f"  rank {rank}: {name}:{number} in {function}" + (f": {source}" if source else "")
        )
    if not rows:
        return ""
    return "where the ranks were when the launch was interrupted:\n" + "\n".join(rows)


def _where(rank: int, log: str) -> str:
    """The reader's frames of a stuck rank's faulthandler dump (frames.is_users; all but
    multiprocessing's when none is), addresses dropped: output stays stable."""
    frames = [line.strip() for line in log.splitlines() if line.startswith("  File ")]
    mine = [f for f in frames if is_users(_FILE.search(f).group(1))]
    frames = mine or [f for f in frames if "multiprocessing" not in f]
    return f"\nrank {rank} was stuck at:\n    " + "\n    ".join(frames[:6]) if frames else ""
