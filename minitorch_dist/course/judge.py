"""The autograder's judge: runs a submission's graded tests in child processes it never trusts,
and decides each test's score from data (for minitorch_dist/course/autograder.py).

The judge never imports a submitted file. Each child runs pytest on the tests left to run, as an
unprivileged user when the judge is root (``$AUTOGRADER_USER``, default ``nobody``), in its own
session, with the plugin of minitorch_dist/course/record.py: the child appends each test's start
and claimed outcome to an events file, and every call of a task's function writes its results
(tensors and plain values) into the test's folder. A test scores only when

* the child claimed it passed, and
* the recordings of the task's functions in that test match the reference's, recorded by the
  release on the instructor's tree (twice: a value that differed between the two runs is not
  compared) and shipped only in the bundle, where the child cannot read it.

A child that lies about an outcome (a monkeypatched pytest, a grader or launcher changed at
import, an exit hook, ``os._exit(0)``) gains nothing: without its functions' right results on the
test's inputs, the claim is not enough. Recordings are read with ``O_NOFOLLOW`` from files owned
by the child's user and loaded with ``torch.load(weights_only=True)``: no code of the child runs
in the judge. A test that runs past its limit is stopped (the child's whole session is killed),
the task's other tests fail at once naming it, and a new child grades the rest.
"""

from __future__ import annotations

import io
import json
import math
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import RECORD_DIR_ENV, TARGETS_ENV, test_folder

__all__ = ["Outcome", "read_recordings", "reference", "run_tests", "sandbox_ids", "verify"]

UNSTABLE = "\x00unstable"  # a reference value that differed between two runs: not compared
_MAX_FILE = 64 << 20
_MAX_FILES = 20_000
_MAX_EVENTS = 64 << 20


@dataclass
class Outcome:
    status: str  # "passed" | "failed" | "skipped"
    reason: str = ""
    output: str = ""


def sandbox_ids() -> tuple[int, int] | None:
    """(uid, gid) the children run as: ``$AUTOGRADER_USER`` (default ``nobody``) when the judge
    is root; None (the judge's own user) otherwise, or when no such user exists."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(os.environ.get("AUTOGRADER_USER", "nobody"))
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def give_to(path: Path, ids: tuple[int, int] | None) -> None:
    """Make ``path`` (a folder tree) the children's: owned by their user when sandboxed."""
    if ids is None:
        return
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, *ids)
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), *ids, follow_symlinks=False)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the child and whatever it forked)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass


def _events(path: Path, offset: int) -> tuple[list[dict], int]:
    """New well-formed entries of the child's events file from ``offset``."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(_MAX_EVENTS)
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    entries = []
    for line in data[:end].splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries, offset + end


def run_tests(
    tree: Path,
    tests: dict[str, dict],
    out: Path,
    targets: list[str],
    *,
    test_timeout: float,
    total_timeout: float,
    ids: tuple[int, int] | None = None,
) -> dict[str, Outcome]:
    """Run ``tests`` (nodeid -> {"task": ...}) in children on ``tree``; recordings go to
    ``out/rec``. Returns each test's claimed outcome (a test the children never finished:
    failed, with why)."""
    out.mkdir(parents=True, exist_ok=True)
    give_to(out, ids)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update(
        PYTHONPATH=str(tree),
        HOME=str(out),
        TMPDIR=str(out),
        PYTHONDONTWRITEBYTECODE="1",
        MPLBACKEND="Agg",
        **{RECORD_DIR_ENV: str(out), TARGETS_ENV: json.dumps(targets)},
    )
    results: dict[str, Outcome] = {}
    stopped: dict[str, str] = {}  # task -> why its other tests do not run
    deadline = time.monotonic() + total_timeout
    events, offset, rounds = out / "events.jsonl", 0, 0
    while True:
        todo = []
        for nodeid in tests:
            task = tests[nodeid]["task"]
            if nodeid in results:
                continue
            if task in stopped:
                results[nodeid] = Outcome("failed", f"not run: {task} {stopped[task]}")
            else:
                todo.append(nodeid)
        if not todo or time.monotonic() > deadline:
            break
        rounds += 1
        log = open(out / f"log-{rounds}.txt", "wb")
        cmd = [sys.executable, "-m", "pytest", *todo, "-p", "minitorch_dist.course.record"]
        cmd += ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tree)]
        kwargs: dict[str, Any] = {}
        if ids is not None:
            kwargs = {"user": ids[0], "group": ids[1], "extra_groups": []}
        child = subprocess.Popen(
            cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, **kwargs,
        )  # fmt: skip
        current, since, before = None, 0.0, len(results)
        while True:
            done = child.poll() is not None
            new, offset = _events(events, offset)
            for e in new:
                if isinstance(e.get("start"), str) and e["start"] in tests:
                    current, since = e["start"], time.monotonic()
                elif e.get("end") in tests and e["end"] not in results:
                    results[e["end"]] = Outcome(
                        e.get("outcome") if e.get("outcome") in ("passed", "skipped") else "failed",
                        str(e.get("reason", ""))[:300],
                        str(e.get("output", ""))[:12_000],
                    )
                    current = None if e["end"] == current else current
            if done:
                break
            late = current is not None and time.monotonic() - since > test_timeout
            if late or time.monotonic() > deadline:
                _kill_session(child.pid)
                child.wait()
                if late:
                    name = current.split("::")[-1]
                    results[current] = Outcome(
                        "failed",
                        f"timed out: ran past {test_timeout:g} s (an endless loop, or a wait "
                        "that never ends)",
                    )
                    stopped[tests[current]["task"]] = f"timed out in {name}: fix that test first"
                    current = None
                break
            time.sleep(0.2)
        _kill_session(child.pid)  # ranks it forked and left behind
        log.close()
        if current is not None and current not in results:
            results[current] = Outcome(
                "failed",
                f"the test process ended during this test (exit code {child.returncode}): "
                "os._exit, a crash, or a killed process",
            )
        if len(results) == before:  # no progress: what is left did not run at all
            break
    tail = _log_tail(out, rounds)
    for nodeid in tests:
        if nodeid not in results:
            why = "did not run: its test file did not import, or the run stopped"
            results[nodeid] = Outcome("failed", why, f"{why}\n\n{tail}")
    return results


def _log_tail(out: Path, rounds: int) -> str:
    if not rounds:
        return ""
    try:
        return (out / f"log-{rounds}.txt").read_bytes()[-3000:].decode(errors="replace")
    except OSError:
        return ""


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


def _differ(a: dict, b: dict, exact: bool = False) -> str | None:
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
    if found or len(a.get("tensors", [])) != len(b.get("tensors", [])):
        return found
    return _value(a.get("tensors"), b.get("tensors"), "a tensor argument (after the call)", exact)


def _comparable(calls: Any) -> bool:
    """A reference function's calls hold something to compare (a stable count, one value)."""
    return isinstance(calls, list) and any(not isinstance(c, str) for c in calls)


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
            found = _differ(a, b)
            if found:
                return f"{name}, call {i + 1} on {where}: {found}"
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


def clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def folder_of(out: Path, nodeid: str) -> Path:
    return out / "rec" / test_folder(nodeid)
