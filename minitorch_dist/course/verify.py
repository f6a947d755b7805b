"""The judge's comparison of a test's recordings with the reference's (minitorch_dist/course/judge.py).

A recording is one call of a task's function in a test: what it returned (or the exception type
it raised), its tensor arguments after the call, for a method what it left visible in its object,
and the families of collectives it called (minitorch_dist/course/record.py). The reference's recordings come from two runs of the
instructor's tree; a call count or value that differed between them is not compared. A
submission's call matches when it raised the same exception, or returned values within
``rtol=1e-3`` (floats) or equal (integers, strings), with tensor arguments and the reference's
attributes of the object likewise (for most of a method's calls: an object read while a
prefetch lands may differ by timing), and called at least the reference's families of
collectives. The messages say which function, which call
and which rank differ, never the reference's values.
"""

from __future__ import annotations

import io
import math
import os
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "UNSTABLE",
    "checks_anything",
    "load_reference",
    "read_recordings",
    "reference",
    "save_reference",
    "verify",
]

UNSTABLE = "\x00unstable"  # a reference value that differed between two runs: not compared
_MAX_FILE = 64 << 20
_MAX_FILES = 20_000


def read_recordings(folder: Path, uid: int | None = None) -> dict[str, list[dict]]:
    """A test's recordings: ``"rank|module:Qualname"`` -> its calls in order. Only regular files
    with one link (owned by ``uid`` when given) are read, without following links, and loaded as
    data (``weights_only``); anything else is ignored."""
    import torch

    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return {}
    found: dict[str, list[dict]] = {}
    try:
        for name in sorted(os.listdir(dfd))[:_MAX_FILES]:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > _MAX_FILE:
                    continue
                if uid is not None and st.st_uid != uid:
                    continue
                with os.fdopen(os.dup(fd), "rb") as f:
                    entry = torch.load(io.BytesIO(f.read(_MAX_FILE)), weights_only=True)
            except Exception:
                continue
            finally:
                os.close(fd)
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                key = f"{entry.get('rank')}|{entry['key']}"
                found.setdefault(key, []).append(
                    {k: entry[k] for k in entry if k not in ("rank", "key")}
                )
    finally:
        os.close(dfd)
    return found


def reference(first: dict[str, list], second: dict[str, list]) -> dict[str, Any]:
    """One test's reference recordings from two runs: a call count or value that differed is
    marked ``UNSTABLE`` (not compared)."""
    ref: dict[str, Any] = {}
    for key, calls in first.items():
        again = second.get(key)
        if again is None or len(again) != len(calls):
            ref[key] = UNSTABLE
        else:
            ref[key] = [
                a if _differ(a, b, exact=True) is None else UNSTABLE for a, b in zip(calls, again)
            ]
    return ref


def _value(a: Any, b: Any, where: str, exact: bool) -> str | None:
    """Why ``b`` (the submission's) differs from ``a`` (the reference's); None when it does not."""
    import torch

    if isinstance(a, str) and a == UNSTABLE:
        return None
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{where} is not a tensor"
        if a.shape != b.shape:
            return f"{where} has shape {list(b.shape)}, not {list(a.shape)}"
        if a.is_floating_point() or a.is_complex():
            if exact:
                return None if torch.equal(a, b) else f"{where} differs"
            if not (b.is_floating_point() or b.is_complex()):
                return f"{where} is not a floating-point tensor"
            x, y = a.double(), b.double()
            atol = 1e-4 * max(1.0, float(x.abs().max()) if x.numel() else 1.0)
            same = torch.allclose(y, x, rtol=1e-3, atol=atol, equal_nan=True)
            return None if same else f"{where} differs from the reference's values"
        return None if torch.equal(a.long(), b.long()) else f"{where} differs"
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a == b and type(a) is type(b) else f"{where} differs"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return None if a == b else f"{where} differs"
        if exact:
            return None if a == b or (math.isnan(a) and math.isnan(b)) else f"{where} differs"
        close = math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
        return None if close else f"{where} differs"
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return f"{where} has {len(b) if isinstance(b, list) else 'no'} items, not {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _value(x, y, f"{where}[{i}]", exact)
            if found:
                return found
        return None
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return f"{where} has other keys"
        for k in a:
            found = _value(a[k], b[k], f"{where}[{k!r}]", exact)
            if found:
                return found
        return None
    return None if a == b else f"{where} differs"


def _state_differs(a: dict, b: dict) -> str | None:
    """Why the object's state after a call differs from the reference's (its attributes only)."""
    found = None
    if isinstance(a, dict) and isinstance(a.get("state"), dict):
        state = b.get("state") if isinstance(b.get("state"), dict) else {}
        for name, value in a["state"].items():
            found = found or _value(value, state.get(name), f"self.{name} after the call", False)
    return found


def _differ(a: dict, b: dict, exact: bool = False, state: bool = True) -> str | None:
    if isinstance(a, str) and a == UNSTABLE:
        return None
    if "raised" in a or "raised" in b:
        if a.get("raised") == b.get("raised"):
            return None
        theirs = f"raised {a['raised']}" if "raised" in a else "returned"
        yours = f"raised {b['raised']}" if "raised" in b else "returned"
        return f"it {yours} where the reference {theirs}"
    missing = sorted(set(a.get("comm", [])) - set(b.get("comm", [])))
    if missing:
        return f"it called no {', '.join(missing)} where the reference did"
    found = _value(a.get("returned"), b.get("returned"), "the returned value", exact)
    if found is None and state and isinstance(a.get("state"), dict):
        state_of_b = b.get("state") if isinstance(b.get("state"), dict) else {}
        for name, value in a["state"].items():
            found = found or _value(
                value, state_of_b.get(name), f"self.{name} after the call", exact
            )
    if found or len(a.get("tensors", [])) != len(b.get("tensors", [])):
        return found
    return _value(a.get("tensors"), b.get("tensors"), "a tensor argument (after the call)", exact)


def _comparable(calls: Any) -> bool:
    """A reference function's calls hold something to compare (a stable count, one value)."""
    return isinstance(calls, list) and any(not isinstance(c, str) for c in calls)


def checks_anything(expected: dict[str, Any] | None) -> bool:
    """Whether a test's reference recordings hold something :func:`verify` compares."""
    return any(_comparable(calls) for calls in (expected or {}).values())


def verify(expected: dict[str, Any] | None, got: dict[str, list]) -> str | None:
    """Why a test's recordings ``got`` do not match the reference's ``expected`` (None: they do,
    or the reference recorded nothing to compare). A function called a different number of
    times than in the reference (a solution that inlines a helper) is not compared, but at
    least one function must match."""
    if not expected:
        return None
    matched, skipped = 0, []
    stable = {k: c for k, c in expected.items() if _comparable(c)}
    for key, calls in sorted(stable.items()):
        rank, _, target = key.partition("|")
        name = target.split(":")[-1]
        where = "the test's process" if rank == "-1" else f"rank {rank}"
        mine = got.get(key, [])
        if len(mine) != len(calls):
            skipped.append(f"{name} was called {len(mine)} time(s) on {where}, not {len(calls)}")
            continue
        for i, (a, b) in enumerate(zip(calls, mine)):
            found = _differ(a, b, state=False)
            if found:
                return f"{name}, call {i + 1} on {where}: {found}"
        # An object's state is read while other work may be in flight (a prefetch landing), so
        # a call's state may differ by timing: a method fails when most of its calls differ.
        states = [(i, _state_differs(a, b)) for i, (a, b) in enumerate(zip(calls, mine))]
        states = [
            (i, why) for i, why in states if isinstance(calls[i], dict) and "state" in calls[i]
        ]
        bad = [(i, why) for i, why in states if why]
        if states and 2 * len(bad) > len(states):
            i, why = bad[0]
            return f"{name}, call {i + 1} on {where}: {why} ({len(bad)} of {len(states)} calls)"
        matched += 1
    if stable and not matched:
        return skipped[0] if skipped else "no function of the task recorded a call"
    return None


def save_reference(refs: dict[str, dict], path: Path) -> None:
    import torch

    torch.save(refs, path)


def load_reference(path: Path) -> dict[str, dict]:
    import torch

    if not path.is_file():
        return {}
    return torch.load(path, weights_only=True)
