"""Every lab stays deterministic: nbval passes on its committed outputs twice in a row.

``python -m minitorch_dist.make test`` already runs nbval on every lab once (``pytest tests labs
--nbval``) and passes ``MINITORCH_DIST_NBVAL_PASSES`` on: unset there, it is 0 and this test skips
(make test runs each lab once); CI (``.ci/run``) sets 1, so this test adds the second run only and
CI pays for two runs, not three; alone, this test runs both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(p.stem for p in (ROOT / "labs").glob("lab*.ipynb")))
def test_lab_passes_nbval_twice_in_a_row(lab: str) -> None:
    """Catches output that changes from run to run (ports, pids, timings, warnings that come and
    go), which would make the committed outputs of a rank-launching notebook flaky."""
    from minitorch_dist.course.make import NBVAL  # make test's own nbval options

    cmd = [
        sys.executable,
        "-m",
        "pytest",
        f"labs/{lab}.ipynb",
        *NBVAL,
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    passes = int(os.environ.get("MINITORCH_DIST_NBVAL_PASSES", "2"))
    if passes == 0:
        pytest.skip("the determinism pass runs in CI (MINITORCH_DIST_NBVAL_PASSES=1 in .ci/run)")
    env = {k: v for k, v in os.environ.items() if k != "MINITORCH_DIST_PIN_RANKS"}  # as a reader
    for attempt in range(1, passes + 1):
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, f"run {attempt}:\n{run.stdout[-4000:]}{run.stderr[-2000:]}"


def test_kernel_ports_stay_below_the_ephemeral_range() -> None:
    """Catches a kernel port a forked rank's socket could take in the moment before the kernel
    binds it (make test runs the labs, the book and the other tests at once)."""
    from jupyter_client.connect import LocalPortCache

    from minitorch_dist.course.kernel_ports import LOWEST, ephemeral_start, install

    start = ephemeral_start()
    install()
    cache = LocalPortCache.instance()
    ports = [cache.find_available_port("127.0.0.1") for _ in range(20)]
    assert all(LOWEST <= p < start for p in ports), ports
    assert len(set(ports)) == 20, "the cache handed one port out twice"
    for p in ports:
        cache.return_port(p)


def test_make_tests_jobs_run_every_test_once() -> None:
    """Catches a test file in one of make test's course jobs that is not marked ``course``: the
    jobs of the other tests (``-m "not course"``) would run it a second time."""
    from conftest import COURSE_MODULES

    from minitorch_dist.course.make import GRADING_TESTS

    assert {f"test_{name}" for name in GRADING_TESTS} <= COURSE_MODULES
    assert all((ROOT / "tests" / f"test_{name}.py").exists() for name in GRADING_TESTS)


def test_build_kernels_freeze_what_their_imports_made(tmp_path: Path, monkeypatch) -> None:
    """Catches a kernel of the build or of nbval that still walks torch's objects on every full
    collection (a tenth of a chapter's CPU), and a freeze that changes what a cell prints or
    keeps a cell's garbage: the frozen count grows after the import cell only (frozen objects that
    are freed leave it), and a cycle made later is still collected. Also a collector left off
    after the first cell, and one turned on again after a cell turned it off."""
    import nbformat
    from nbclient import NotebookClient

    from minitorch_dist.course.kernel_gc import use

    monkeypatch.setenv("IPYTHONDIR", "")  # unset for use(), and what use() sets is undone after
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    use()
    cells = [
        "import gc, weakref\nbefore = gc.get_freeze_count()\nprint(before, gc.isenabled())",
        "import torch, json, email.mime.text, xml.dom.minidom, http.server, unittest",
        "after_import = gc.get_freeze_count()\nprint(after_import > before, gc.isenabled())",
        "class Cycle:\n    pass\nc = Cycle(); c.me = c; gone = weakref.ref(c); del c\n"
        "gc.collect(); print(gone() is None, gc.get_freeze_count() <= after_import)",
        "gc.disable()",
        "import sqlite3, csv, tarfile, zipfile, argparse, logging.handlers, decimal, fractions\n"
        "print(gc.isenabled())",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    printed = [o.get("text", "") for c in nb.cells for o in c.outputs]
    assert printed == ["0 False\n", "True True\n", "True True\n", "False\n"], printed


def test_tests_run_with_the_collector_on_and_collection_frozen() -> None:
    """Catches a conftest that leaves the collector off after collection (every cycle a test
    makes would then live until exit), and one that no longer freezes what collection built."""
    import gc

    assert gc.isenabled()
    assert gc.get_freeze_count() > 100_000


def test_exit_unfreezes_only_where_bindings_count_their_objects() -> None:
    """Catches an exit that walks every frozen object again (about 0.5 s of CPU per test or
    kernel process), one that keeps them frozen when nanobind is loaded (triton then reports
    leaked functions at the end of every run on CUDA builds), and a scan that trips on the
    ``None`` entries sys.modules may hold."""
    code = (
        "import gc, sys, types\n"
        "from minitorch_dist.course.kernel_gc import unfreeze_if_counted\n"
        "gc.collect(); gc.freeze(); frozen = gc.get_freeze_count()\n"
        "sys.modules['absent_optional_dependency'] = None\n"
        "unfreeze_if_counted(); kept = gc.get_freeze_count() == frozen > 0\n"
        "bindings = types.ModuleType('bindings'); bindings.f = type('nb_func', (), {})()\n"
        "sys.modules['bindings'] = bindings\n"
        "unfreeze_if_counted(); print(kept, gc.get_freeze_count())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "True 0\n", run.stdout


def test_make_says_how_busy_the_cores_were() -> None:
    """Catches a share of busy time that counts waiting on the disk as work, or idle as busy."""
    from minitorch_dist.course.machine import busy

    # ticks: user nice system idle iowait irq softirq steal
    line = busy([0] * 8, [100, 50, 50, 150, 50, 0, 0, 0])
    assert line.startswith(
        "cores busy 50 % of the time (2 s of CPU: user 2 s, system 0 s; idle 2 s"
    )
    assert "waiting on disk 0 s" in line
    assert busy(None, [1] * 8).startswith("cores busy: unknown")
