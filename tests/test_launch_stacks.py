"""A stuck rank's stack, asked for by the launcher (minitorch_dist/launching/child.py's
``_dump_stacks``): waited for, not given a fixed moment, since a busy machine may not run the
rank for a while."""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

from minitorch_dist.launching.child import _dump_stacks


def _spin(log: str) -> None:
    stacks = open(log + ".stack", "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=False)
    while True:
        time.sleep(0.01)


def test_a_rank_that_runs_late_has_its_stack_waited_for(tmp_path: Path) -> None:
    """Catches a launcher that reads a stuck rank's stack after a fixed 0.3 s: a rank the
    machine does not run for a second (stopped here, as a loaded machine's scheduler may leave
    it) has written nothing yet, and the error loses the reader's line. The dump is there when
    ``_dump_stacks`` returns, and the wait ends soon after the rank runs."""
    log = str(tmp_path / "rank0.log")
    rank = multiprocessing.get_context("fork").Process(target=_spin, args=(log,), daemon=True)
    rank.start()
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(log + ".stack"):  # the handler is registered
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
        os.kill(rank.pid, signal.SIGSTOP)
        threading.Timer(1.0, os.kill, (rank.pid, signal.SIGCONT)).start()
        start = time.monotonic()
        _dump_stacks([rank], [log], wait=20.0)
        waited = time.monotonic() - start
        text = Path(log + ".stack").read_text()
    finally:
        rank.kill()
        rank.join()
    assert "in _spin" in text, text
    assert 1.0 <= waited < 10.0, waited
