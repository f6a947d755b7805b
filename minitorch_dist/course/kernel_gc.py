"""Build and test kernels that keep the imported libraries out of the garbage collector's walk.

CPython's cyclic garbage collector visits every tracked object on each full collection, and a
kernel that imported torch, matplotlib and the package holds hundreds of thousands of them that
live as long as the kernel. A chapter's kernel spent about a tenth of its CPU walking them again
and again (chapter 6 alone on a 2-core VM: 18.5 s of user time, 15.9 s with this; chapter 9:
15.9 s, 14.3 s). :func:`use` points ``IPYTHONDIR`` at a profile whose startup file calls
:func:`install` in each kernel the process starts: after a cell that imported modules, collect
once and ``gc.freeze()`` what is alive, so that later collections skip it. Objects the cells
make afterwards are collected as before; what a notebook prints does not change. Until the
first cell has run the collector is off, as ``tests/conftest.py`` keeps it off while pytest
collects. At exit the frozen objects stay frozen unless a library that counts its objects at
exit is loaded (:func:`unfreeze_if_counted`).

Used where the book's chapters and the labs are executed for the build and the tests (the
book's Sphinx extension, the ``kernel_ports`` nbval plugin). A reader's own kernel is left alone,
and so is a profile the user chose: an ``IPYTHONDIR`` already set is kept.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["NEW_MODULES", "install", "unfreeze_if_counted", "use"]

NEW_MODULES = 20  # a cell that imported at least this many modules is followed by a freeze
STARTUP = "import minitorch_dist.course.kernel_gc as k\nk.install(get_ipython())\n"


def install(shell: Any) -> None:
    """After each cell that left :data:`NEW_MODULES` more modules imported, collect and freeze.

    The collector is off until the first cell has run: that cell imports torch and the package,
    and collecting while their objects are made walks them again and again (about 0.5 s of the
    3.5 s of CPU that importing torch, numpy, matplotlib and the package takes on a 2-core VM).
    It is turned on once, so a cell's own ``gc.disable()`` is kept.
    """
    seen = [len(sys.modules)]  # what the kernel itself imported is frozen with the first cell
    first = [gc.isenabled()]  # whether to turn the collector on after the first cell
    gc.disable()

    def after_cell(result: object = None) -> None:
        if len(sys.modules) - seen[0] >= NEW_MODULES:
            gc.collect()
            gc.freeze()
            seen[0] = len(sys.modules)
        if first[0]:
            gc.enable()
            first[0] = False

    shell.events.register("post_run_cell", after_cell)
    atexit.register(unfreeze_if_counted)


def unfreeze_if_counted() -> None:
    """At exit, hand the frozen objects back to the collector if nanobind bindings are loaded.

    Frozen objects are never freed, and nanobind (triton's bindings, which CUDA builds of torch
    import) counts its objects at exit and reports those as leaked. Unfreezing costs the exit
    its full walk again, about 0.5 s of CPU per process after importing torch on a 2-core VM
    (2026-12-02), so it is paid only where that report would otherwise be printed.
    """
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None) or {}  # sys.modules may hold None or others
        if any(type(value).__name__ == "nb_func" for value in list(names.values())):
            gc.unfreeze()
            return


def use() -> None:
    """Give the kernels this process starts the startup file above (unless IPYTHONDIR is set)."""
    if os.environ.get("IPYTHONDIR"):
        return
    profile = (
        Path(tempfile.gettempdir()) / f"minitorch_dist-ipython-{getattr(os, 'getuid', lambda: 0)()}"
    )
    startup = profile / "profile_default" / "startup" / "00_kernel_gc.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    if not startup.exists() or startup.read_text() != STARTUP:
        part = startup.with_suffix(f".{os.getpid()}.part")  # never half a file for a kernel
        part.write_text(STARTUP)
        part.replace(startup)
    os.environ["IPYTHONDIR"] = str(profile)
