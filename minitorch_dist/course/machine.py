"""How fast and how busy this machine is, printed beside make's timings. Standard library only.

Runs on different (or differently loaded) machines can then be compared: :func:`machine_speed`
times a fixed Python loop, :func:`busy` says what share of the cores' time the jobs of
``make test`` kept busy, and where the rest went (idle, the disk, another virtual machine).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["busy", "cpu_times", "machine_speed"]


def machine_speed(n: int = 3_000_000) -> str:
    """The CPU seconds of a fixed pure-Python loop, as a phrase: this machine's speed, printed
    beside make's timings so that runs on different (or differently loaded) machines can be
    compared. The README's timings say what it took where they were measured."""
    start, total = time.process_time(), 0
    for i in range(n):
        total += i
    return f"a fixed Python loop of {n:,} additions took {time.process_time() - start:.2f} s of CPU"


def cpu_times() -> list[int] | None:
    """The machine's CPU time so far, in ticks, by state (Linux's /proc/stat; None elsewhere)."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None


def busy(before: list[int] | None, after: list[int] | None) -> str:
    """How busy the cores were between two :func:`cpu_times`: whether the jobs kept them so."""
    if not before or not after:
        return "cores busy: unknown (no /proc/stat)"
    d = [b - a for a, b in zip(before, after)]  # user nice system idle iowait irq softirq steal
    tick = os.sysconf("SC_CLK_TCK")
    work = sum(d) - d[3] - d[4]
    return (
        f"cores busy {100 * work / sum(d):.0f} % of the time ({work / tick:.0f} s of CPU: "
        f"user {(d[0] + d[1]) / tick:.0f} s, system {d[2] / tick:.0f} s; idle "
        f"{d[3] / tick:.0f} s, waiting on disk {d[4] / tick:.0f} s, stolen {d[7] / tick:.0f} s)"
    )
