"""Jupyter kernels on ports that no forked rank can take (jupyter_client issue 487).

jupyter_client picks a kernel's five ports by binding port 0 and closing the socket; the kernel
binds them a second or two later. ``make test`` runs the labs' nbval, the book's chapters and the
other tests at once, and their forked ranks open thousands of sockets on the kernel's ephemeral
range (TCPStore's port 0, gloo's connections): one of them can take a port in that gap, and the
kernel dies before it answers ("Kernel died before replying to kernel_info"). :func:`install`
makes jupyter_client pick kernel ports below the ephemeral range instead, where only a process
that asks for a port by number binds. Used as a pytest plugin by nbval runs
(``-p minitorch_dist.course.kernel_ports``) and installed by the book's Sphinx extension.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

__all__ = ["ephemeral_start", "install", "quiet_port"]

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # kernel ports go in [LOWEST, start of the ephemeral range)
_pick = random.SystemRandom()  # no seed a notebook sets makes two processes pick alike


def ephemeral_start() -> int:
    """The first port of the range the OS hands out for port 0 and outgoing connections
    (Linux's ``ip_local_port_range``; elsewhere IANA's 49152)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49_152


def quiet_port(ip: str, taken: Collection[int] = ()) -> int:
    """A free port on ``ip`` below :func:`ephemeral_start`, not in ``taken``."""
    start = ephemeral_start()
    if start - LOWEST < 1_000:
        raise ValueError(f"the ephemeral range starts at {start}: no quiet ports below it")
    for _ in range(1_000):
        port = _pick.randrange(LOWEST, start)
        if port in taken:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((ip, port))
            except OSError:
                continue
        return port
    raise OSError(f"no free port between {LOWEST} and {start} on {ip}")


def install() -> None:
    """Make jupyter_client's port cache hand out :func:`quiet_port` ports (once per process)."""
    from jupyter_client.connect import LocalPortCache

    if getattr(LocalPortCache, "_minitorch_dist_quiet", False):
        return

    def find_available_port(self: LocalPortCache, ip: str) -> int:
        port = quiet_port(ip, self.currently_used_ports)
        self.currently_used_ports.add(port)
        return port

    LocalPortCache.find_available_port = find_available_port
    LocalPortCache._minitorch_dist_quiet = True


def pytest_configure(config: object) -> None:
    """As a pytest plugin (``-p minitorch_dist.course.kernel_ports``): install at start, and
    give the kernels the garbage-collector freeze of :mod:`minitorch_dist.course.kernel_gc`."""
    from minitorch_dist.course.kernel_gc import use

    install()
    use()
