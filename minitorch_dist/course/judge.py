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
the task's other tests fail at once naming it, and a new child grades the rest, in which a call
of that task's functions fails at once (``record.TaskStopped``): a test of another task that
needs it is reported "needs labNN.k first" without waiting out the limit again.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import RECORD_DIR_ENV, STOPPED_ENV, TARGETS_ENV, test_folder
from .stuck import open_plain, stuck_at

__all__ = ["Outcome", "folder_of", "give_to", "run_tests", "sandbox_ids"]

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
        with open_plain(path) as f:
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
    targets: dict[str, str],
    *,
    test_timeout: float,
    total_timeout: float,
    ids: tuple[int, int] | None = None,
) -> dict[str, Outcome]:
    """Run ``tests`` (nodeid -> {"task": ...}) in children on ``tree``; ``targets`` maps each
    task's function (``module:Qualname``) to its task; recordings go to ``out/rec``. Returns
    each test's claimed outcome (a test the children never finished: failed, with why). A test
    that runs past ``test_timeout`` is stopped where it is stuck: the task whose code it was
    running is named with the student's line, and its other tests (and those of the test's own
    task, when that waited on it) are not run."""
    out.mkdir(parents=True, exist_ok=True)
    give_to(out, ids)
    logs = out.with_name(out.name + "-logs")  # the judge's own: the child cannot plant links
    logs.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update(
        PYTHONPATH=str(tree),
        HOME=str(out),
        TMPDIR=str(out),
        PYTHONDONTWRITEBYTECODE="1",
        MPLBACKEND="Agg",
        **{RECORD_DIR_ENV: str(out), TARGETS_ENV: json.dumps(sorted(targets))},
    )
    results: dict[str, Outcome] = {}
    stopped: dict[str, str] = {}  # task -> why its other tests do not run
    stuck: dict[str, str] = {}  # task -> the test in which its code ran past the limit
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
        # a later test that calls a stuck task's function fails at once (record.TaskStopped)
        env[STOPPED_ENV] = json.dumps(
            {
                f: f"{t} timed out in {stuck[t]}: not run again"
                for f, t in targets.items()
                if t in stuck
            }
        )
        log = open(logs / f"log-{rounds}.txt", "wb")
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
                where = stuck_at(child.pid, out, tree, targets) if late else None
                _kill_session(child.pid)
                child.wait()
                if late:
                    name, task = current.split("::")[-1], tests[current]["task"]
                    culprit, line = where or (task, "")
                    stuck.setdefault(culprit, name)
                    if culprit == task:
                        reason = f"timed out: ran past {test_timeout:g} s{line}"
                        stopped[task] = f"timed out in {name}: fix that test first"
                    else:
                        reason = (
                            f"needs {culprit} first: its code ran past {test_timeout:g} s{line}"
                        )
                        stopped[culprit] = f"timed out in {name} (a test of {task}){line}"
                        stopped[task] = f"needs {culprit} first (it timed out in {name})"
                    results[current] = Outcome("failed", reason[:300], reason)
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
    tail = _log_tail(logs, rounds)
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


def folder_of(out: Path, nodeid: str) -> Path:
    return out / "rec" / test_folder(nodeid)
